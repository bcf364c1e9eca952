// `vkattn bench sparse`: block-sparse attention (FlexAttention's contract) at
// B=4, H=32, S=8192, head size 128, f16, over the masks FlexAttention is
// usually measured with: causal, sliding window 1024, 8 documents (causal
// within each), prefix-LM 2048 and a random 25% of the blocks, plus the dense
// non-causal run the random mask's time is compared with, and causal with K/V
// from the paged cache (f16 and fp8_e4m3, NHD, blocks of 16). TFLOP/s count only
// the (query, key) pairs that count, 4 * head_size FLOP each; "density" says
// what share of all pairs that is, and the time should follow it. Each case
// is first checked against the float64 reference on a smaller proxy with the
// same mods and block sizes (params "verified_on").
#include <vkattn/vkattn.hpp>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "bench/suites.hpp"
#include "runners/block_sparse_runner.hpp"

namespace vkattn::tool {

std::vector<BenchOp> sparse_cases(Context& ctx, bool quick) {
  std::vector<BenchOp> ops;
  const uint32_t n = quick ? 16 : 1;   // lengths divide by this on a CPU device
  const uint32_t S = 8192 / n, H = quick ? 4 : 32;
  auto add = [&](const std::string& name, const std::string& mask, const std::string& proxy_mask, const std::string& paged_kv = "",
                 std::optional<DType> cache_dtype = std::nullopt) {
    BlockSparseCase c;
    c.paged_kv = paged_kv;
    c.paged_kv_dtype = cache_dtype;
    c.batch = quick ? 1 : 4;
    c.q_heads = c.kv_heads = H;
    c.head_size = 128;
    c.q_len = c.kv_len = S;
    c.q_block = c.kv_block = quick ? 64 : 128;
    c.mask = mask;
    auto timed = std::make_shared<BlockSparseTimed>(ctx, c);
    BlockSparseCase proxy = c;
    proxy.batch = 1;
    proxy.q_heads = proxy.kv_heads = 2;
    proxy.q_len = proxy.kv_len = quick ? 256 : 1024;
    proxy.mask = proxy_mask;
    proxy.timing_repetitions = 0;
    BenchOp op;
    op.info.name = name;
    char density[32];
    std::snprintf(density, sizeof density, "%.4f", timed->density());
    op.info.params = {{"batch", std::to_string(c.batch)}, {"heads", std::to_string(H)}, {"seq_len", std::to_string(S)},
                      {"head_size", "128"}, {"dtype", "f16"}, {"mask", mask}, {"density", density},
                      {"blocks", std::to_string(c.q_block) + "x" + std::to_string(c.kv_block)},
                      {"verified_on", "B=1 H=2 S=" + std::to_string(proxy.q_len) + " mask " + proxy_mask}};
    if (!paged_kv.empty()) {
      op.info.params["kv"] = "paged cache " + paged_kv + ", blocks of " + std::to_string(c.paged_kv_block_size);
      op.info.params["cache_dtype"] = cache_dtype ? std::string(dtype_name(*cache_dtype)) : std::string("f16");
    }
    op.info.flops = timed->flops();
    op.info.bytes = 0;
    op.info.bound = "compute";
    op.record = [timed](VkCommandBuffer cmd, uint32_t) { timed->record(cmd); };
    // The proxy's run also builds its mask on the device and compares the lists with the host's.
    auto verify = [&ctx, proxy]() {
      const RunResult r = run_block_sparse(ctx, proxy);
      return Verification{r.pass, r.max_abs_err, r.max_rel_err, r.failure};
    };
    op.verify = verify;
    ops.push_back(std::move(op));
    // The mask's construction on the device (build_block_mask), which
    // FlexAttention users pay in create_block_mask: its time beside the attention's.
    if (mask.find("random") == std::string::npos && mask != "full" && paged_kv.empty()) {
      BenchOp build;
      build.info.name = "  mask build: " + name;
      build.info.params = {{"mask", mask}, {"seq_len", std::to_string(S)},
                           {"blocks", std::to_string(c.q_block) + "x" + std::to_string(c.kv_block)},
                           {"verified_on", "the proxy's lists against the host builder's"}};
      build.info.bound = "compute";
      build.record = [timed](VkCommandBuffer cmd, uint32_t) { timed->record_mask_build(cmd); };
      build.verify = verify;
      ops.push_back(std::move(build));
    }
  };
  const std::string s = std::to_string(S);
  add("causal S=" + s, "causal", "causal");
  add("sliding window " + std::to_string(1024 / n) + " S=" + s, "causal,window:" + std::to_string(1024 / n), "causal,window:128");
  add("8 documents S=" + s, "causal,document:8", "causal,document:8");
  add("prefix-LM " + std::to_string(2048 / n) + " S=" + s, "prefix:" + std::to_string(2048 / n), "prefix:256");
  add("random 25% of blocks S=" + s, "random:0.25", "random:0.25");
  add("dense S=" + s, "full", "full");
  // K/V from the paged cache (FlexAttention over a paged sequence, as an
  // engine keeps it), f16 and fp8: the same causal work as the first case.
  add("causal S=" + s + ", paged cache", "causal", "causal", "nhd");
  add("causal S=" + s + ", paged fp8_e4m3 cache", "causal", "causal", "nhd", DType::fp8_e4m3);
  return ops;
}

}  // namespace vkattn::tool
