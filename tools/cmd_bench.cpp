#include <vkattn/vkattn.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <regex>

#include "bench/ceilings.hpp"
#include "bench/serve_bench.hpp"
#include "bench/suites.hpp"
#include "commands.hpp"
#include "gpu_timer.hpp"
#include "report/bench_report.hpp"
#include "report/progress.hpp"
#include "report/svg_plot.hpp"

namespace vkattn::tool {

namespace {

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

template <class Writer>
void write_file(const std::string& path, Writer&& w) {
  std::ofstream out(path);
  if (!out) throw Error("cannot write '" + path + "'");
  w(out);
  if (!out) throw Error("writing '" + path + "' failed");
  std::cerr << "wrote " << path << "\n";
}

// Refuses, before anything runs, an output file that write_file could not
// write at the end: a directory, or a file that cannot be opened or created
// (created here only to see that it can be, then removed). Devices and pipes
// (/dev/stdout, a shell's >(...)) are left alone: opening them would consume
// the reader's end.
void check_writable(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  namespace fs = std::filesystem;
  const std::string what = "--" + flag + ": cannot write '" + path + "': ";
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::directory) throw cli::UsageError(what + "it is a directory");
  const bool exists = st.type() != fs::file_type::not_found;
  if (exists && ec) throw cli::UsageError(what + ec.message());
  if (exists && st.type() != fs::file_type::regular) return;
  const int fd = exists ? ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC)
                        : ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) throw cli::UsageError(what + std::strerror(errno));
  ::close(fd);
  if (!exists) ::unlink(path.c_str());
}

std::string suite_list() {
  std::string s;
  for (const auto& x : suites()) s += (s.empty() ? "" : ", ") + x.name;
  return s;
}

}  // namespace

int cmd_bench(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << "usage: vkattn bench SUITE [flags]\nsuites:\n";
    for (const auto& s : suites()) std::cout << "  " << s.name << std::string(16 - std::min<size_t>(15, s.name.size()), ' ') << s.description << "\n";
    std::cout << "`vkattn bench SUITE --help` lists the flags.\n";
    return args.empty() ? 2 : 0;
  }
  const Suite* suite = find_suite(args[0]);
  if (!suite) {
    std::vector<std::string> names;
    for (const auto& s : suites()) names.push_back(s.name);
    std::string hint;
    if (auto near = cli::nearest(args[0], names)) hint = " (did you mean '" + *near + "'?)";
    throw cli::UsageError("unknown suite '" + args[0] + "'" + hint + "; suites: " + suite_list());
  }
  cli::Flags f("vkattn bench " + suite->name, suite->description);
  DeviceFlags dev(f);
  auto& json = f.add_string("json", "", "write every figure to FILE as JSON");
  auto& csv = f.add_string("csv", "", "write every figure to FILE as CSV");
  auto& plot = f.add_string("plot", "", "draw the sweep as SVG to FILE (name it .svg)");
  auto& filter = f.add_string("filter", "", "only cases whose name matches this regular expression");
  auto& repeat = f.add_int("repeat", 30, "at least N timed repetitions per case", 1, 100000);
  auto& min_time = f.add_double("min-time", 0.05, "at least this many seconds of GPU time per case", 0.0, 600.0);
  auto& quick = f.add_bool("quick", false, "small sizes (CPU devices, smoke tests)");
  auto& rounds = f.add_int("rounds", 1,
                           "time every case N times in this process, its inputs made anew in new memory each round (rounds after the first named \"(round K)\")",
                           1, 100);
  const bool serve = suite->name == "serve";
  ServeOptions so;
  bool* host_only = nullptr;
  std::vector<int64_t>* batches = nullptr;
  int64_t *layers = nullptr, *context = nullptr, *chunk = nullptr, *steps = nullptr;
  const bool decode = suite->name == "decode" || suite->name == "prefill";
  std::string *dtype = nullptr, *cache_dtype = nullptr, *layout = nullptr, *prefill_kernel = nullptr;
  int64_t *block_size = nullptr, *segments = nullptr, *head_size = nullptr;
  int64_t *q_heads = nullptr, *kv_heads = nullptr, *query_len = nullptr;
  if (decode) {
    dtype = &f.add_choice("dtype", "f16", {"f16", "bf16"}, "q and out dtype");
    cache_dtype = &f.add_choice("cache-dtype", "same", {"same", "f16", "bf16", "fp8_e4m3", "fp8_e5m2"},
                                "KV cache dtype (same: --dtype's; GB/s counts its bytes)");
    block_size = &f.add_int("block-size", 16, "tokens per cache block", 1, 1024);
    layout = &f.add_choice("layout", "nhd", {"nhd", "hnd", "split"}, "KV cache layout");
    prefill_kernel = &f.add_choice("prefill-kernel", "auto", {"auto", "on", "off"},
                                   "run long sequences on the prefill kernel (auto: when the batch fills the GPU)");
    segments = &f.add_int("segments", 0, "split every case's KV ranges into N segments (0: the plan's choice; 1: unsplit; for schedule experiments)", 0, 256);
    q_heads = &f.add_int("q-heads", 0, "query heads of every case (0: 32, or 8 with --quick)", 0, 1024);
    kv_heads = &f.add_int("kv-heads", 0, "kv heads of every case, dividing --q-heads (0: 8, or 2 with --quick)", 0, 1024);
  }
  if (suite->name == "decode")
    query_len = &f.add_int("query-len", 1, "new tokens per decoding sequence (2 or more: speculative decoding's rows)", 1, 64);
  if (decode)
    head_size = &f.add_int("head-size", 0, "run every case at this head size (a multiple of 16; 0: each case's own)", 0, 256);
  std::vector<int64_t> *decode_batches = nullptr, *decode_contexts = nullptr;
  if (suite->name == "decode") {
    auto sweep = [](const auto& values) { return std::vector<int64_t>(std::begin(values), std::end(values)); };
    decode_batches = &f.add_int_list("batch", sweep(DecodeOptions::kSweepBatches),
                                     "decoding sequences per case (with --quick: 1,4 unless given)", 1, 4096);
    decode_contexts = &f.add_int_list("context", sweep(DecodeOptions::kSweepContexts),
                                      "context of every sequence (with --quick: 100,300 unless given)", 1, 1 << 20);
  }
  if (serve) {
    host_only = &f.add_bool("host-only", false, "plan and record every step but submit nothing: host costs alone");
    batches = &f.add_int_list("batch", {1, 16, 64, 256}, "decoding sequences per step", 1, 4096);
    layers = &f.add_int("layers", 32, "attention layers per step", 1, 1024);
    context = &f.add_int("context", 4096, "context of every sequence at the start", 1, 1 << 20);
    chunk = &f.add_int("prefill-chunk", 256, "tokens of prefill in every step of the mixed cases", 1, 1 << 16);
    steps = &f.add_int("steps", 20, "timed steps per case", 1, 100000);
  }
  f.parse(std::vector<std::string>(args.begin() + 1, args.end()));
  if (f.help_requested()) { std::cout << f.help(); return 0; }
  std::regex re;
  try {
    re = std::regex(filter.empty() ? ".*" : filter);
  } catch (const std::regex_error& e) {
    throw cli::UsageError("--filter: '" + filter + "' is not a regular expression (" + e.what() + ")");
  }
  if (serve && rounds > 1) throw cli::UsageError("--rounds " + std::to_string(rounds) + ": the serve suite times its steps itself; expected 1");
  check_writable("json", json);
  check_writable("csv", csv);
  check_writable("plot", plot);

  Context ctx(dev.options());
  MeasureOptions mo;
  mo.repeat = static_cast<uint32_t>(repeat);
  mo.min_time_s = min_time;
  mo.warmup_time_s = std::min(0.1, min_time * 2);
  // Verification runs the float64 reference on the host; the GPU idles meanwhile.
  mo.before_timing = [&ctx, quick = bool(quick)]() { spin_up(ctx, quick); };

  report::BenchMeta meta;
  meta.suite = suite->name;
  meta.device = ctx.capabilities().device_name;
  meta.driver = ctx.capabilities().driver_name + " " + ctx.capabilities().driver_info;
  meta.path = std::string(path_name(ctx.path_for("bench_matmul_peak")));
  meta.library_version = version_string;
  meta.timestamp = utc_now();

  std::vector<report::BenchCase> results;
  // Every suite measures the ceilings in the same run; the ceilings suite is
  // just them, and host-only serving needs none.
  const bool no_ceilings = suite->name == "ceilings" || (serve && *host_only);
  std::vector<BenchOp> ceilings = no_ceilings ? std::vector<BenchOp>{} : ceiling_ops(ctx, quick);
  report::Progress progress(ceilings.size(), "bench " + suite->name);
  auto absorb = [&](const report::BenchCase& c) { absorb_ceiling(meta.ceilings, c); };
  for (auto& op : ceilings) {
    progress.step(op.info.name);
    measure(ctx, op, mo);
    absorb(op.info);
  }
  // After each case, the f16 matrix peak and the copy again for a few
  // milliseconds each: a figure read while the machine ran slow is retimed,
  // and flagged if it stays.
  const BenchOp *matrix = nullptr, *copy = nullptr;
  for (const auto& op : ceilings) {
    if (op.info.bound == "compute" && op.info.params.count("dtype") && op.info.params.at("dtype") == "f16") matrix = &op;
    if (op.info.bound == "memory") copy = &op;
  }
  if (matrix && copy) {
    mo.machine_ceiling = {meta.ceilings.f16_tflops, meta.ceilings.copy_gbps};
    mo.machine_check = [&ctx, matrix, copy]() {
      auto median_us = [&](const BenchOp& op) {
        return median_time_us(ctx, [&](VkCommandBuffer cmd) { op.record(cmd, 0); }, 5, 5000);
      };
      const double matrix_us = median_us(*matrix), copy_us = median_us(*copy);
      return MachineRates{matrix->info.flops / matrix_us * 1e-6, copy->info.bytes / copy_us * 1e-3};
    };
  }
  if (serve) {
    so.quick = quick;
    so.host_only = *host_only;
    so.batches = *batches;
    so.layers = static_cast<uint32_t>(*layers);
    so.context = static_cast<uint32_t>(*context);
    so.prefill_chunk = static_cast<uint32_t>(*chunk);
    so.steps = static_cast<uint32_t>(*steps);
    so.filter = filter;
    so.before_timing = mo.before_timing;
    results = serve_cases(ctx, so);
  }
  // The cases of one round (made anew each round: new inputs, new buffers).
  auto make_ops = [&]() {
    std::vector<BenchOp> ops;
    if (decode) {
      DecodeOptions d;
      d.dtype = parse_dtype(*dtype);
      d.cache_dtype = *cache_dtype == "same" ? d.dtype : parse_dtype(*cache_dtype);
      d.block_size = static_cast<uint32_t>(*block_size);
      d.layout = parse_layout(*layout);
      d.prefill = *prefill_kernel == "on" ? PrefillKernel::on : *prefill_kernel == "off" ? PrefillKernel::off : PrefillKernel::automatic;
      d.segments = static_cast<uint32_t>(*segments);
      d.q_heads = static_cast<uint32_t>(*q_heads);
      d.kv_heads = static_cast<uint32_t>(*kv_heads);
      {
        const int64_t qh = *q_heads ? *q_heads : (quick ? 8 : 32), kh = *kv_heads ? *kv_heads : (quick ? 2 : 8);
        if (qh % kh)
          throw cli::UsageError("--q-heads " + std::to_string(qh) + " and --kv-heads " + std::to_string(kh) +
                                ": expected kv heads that divide the q heads");
      }
      if (query_len) {
        d.query_len = static_cast<uint32_t>(*query_len);
        const int64_t shortest = f.was_set("context") ? *std::min_element(decode_contexts->begin(), decode_contexts->end())
                                                      : (quick ? 100 : DecodeOptions::kSweepContexts[0]);
        if (*query_len > shortest)
          throw cli::UsageError("--query-len " + std::to_string(*query_len) + ": expected at most the shortest context (" +
                                std::to_string(shortest) + ")");
      }
      if (head_size) {
        if (*head_size % 16) throw cli::UsageError("--head-size " + std::to_string(*head_size) + ": expected a multiple of 16 (16 to 256), or 0");
        d.head_size = static_cast<uint32_t>(*head_size);
      }
      auto grid = [&](const char* name, const std::vector<int64_t>* v, std::vector<uint32_t>& to) {
        if (v && f.was_set(name)) for (int64_t x : *v) to.push_back(static_cast<uint32_t>(x));
      };
      grid("batch", decode_batches, d.batches);
      grid("context", decode_contexts, d.contexts);
      ops = suite->name == "prefill" ? prefill_cases(ctx, quick, d) : decode_cases(ctx, quick, d);
    } else if (!serve) {
      ops = suite->cases(ctx, quick);
    }
    return ops;
  };
  // Each round's cases are made while the previous round's still hold their
  // memory, so that their buffers lie elsewhere (a figure that follows where
  // its inputs lie changes from one round to the next).
  std::vector<BenchOp> previous;
  for (int64_t round = 1; round <= rounds; ++round) {
    std::vector<BenchOp> ops = make_ops();
    previous.clear();
    for (auto& op : ops) {
      if (!std::regex_search(op.info.name, re)) continue;
      if (round > 1) op.info.name += " (round " + std::to_string(round) + ")";
      progress.step(op.info.name);
      measure(ctx, op, mo);
      if (suite->name == "ceilings") absorb(op.info);
      results.push_back(op.info);
    }
    previous = std::move(ops);
  }
  previous.clear();
  progress.finish();
  // The path in the title is the one the cases ran on (a plan may choose its
  // own, e.g. decode on the scalar kernel), not merely the device's best.
  std::string case_paths;
  for (const auto& c : results) {
    auto it = c.params.find("path");
    const std::string p = it == c.params.end() ? meta.path : it->second;
    if (case_paths.empty()) case_paths = p;
    else if (case_paths != p) case_paths = "mixed (see each case)";
  }
  if (!case_paths.empty() && suite->name != "ceilings") meta.path = case_paths;
  if (results.empty()) throw cli::UsageError("--filter '" + filter + "' matches no case of suite " + suite->name);

  report::write_table(std::cout, meta, results);
  if (serve) write_serve_table(std::cout, results, so.host_only);
  if (!json.empty()) write_file(json, [&](std::ostream& o) { report::write_json(o, meta, results); });
  if (!csv.empty()) write_file(csv, [&](std::ostream& o) { report::write_csv(o, meta, results); });
  if (!plot.empty()) write_file(plot, [&](std::ostream& o) { report::write_svg(o, meta, results, suite->metric); });
  for (const auto& m : ctx.validation_messages()) std::cerr << "validation error: " << m << "\n";
  return ctx.validation_messages().empty() ? 0 : 1;
}

}  // namespace vkattn::tool
