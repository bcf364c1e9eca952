// `vkattn bench write-kv-cache`: scatter throughput for prefill-sized and
// decode-sized token counts, f16 and fp8 caches.
#include <vkattn/vkattn.hpp>
#include <vkattn_ref/random.hpp>
#include <vkattn_ref/tensor_data.hpp>

#include <cstring>
#include <memory>
#include <vector>

#include "bench/suites.hpp"
#include "runners/write_kv_cache_runner.hpp"

namespace vkattn::tool {

namespace {

// Each copy's views are made once, as an engine keeps its step's: made in
// the record, their shapes were heap allocations in every timed repetition.
struct WriteViews {
  TensorView key, value, slots;
};
// Rotating copies live side by side in one buffer per role (few, large allocations).
struct WriteInputs {
  std::unique_ptr<Buffer> keys, values, slots;
  std::unique_ptr<PagedKvCache> cache;
  std::vector<WriteViews> views;   // per copy
};

BenchOp write_case(Context& ctx, uint32_t tokens, DType cache_dtype) {
  const uint32_t H = 8, D = 128, bs = 16;
  KvCacheConfig cfg{.num_blocks = std::max<uint32_t>(64, 4 * tokens / bs), .block_size = bs, .num_kv_heads = H,
                    .head_size = D, .dtype = cache_dtype, .layout = KvLayout::nhd, .k_scale = 0.05f, .v_scale = 0.05f};
  auto in = std::make_shared<WriteInputs>();
  in->cache = std::make_unique<PagedKvCache>(ctx, cfg);
  const uint64_t in_bytes = uint64_t(tokens) * H * D * 2;
  const uint32_t copies = rotation_copies(2 * in_bytes + 2 * uint64_t(tokens) * H * D * dtype_size(cache_dtype));
  ref::Rng rng(tokens);
  std::vector<double> vals = ref::random_values(rng, size_t(tokens) * H * D, 2.0);
  std::vector<uint8_t> one = ref::encode_values(ref::ElemType::f16, vals), all;
  for (uint32_t c = 0; c < copies; ++c) all.insert(all.end(), one.begin(), one.end());
  in->keys = std::make_unique<Buffer>(ctx, all.size());
  in->values = std::make_unique<Buffer>(ctx, all.size());
  in->keys->upload(all.data(), all.size());
  in->values->upload(all.data(), all.size());
  // Each copy writes a different random set of slots, so repetitions are not cache hits.
  std::vector<int64_t> slots;
  for (uint32_t c = 0; c < copies; ++c) {
    auto perm = ref::random_permutation(rng, static_cast<uint32_t>(in->cache->num_slots()));
    slots.insert(slots.end(), perm.begin(), perm.begin() + tokens);
  }
  in->slots = std::make_unique<Buffer>(ctx, slots.size() * 8);
  in->slots->upload(slots.data(), slots.size() * 8);
  for (uint64_t c = 0; c < copies; ++c)
    in->views.push_back({TensorView::contiguous(*in->keys, DType::f16, {tokens, H, D}, c * tokens * H * D * 2),
                         TensorView::contiguous(*in->values, DType::f16, {tokens, H, D}, c * tokens * H * D * 2),
                         TensorView::contiguous(*in->slots, DType::i64, {tokens}, c * tokens * 8)});
  BenchOp op;
  op.info.name = std::to_string(tokens) + " tokens " + std::string(dtype_name(cache_dtype));
  op.info.params = {{"tokens", std::to_string(tokens)}, {"heads", std::to_string(H)}, {"head_size", std::to_string(D)},
                    {"input", "f16"}, {"cache", std::string(dtype_name(cache_dtype))}, {"layout", "nhd"},
                    {"copies", std::to_string(copies)},
                    {"path", "universal"}};
  op.info.bytes = double(tokens) * H * D * 2 * (2 + dtype_size(cache_dtype)) + tokens * 8.0;
  op.info.bound = "memory";
  op.record = [&ctx, in](VkCommandBuffer cmd, uint32_t rep) {
    const WriteViews& w = in->views[rep % in->views.size()];
    write_kv_cache(ctx, *in->cache, w.key, w.value, w.slots, cmd);
  };
  op.verify = [&ctx, cfg, H, D]() {
    WriteKvCacheCase wc;
    wc.num_tokens = 300;
    wc.cache = cfg;
    wc.cache.num_blocks = 64;
    wc.cache.num_kv_heads = H;
    wc.cache.head_size = D;
    wc.timing_repetitions = 0;
    auto r = run_write_kv_cache(ctx, wc);
    return Verification{r.pass, r.max_abs_err, r.max_rel_err, r.failure};
  };
  return op;
}

}  // namespace

std::vector<BenchOp> write_kv_cache_cases(Context& ctx, bool quick) {
  std::vector<BenchOp> ops;
  std::vector<uint32_t> tokens = quick ? std::vector<uint32_t>{64, 512} : std::vector<uint32_t>{256, 4096, 32768};
  for (DType d : {DType::f16, DType::fp8_e4m3})
    for (uint32_t t : tokens) ops.push_back(write_case(ctx, t, d));
  return ops;
}

}  // namespace vkattn::tool
