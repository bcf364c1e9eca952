#include <vkattn/vkattn.hpp>

#include <cstdio>
#include <functional>
#include <iostream>

#include "bench/ceilings.hpp"
#include "commands.hpp"
#include "runners/block_sparse_runner.hpp"
#include "runners/paged_attention_runner.hpp"
#include "runners/write_kv_cache_runner.hpp"
#include "serve/serving_loop.hpp"

namespace vkattn::tool {

namespace {

int report(const Context& ctx, const RunResult& r, const char* kernel) {
  std::printf("%s\n", r.summary.c_str());
  std::printf("device %s, path %s\n", ctx.capabilities().device_name.c_str(),
              r.path.empty() ? std::string(path_name(ctx.path_for(kernel))).c_str() : r.path.c_str());
  std::printf("max abs error %.3g, max rel error %.3g\n", r.max_abs_err, r.max_rel_err);
  std::printf("tolerance: %s\n", r.tolerance.c_str());
  if (r.gpu_us > 0 && r.flops > 0)
    std::printf("time %.2f us (median GPU time), %.1f TFLOP/s\n", r.gpu_us, r.flops / (r.gpu_us * 1e6));
  else if (r.gpu_us > 0)
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

const std::vector<std::string>& run_op_names() {
  static const std::vector<std::string> ops = {"serve", "write-kv-cache", "paged-attention", "prefix-prefill", "block-sparse"};
  return ops;
}

int cmd_run(const std::vector<std::string>& args) {
  const std::vector<std::string>& ops = run_op_names();
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << "usage: vkattn run OP [flags]\n"
                 "ops:\n"
                 "  serve             a serving loop: every layer's write_kv_cache + paged_attention per step, each step verified\n"
                 "  write-kv-cache    scatter K/V tokens into a paged cache\n"
                 "  paged-attention   attention of a varlen batch over a paged cache (decode, prefill, split-KV)\n"
                 "  prefix-prefill    new tokens over a cached prefix (paged) and causally over their own K/V tensors\n"
                 "  block-sparse      FlexAttention-style block-sparse attention: block masks, mask and score mods\n"
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
  if (op == "prefix-prefill") {
    cli::Flags f("vkattn run prefix-prefill",
                 "Prefix prefill of a random varlen batch: each sequence's context in a random paged cache, its new tokens' "
                 "K/V in their own tensors (their cache slots hold NaN), checked against the float64 reference");
    DeviceFlags dev(f);
    PagedAttentionFlags pf(f, /*prefix=*/true);
    f.parse(rest);
    if (f.help_requested()) { std::cout << f.help(); return 0; }
    PagedAttentionCase c = pf.apply();
    return run_and_report(dev, "paged_attention", [&](Context& ctx) {
      c.before_timing = spin_up_before_timing(ctx);
      return run_paged_attention(ctx, c);
    });
  }
  if (op == "block-sparse") {
    cli::Flags f("vkattn run block-sparse",
                 "Block-sparse attention (FlexAttention's contract) with a block mask built from the mask mods, checked "
                 "against the float64 reference");
    DeviceFlags dev(f);
    BlockSparseCase c;
    auto& batch = f.add_int("batch", c.batch, "batch", 1, 65535);
    auto& kv_batch = f.add_int("kv-batch", 0, "K/V batch: 0 = --batch, 1 = broadcast", 0, 1);
    auto& q_heads = f.add_int("q-heads", c.q_heads, "query heads", 1, 1024);
    auto& kv_heads = f.add_int("kv-heads", c.kv_heads, "K/V heads (must divide --q-heads)", 1, 1024);
    auto& head_size = f.add_int("head-size", c.head_size, "head size (multiple of 16, 16..256)", 16, 256);
    auto& v_head_size = f.add_int("v-head-size", 0, "V's head size when it differs (0: --head-size)", 0, 256);
    auto& q_len = f.add_int("q-len", c.q_len, "query length Lq", 0, 1 << 24);
    auto& kv_len = f.add_int("kv-len", c.kv_len, "key length Lkv", 0, 1 << 24);
    auto& q_block = f.add_int("q-block", c.q_block, "the mask's q block size", 1, 32768);
    auto& kv_block = f.add_int("kv-block", c.kv_block, "the mask's kv block size", 1, 32768);
    auto& mask = f.add_string("mask", c.mask,
                              "mask mods, comma-separated, all must admit a pair: causal, window:N, document:N, prefix:N "
                              "(prefix-LM), random:DENSITY (random blocks), full");
    auto& score = f.add_string("score", "", "score mods, comma-separated: softcap:C, alibi, relbias, bias");
    auto& mask_heads = f.add_int("mask-heads", 1, "the mask's head extent Sh (1 or --q-heads)", 1, 65535);
    auto& dtype = f.add_choice("dtype", "f16", {"f16", "bf16"}, "q, K and V dtype");
    auto& out_dtype = f.add_choice("out-dtype", "f16", {"f16", "bf16", "f32"}, "output dtype");
    auto& lse = f.add_bool("lse", false, "also write and check the LSE and the row max");
    auto& paged_kv = f.add_choice("paged-kv", "none", {"none", "nhd", "hnd", "split"},
                                  "K/V from a paged cache of this layout (blocks in shuffled order) rather than views");
    auto& cache_dtype = f.add_choice("cache-dtype", "same", {"same", "fp8_e4m3", "fp8_e5m2"},
                                     "with --paged-kv: the cache's dtype (same: q's; fp8: k_scale 0.5, v_scale 0.25)");
    auto& cache_block = f.add_int("cache-block-size", c.paged_kv_block_size, "with --paged-kv: the cache's block size", 1, 1024);
    auto& cache_chunks = f.add_int("cache-chunks", c.paged_kv_chunks, "with --paged-kv: the cache's chunks (buffers)", 1, 64);
    auto& seed = f.add_int("seed", 1, "random seed", 0);
    auto& reps = f.add_int("repeat", 20, "timed repetitions (0: none)", 0, 100000);
    f.parse(rest);
    if (f.help_requested()) { std::cout << f.help(); return 0; }
    c.paged_kv = paged_kv == "none" ? "" : paged_kv;
    for (const char* flag : {"cache-block-size", "cache-chunks"})
      if (c.paged_kv.empty() && f.was_set(flag))
        throw Error(std::string("--") + flag + " needs --paged-kv (the K/V views have no cache)");
    c.paged_kv_block_size = uint32_t(cache_block);
    c.paged_kv_chunks = uint32_t(cache_chunks);
    if (cache_dtype != "same") {
      if (c.paged_kv.empty()) throw Error("--cache-dtype " + cache_dtype + " needs --paged-kv (the K/V views are q's dtype)");
      c.paged_kv_dtype = parse_dtype(cache_dtype);
    }
    c.batch = uint32_t(batch);
    c.kv_batch = uint32_t(kv_batch);
    c.q_heads = uint32_t(q_heads);
    c.kv_heads = uint32_t(kv_heads);
    c.head_size = uint32_t(head_size);
    c.v_head_size = uint32_t(v_head_size);
    c.q_len = uint32_t(q_len);
    c.kv_len = uint32_t(kv_len);
    c.q_block = uint32_t(q_block);
    c.kv_block = uint32_t(kv_block);
    c.mask = mask;
    c.score = score;
    c.mask_heads = uint32_t(mask_heads);
    c.dtype = parse_dtype(dtype);
    c.out_dtype = parse_dtype(out_dtype);
    c.lse = c.row_max = lse;
    c.seed = uint64_t(seed);
    c.timing_repetitions = uint32_t(reps);
    return run_and_report(dev, "block_sparse", [&](Context& ctx) {
      c.before_timing = spin_up_before_timing(ctx);
      return run_block_sparse(ctx, c);
    });
  }
  if (op == "serve") {
    cli::Flags f("vkattn run serve",
                 "A model-like serving loop (tools/serve/serving_loop.hpp): decode steps with a chunk of prefill mixed in, "
                 "every layer's write_kv_cache and paged_attention recorded into the loop's own command buffers; every "
                 "step checked against the float64 reference");
    DeviceFlags dev(f);
    auto& layers = f.add_int("layers", 4, "attention layers", 1, 1024);
    auto& batch = f.add_int("batch", 4, "decoding sequences", 1, 4096);
    auto& context = f.add_int("context", 200, "their context at the start", 1, 1 << 20);
    auto& chunk = f.add_int("prefill-chunk", 24, "tokens of prefill on mixed steps (0: none)", 0, 1 << 16);
    auto& every = f.add_int("mixed-every", 3, "every n-th step is mixed", 1, 1 << 20);
    auto& steps = f.add_int("steps", 6, "steps, each verified", 1, 100000);
    auto& q_heads = f.add_int("q-heads", 8, "query heads", 1, 1024);
    auto& kv_heads = f.add_int("kv-heads", 2, "KV heads (must divide --q-heads)", 1, 1024);
    auto& head_size = f.add_int("head-size", 64, "head size (multiple of 16, 16..256)", 16, 256);
    auto& replay = f.add_bool("replay", false, "record each kind of step once and submit it again every step");
    f.parse(rest);
    if (f.help_requested()) { std::cout << f.help(); return 0; }
    ServeConfig c;
    c.layers = uint32_t(layers);
    c.batch = uint32_t(batch);
    c.context = uint32_t(context);
    c.prefill_chunk = uint32_t(chunk);
    c.mixed_every = uint32_t(every);
    c.steps = uint32_t(steps);
    c.num_q_heads = uint32_t(q_heads);
    c.num_kv_heads = uint32_t(kv_heads);
    c.head_size = uint32_t(head_size);
    c.replay = replay;
    c.random_values = true;
    Context ctx(dev.options());
    ServingLoop loop(ctx, c);
    bool pass = true;
    double host = 0, gpu = 0, worst = 0;
    std::string failure;
    for (uint32_t i = 0; i < c.steps && pass; ++i) {
      const StepTimes t = loop.step();
      gpu += loop.finish();
      host += t.host_us;
      const RunResult r = loop.verify(i % c.layers);
      worst = std::max(worst, r.max_abs_err);
      if (!r.pass) failure = "step " + std::to_string(i) + (t.mixed ? " (mixed)" : "") + ": " + r.failure;
      pass = r.pass;
    }
    std::printf("serve: %u steps of %u layers, %u sequences decoding over %u+ tokens, a %u-token prefill chunk every %u steps, %s\n",
                c.steps, c.layers, c.batch, c.context, c.prefill_chunk, c.mixed_every, c.replay ? "replayed" : "planned every step");
    std::printf("device %s, path %s\n", ctx.capabilities().device_name.c_str(),
                std::string(path_name(ctx.path_for("paged_attention"))).c_str());
    std::printf("every step: new K/V bit-exact in their slots, attention of one layer within the paged-attention tolerance; max abs error %.3g\n", worst);
    std::printf("host %.1f us per step (metadata, plan, recording %u layers, submission), GPU %.1f us per step\n",
                host / c.steps, c.layers, gpu / c.steps);
    for (const auto& m : ctx.validation_messages()) std::fprintf(stderr, "validation error: %s\n", m.c_str());
    std::printf("%s%s%s\n", pass ? "PASS" : "FAIL", pass ? "" : ": ", failure.c_str());
    return pass && ctx.validation_messages().empty() ? 0 : 1;
  }
  std::string hint;
  if (auto near = cli::nearest(op, ops)) hint = " (did you mean '" + *near + "'?)";
  throw cli::UsageError("unknown op '" + op + "'" + hint + "; ops: serve, write-kv-cache, paged-attention, prefix-prefill");
}

}  // namespace vkattn::tool
