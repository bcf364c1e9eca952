#include <vkattn/vkattn.hpp>

#include <cstdio>
#include <functional>
#include <iostream>

#include "bench/ceilings.hpp"
#include "commands.hpp"
#include "runners/paged_attention_runner.hpp"
#include "runners/write_kv_cache_runner.hpp"

namespace vkattn::tool {

namespace {

int report(const Context& ctx, const RunResult& r, const char* kernel) {
  std::printf("%s\n", r.summary.c_str());
  std::printf("device %s, path %s\n", ctx.capabilities().device_name.c_str(),
              std::string(path_name(ctx.path_for(kernel))).c_str());
  std::printf("max abs error %.3g, max rel error %.3g\n", r.max_abs_err, r.max_rel_err);
  std::printf("tolerance: %s\n", r.tolerance.c_str());
  if (r.gpu_us > 0)
    std::printf("time %.2f us (median GPU time), %.1f GB/s\n", r.gpu_us, r.bytes / (r.gpu_us * 1e3));
  else
    std::printf("time: not measured (--repeat 0, or no timestamp queries on this queue)\n");
  std::printf("%s%s%s\n", r.pass ? "PASS" : "FAIL", r.pass ? "" : ": ", r.failure.c_str());
  return r.pass ? 0 : 1;
}

// Opens the device, runs, reports; validation errors fail the run.
template <class Run>
int run_and_report(const DeviceFlags& dev, const char* kernel, Run&& run) {
  Context ctx(dev.options());
  int rc = report(ctx, run(ctx), kernel);
  for (const auto& m : ctx.validation_messages()) std::fprintf(stderr, "validation error: %s\n", m.c_str());
  return ctx.validation_messages().empty() ? rc : 1;
}

// As vkattn bench: GPU clocks up before timing (bench/ceilings.hpp); a short
// one on CPU devices.
std::function<void()> spin_up_before_timing(Context& ctx) {
  return [&ctx] { spin_up(ctx, ctx.capabilities().device_type == "CPU"); };
}

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  const std::vector<std::string> ops = {"write-kv-cache", "paged-attention"};
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << "usage: vkattn run OP [flags]\n"
                 "ops:\n"
                 "  write-kv-cache    scatter K/V tokens into a paged cache\n"
                 "  paged-attention   attention of a varlen batch over a paged cache (decode, prefill, split-KV)\n"
                 "`vkattn run OP --help` lists the op's flags.\n";
    return args.empty() ? 2 : 0;
  }
  const std::string op = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (op == "write-kv-cache") {
    cli::Flags f("vkattn run write-kv-cache", "Scatter random K/V tokens into a poisoned paged cache and verify every byte");
    DeviceFlags dev(f);
    WriteKvCacheFlags wf(f);
    f.parse(rest);
    if (f.help_requested()) { std::cout << f.help(); return 0; }
    WriteKvCacheCase c = wf.apply();
    return run_and_report(dev, "write_kv_cache", [&](Context& ctx) {
      c.before_timing = spin_up_before_timing(ctx);
      return run_write_kv_cache(ctx, c);
    });
  }
  if (op == "paged-attention") {
    cli::Flags f("vkattn run paged-attention",
                 "Paged attention of a random varlen batch over a random paged cache, checked against the float64 reference");
    DeviceFlags dev(f);
    PagedAttentionFlags pf(f);
    f.parse(rest);
    if (f.help_requested()) { std::cout << f.help(); return 0; }
    PagedAttentionCase c = pf.apply();   // flag errors before the device opens
    return run_and_report(dev, "paged_attention", [&](Context& ctx) {
      c.before_timing = spin_up_before_timing(ctx);
      return run_paged_attention(ctx, c);
    });
  }
  std::string hint;
  if (auto near = cli::nearest(op, ops)) hint = " (did you mean '" + *near + "'?)";
  throw cli::UsageError("unknown op '" + op + "'" + hint + "; ops: write-kv-cache, paged-attention");
}

}  // namespace vkattn::tool
