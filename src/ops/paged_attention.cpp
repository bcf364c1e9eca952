// paged_attention: planning (checks, work list, split-KV decision, metadata)
// and dispatch. Kernels: shaders/paged_attention.comp, paged_attention_reduce.comp.
#include <vkattn/context.hpp>
#include <vkattn/paged_attention.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "abi/paged_attention.h"
#include "../context_impl.hpp"
#include "../dispatch.hpp"
#include "../op_support.hpp"
#include "paged_attention_plan.hpp"

namespace vkattn {

using namespace detail;

namespace {

constexpr std::string_view kOp = "paged_attention";

[[noreturn]] void fail(const std::string& what) { throw Error("paged_attention: " + what); }

struct Tile {
  uint32_t bm, bn, workgroup;
};

// The path a plan runs on: the context's, except that bf16 inputs take the
// scalar module (glslang 15 has no bf16 matrices; f16 cannot hold bf16's
// range), and so do devices whose subgroups are too narrow for the matrix
// kernel's row mapping (16 lanes or more).
Path choose_path(const Context& ctx, DType q_dtype, DType cache_dtype) {
  Path p = ctx.path_for("paged_attention");
  if (q_dtype == DType::bf16 || cache_dtype == DType::bf16) return Path::scalar;
  const uint32_t sg = ctx.capabilities().subgroup_size;
  if (sg < 16 || sg > 128 || !std::has_single_bit(sg)) return Path::scalar;
  return p;
}

// Rows per workgroup (bm), keys per tile (bn) and invocations.
Tile choose_tile(const Capabilities& caps, Path path, uint32_t head_size, uint32_t max_rows) {
  if (path != Path::scalar) {
    // paged_attention_subgroup.comp: 8 or 16 rows, tiles of 16 keys, as many
    // subgroups (up to 8) as its shared memory allows (bytes() mirrors its
    // shared arrays). The plan may then take fewer (matrix_subgroups).
    const uint32_t sg = caps.subgroup_size;
    // Rows are the matrices' N: 8 where the device has 16x8x16 (decode with
    // GQA <= 8 then carries half the accumulators), else 16.
    const bool has_n8 = std::any_of(caps.coopmat_shapes.begin(), caps.coopmat_shapes.end(), [](const CoopMatShape& s) {
      return s.m == 16 && s.n == 8 && s.k == 16 && s.a_type == "f16" && s.b_type == "f16" && s.c_type == "f32" &&
             s.result_type == "f32" && s.scope == "subgroup";
    });
    const uint32_t bm = max_rows <= 8 && has_n8 ? 8u : 16u;
    auto bytes = [&](uint32_t nw) {
      return 2u * 16 * (head_size + 8) + std::max(nw * 16 * (head_size / 8 + 1) * 16, 64 * head_size) +
             nw * (16 * bm * 4 + 16 * bm * 2 + 3 * 64u) + 128u + 64u + 1024u;
    };
    uint32_t nw = 8;
    while (nw > 1 && bytes(nw) > caps.max_shared_memory) nw /= 2;
    return {bm, 16, nw * sg};
  }
  // Scalar: the largest tile whose shared memory fits the device.
  auto shared_bytes = [&](uint32_t bm, uint32_t bn) {   // + 1 KiB of chunk bases
    return 4u * ((bm + bn) * (head_size + 1) + bm * bn + 4 * bm) + 16u * bn + 64u + 1024u;
  };
  uint32_t bm = std::clamp<uint32_t>(std::bit_ceil(std::max<uint32_t>(max_rows, 1)), 1, 16);
  uint32_t bn = head_size <= 128 ? 32 : 16;
  while (shared_bytes(bm, bn) > caps.max_shared_memory && (bm > 4 || bn > 8)) {
    if (bn > 16 || (bn > 8 && bm <= 4)) bn /= 2;
    else bm /= 2;
  }
  uint32_t wg = 128;
  while ((bm * head_size) % wg) wg /= 2;
  // The kernel's register arrays: bn * head_size / 8 / wg <= 8 prefetch words
  // and bm * head_size / wg <= 64 outputs per invocation.
  while (bn > 8 && bn * head_size / 8 / wg > 8) bn /= 2;
  return {bm, bn, wg};
}

void check_batch(const KvCacheConfig& c, uint32_t num_q_heads, DType q_dtype, const PagedAttentionBatch& b,
                 const PagedAttentionOptions& o) {
  if (num_q_heads == 0 || num_q_heads % c.num_kv_heads)
    fail("num_q_heads = " + std::to_string(num_q_heads) + " is not divisible by the cache's num_kv_heads = " +
         std::to_string(c.num_kv_heads) + " (GQA needs a whole number of q heads per kv head)");
  if (q_dtype != DType::f16 && q_dtype != DType::bf16)
    fail("q dtype " + std::string(dtype_name(q_dtype)) + " is not supported: expected f16 or bf16");
  const size_t n = b.seq_lens.size();
  if (b.query_start_loc.size() != n + 1)
    fail("query_start_loc has " + std::to_string(b.query_start_loc.size()) + " entries, expected num_seqs + 1 = " + std::to_string(n + 1));
  if (b.query_start_loc[0] != 0) fail("query_start_loc[0] = " + std::to_string(b.query_start_loc[0]) + ", expected 0");
  if (b.block_table.size() != n * size_t(b.max_blocks_per_seq))
    fail("block_table has " + std::to_string(b.block_table.size()) + " entries, expected num_seqs * max_blocks_per_seq = " +
         std::to_string(n * size_t(b.max_blocks_per_seq)));
  for (size_t s = 0; s < n; ++s) {
    const int32_t q0 = b.query_start_loc[s], q1 = b.query_start_loc[s + 1], len = b.seq_lens[s];
    if (q1 < q0)
      fail("query_start_loc is decreasing at " + std::to_string(s + 1) + " (" + std::to_string(q0) + " then " + std::to_string(q1) + ")");
    if (len < 0) fail("seq_lens[" + std::to_string(s) + "] = " + std::to_string(len) + ", expected >= 0");
    if (len > 0 && q1 - q0 > len)
      fail("query_len of sequence " + std::to_string(s) + " = " + std::to_string(q1 - q0) + " exceeds seq_lens[" +
           std::to_string(s) + "] = " + std::to_string(len) + " (the new tokens must already be in the cache)");
    if (uint64_t(len) > uint64_t(b.max_blocks_per_seq) * c.block_size)
      fail("seq_lens[" + std::to_string(s) + "] = " + std::to_string(len) + " exceeds the block table: max_blocks_per_seq " +
           std::to_string(b.max_blocks_per_seq) + " * block_size " + std::to_string(c.block_size) + " = " +
           std::to_string(uint64_t(b.max_blocks_per_seq) * c.block_size));
    const uint32_t used = (uint32_t(len) + c.block_size - 1) / c.block_size;
    for (uint32_t j = 0; j < used; ++j) {
      const int32_t e = b.block_table[s * b.max_blocks_per_seq + j];
      if (e < 0 || uint32_t(e) >= c.num_blocks)
        fail("block_table[" + std::to_string(s) + ", " + std::to_string(j) + "] = " + std::to_string(e) +
             " is not a block of the cache: expected 0 <= entry < num_blocks = " + std::to_string(c.num_blocks));
    }
  }
  if (!(o.scale > 0) || !std::isfinite(o.scale)) fail("scale = " + std::to_string(o.scale) + ", expected a finite value > 0");
  if (o.sliding_window < 0) fail("sliding_window = " + std::to_string(o.sliding_window) + ", expected 0 (none) or > 0");
  if (!(o.softcap >= 0) || !std::isfinite(o.softcap)) fail("softcap = " + std::to_string(o.softcap) + ", expected 0 (none) or > 0");
  for (auto [name, v] : {std::pair{"alibi_slopes", &o.alibi_slopes}, std::pair{"sinks", &o.sinks}})
    if (!v->empty() && v->size() != num_q_heads)
      fail(std::string(name) + " has " + std::to_string(v->size()) + " entries, expected num_q_heads = " + std::to_string(num_q_heads));
  if (!o.qq_bias.empty() && (o.qq_bias_stride == 0 || o.qq_bias.size() % o.qq_bias_stride))
    fail("qq_bias has " + std::to_string(o.qq_bias.size()) + " entries, not a whole number of rows of qq_bias_stride = " +
         std::to_string(o.qq_bias_stride));
  if (!o.qq_bias.empty()) {
    int32_t max_q = 0;
    for (size_t s = 0; s < n; ++s) max_q = std::max(max_q, b.query_start_loc[s + 1] - b.query_start_loc[s]);
    const size_t rows = o.qq_bias.size() / o.qq_bias_stride;
    if (rows < size_t(max_q))
      fail("qq_bias has " + std::to_string(rows) + " rows, expected at least the longest query_len = " + std::to_string(max_q));
  }
  if (!(o.out_scale > 0) || !std::isfinite(o.out_scale)) fail("out_scale = " + std::to_string(o.out_scale) + ", expected a finite value > 0");
}

}  // namespace

namespace {

// What the split and workgroup choices look at in a batch's work items.
struct ItemKeys {
  uint32_t items = 0;
  int64_t longest = 0, total = 0;
  explicit ItemKeys(const std::vector<int64_t>& keys) : items(static_cast<uint32_t>(keys.size())) {
    for (int64_t k : keys) {
      longest = std::max(longest, k);
      total += k;
    }
  }
  bool even() const { return longest * int64_t(items) <= 2 * total; }   // longest <= twice the mean
};

}  // namespace

uint32_t detail::automatic_segments(Path path, uint32_t sms, const std::vector<int64_t>& item_keys) {
  const ItemKeys st(item_keys);
  const uint32_t items = st.items;
  const int64_t max_range = st.longest;
  if (items == 0 || max_range == 0) return 1;
  // Matrix kernel, 2 to 5 even items per SM: an SM holds six 2-subgroup
  // workgroups (168 registers); with fewer it has too few subgroups to keep
  // enough loads in flight. Segments of >= 1024 keys, about two waves of six
  // workgroups per SM. On an H200 (`vkattn run`; bench where said): B=64
  // ctx=4096 (512 items) took 349 us unsplit, 313 in 2 segments, 295 in 3
  // (bench 301), 324 in 4, 317 in 5; ctx=32768: bench 2795 -> 2182 us in 3;
  // ctx=512: 59 us unsplit, 65 in 2. B=96 ctx=4096 (768 items, a wave of six
  // per SM nearly full) took 401 us unsplit, 428 in 2. An uneven varlen batch
  // (424 items, prefill among decodes): bench 132 us unsplit, 212 in 4.
  const uint32_t two_waves = 12 * sms;
  if (path != Path::scalar && st.even() && items >= 2 * sms && items < 5 * sms) {
    const auto by_length = static_cast<uint32_t>(std::min<int64_t>(max_range / 1024, 64));
    return std::max<uint32_t>(1, std::min((two_waves + items / 2) / items, by_length));
  }
  if (items >= 2 * sms) return 1;
  uint32_t by_fill, min_keys;
  if (path == Path::scalar) {
    by_fill = (4 * sms + items - 1) / items;
    min_keys = 256;
  } else {
    // Segments as short as one 16-key tile per subgroup (64 keys) pay when the
    // batch is small: B=1 ctx=512 took 16.6 us in 2 segments, 14.5 in 4 and
    // 13.3 in 8; ctx=1024 16.7 us in 4, 14.4 in 8, 13.6 in 16 (`vkattn run`,
    // cache in L2; `vkattn bench decode`, cold: ctx=512 17.7 -> 14.5 us).
    min_keys = 64;
    // paged_attention_subgroup.comp, measured on an H200 (132 SMs) with
    // workgroups of 4 subgroups, Hq 32 / Hkv 8, d 128: at most one workgroup
    // per SM (matrix_subgroups then gives it 8) unless segments stay long. B=1 ctx=32768: 16 segments 58 us, 32
    // segments 66 us (an earlier build: 17 segments 110 us, four SMs ran two);
    // B=16 ctx=4096: no split 98 us, 2 segments 104 us. Two per SM pays when
    // each subgroup then still has >= 64 tiles (B=16 ctx=32768).
    const uint32_t one = std::max<uint32_t>(1, sms / items);
    const uint32_t two = std::max<uint32_t>(1, 2 * sms / items);
    by_fill = max_range / two >= 4096 ? two : one;
  }
  const uint32_t by_length = static_cast<uint32_t>(std::min<int64_t>(max_range / min_keys, 64));
  return std::max<uint32_t>(1, std::min({by_fill, by_length, 64u}));
}

uint32_t detail::matrix_subgroups(uint32_t max_subgroups, uint32_t sms, const std::vector<int64_t>& item_keys) {
  // Measured on an H200 (132 SMs), Hq 32 / Hkv 8, d 128, 8-row decode tiles.
  const ItemKeys st(item_keys);
  const int64_t longest = st.longest;
  // At most one workgroup per SM: as many subgroups as shared memory allows
  // (8 for decode tiles up to head size 128), if each gets a 16-key tile.
  // 4 -> 8: B=1 ctx=32768 (16 segments) 57.2 -> 47.5 us, B=16 ctx=4096
  // 94.1 -> 72.9 us; B=1 ctx=512 (segments of 64 keys) 14.2 -> 15.5 us.
  const uint32_t usual = std::min<uint32_t>(max_subgroups, 4);
  if (item_keys.size() <= sms) return longest >= 16 * int64_t(max_subgroups) ? max_subgroups : usual;
  // Many items of about the same length run faster in workgroups of 2: at 168
  // registers an SM holds 6 of them (12 subgroups) against 3 of 4, and each
  // workgroup's fixed cost (query, first loads, the final merge) is paid by
  // half as many subgroups. 4 -> 2: B=64 ctx=512 67.8 -> 59.4 us, ctx=4096
  // 357.8 -> 348.4 us; B=256 ctx=512 253.4 -> 218.8 us, ctx=4096 1410 ->
  // 1382 us. Fewer items leave SMs idle (B=16 ctx=4096, 128 items: 94 -> 160
  // us), and uneven ones wait on the longest item, which 2 subgroups take
  // twice as long over (a varlen batch of 424 items: 132 -> 190 us).
  if (usual <= 2 || item_keys.size() < 3 * size_t(sms)) return usual;
  return st.even() ? 2 : usual;
}

PagedAttentionPlan::PagedAttentionPlan(Context& ctx, const PagedKvCache& cache, uint32_t num_q_heads, DType q_dtype,
                                       const PagedAttentionBatch& batch, const PagedAttentionOptions& options)
    : data_(std::make_unique<PagedAttentionPlanData>()) {
  const KvCacheConfig& c = cache.config();
  check_batch(c, num_q_heads, q_dtype, batch, options);
  auto& p = *data_;
  p.ctx = &ctx;
  p.cache = c;
  p.num_q_heads = num_q_heads;
  p.q_dtype = q_dtype;
  p.options = options;
  p.num_seqs = static_cast<uint32_t>(batch.seq_lens.size());
  p.num_tokens = static_cast<uint32_t>(batch.query_start_loc.back());
  const uint32_t gqa = num_q_heads / c.num_kv_heads;
  const auto& caps = ctx.capabilities();

  uint32_t max_rows = 0;
  for (uint32_t s = 0; s < p.num_seqs; ++s)
    max_rows = std::max<uint32_t>(max_rows, uint32_t(batch.query_start_loc[s + 1] - batch.query_start_loc[s]) * gqa);
  if (cache.num_chunks() > 64)
    fail("the cache spans " + std::to_string(cache.num_chunks()) + " allocations; the kernels address at most 64 " +
         "(use a larger ContextOptions::max_chunk_bytes or a smaller cache)");
  p.path = choose_path(ctx, q_dtype, c.dtype);
  Tile tile = choose_tile(caps, p.path, c.head_size, max_rows);
  p.bm = tile.bm;
  p.bn = tile.bn;
  p.workgroup = tile.workgroup;

  // Work items before splitting: one per row tile and kv head.
  struct Item { uint32_t seq, kv_head, row_start, row_count; int32_t begin, end; };
  std::vector<Item> base;
  for (uint32_t s = 0; s < p.num_seqs; ++s) {
    const int32_t q_len = batch.query_start_loc[s + 1] - batch.query_start_loc[s];
    const int32_t len = batch.seq_lens[s], ctx_len = len - q_len;
    const uint32_t rows = uint32_t(q_len) * gqa;
    for (uint32_t r0 = 0; r0 < rows; r0 += p.bm) {
      const uint32_t cnt = std::min(p.bm, rows - r0);
      const int32_t first = int32_t(r0 / gqa), last = int32_t((r0 + cnt - 1) / gqa);
      int32_t end = len == 0 ? 0 : std::min(len, ctx_len + last + 1);
      int32_t begin = options.sliding_window > 0 ? std::max(0, ctx_len + first - options.sliding_window + 1) : 0;
      begin = std::min(begin, end);   // tiles outside the causal or window range are never visited
      for (uint32_t g = 0; g < c.num_kv_heads; ++g) base.push_back({s, g, r0, cnt, begin, end});
    }
  }

  // Split-KV when the batch alone gives too few workgroups to fill the GPU.
  const uint32_t sms = caps.multiprocessor_count ? caps.multiprocessor_count : 16;
  uint32_t segments = 1;
  if (options.split == SplitKv::on) {
    segments = options.num_segments ? options.num_segments : std::max<uint32_t>(2, (4 * sms + base.size() - 1) / std::max<size_t>(base.size(), 1));
  } else if (options.split == SplitKv::automatic) {
    std::vector<int64_t> keys;
    for (const Item& it : base) keys.push_back(it.end - it.begin);
    segments = automatic_segments(p.path, sms, keys);
  }
  segments = std::clamp<uint32_t>(segments, 1, 256);
  // Partial results take num_tokens * num_q_heads * segments * (head_size + 2) floats.
  const uint64_t per_segment = uint64_t(p.num_tokens) * num_q_heads * (c.head_size + 2) * 4;
  const uint64_t scratch_limit = std::min<uint64_t>(caps.max_storage_buffer_range, 1ull << 31);
  if (segments > 1 && per_segment * segments > scratch_limit) {
    if (options.split == SplitKv::on && options.num_segments)
      fail("num_segments = " + std::to_string(segments) + " needs " + std::to_string(per_segment * segments) +
           " bytes of partial results, more than " + std::to_string(scratch_limit) + "; use fewer segments or SplitKv::off");
    segments = static_cast<uint32_t>(std::max<uint64_t>(1, scratch_limit / per_segment));
  }
  p.split = segments > 1 || (options.split == SplitKv::on);
  p.num_segments = segments;

  std::vector<uint32_t> items;
  for (const Item& it : base) {
    const int32_t range = it.end - it.begin;
    const int32_t seg_len = p.split ? int32_t(((range + segments - 1) / segments + p.bn - 1) / p.bn * p.bn) : range;
    for (uint32_t j = 0; j < (p.split ? segments : 1u); ++j) {
      int32_t b = it.begin + int32_t(j) * seg_len, e = std::min(it.end, b + seg_len);
      if (!p.split) { b = it.begin; e = it.end; }
      b = std::min(b, e);
      items.insert(items.end(), {it.seq, it.kv_head, it.row_start, it.row_count, uint32_t(b), uint32_t(e), j, 0u});
    }
  }
  p.num_items = static_cast<uint32_t>(items.size() / abi::PA_ITEM_WORDS);
  if (p.path != Path::scalar) {
    std::vector<int64_t> keys(p.num_items);
    for (uint32_t i = 0; i < p.num_items; ++i)
      keys[i] = int64_t(items[i * abi::PA_ITEM_WORDS + abi::PA_ITEM_KV_END]) - int64_t(items[i * abi::PA_ITEM_WORDS + abi::PA_ITEM_KV_BEGIN]);
    const uint32_t sg = caps.subgroup_size;
    p.workgroup = matrix_subgroups(p.workgroup / sg, sms, keys) * sg;
  }

  // Metadata: header, then query_start_loc, seq_lens, block_table, items, alibi, sinks, qq_bias.
  abi::PagedAttentionMeta h{};
  std::vector<uint32_t> w;
  auto append = [&](const void* data, size_t count) {
    uint32_t at = static_cast<uint32_t>(w.size());
    w.resize(w.size() + count);
    if (count) std::memcpy(&w[at], data, count * 4);
    return at;
  };
  h.num_seqs = p.num_seqs;
  h.num_tokens = p.num_tokens;
  h.num_q_heads = num_q_heads;
  h.max_blocks_per_seq = std::max<uint32_t>(batch.max_blocks_per_seq, 1);
  h.num_segments = p.num_segments;
  h.query_start_loc_at = append(batch.query_start_loc.data(), batch.query_start_loc.size());
  h.seq_lens_at = append(batch.seq_lens.data(), batch.seq_lens.size());
  h.block_table_at = append(batch.block_table.data(), batch.block_table.size());
  if (batch.max_blocks_per_seq == 0) append(std::vector<int32_t>(std::max<size_t>(p.num_seqs, 1), 0).data(), std::max<size_t>(p.num_seqs, 1));
  h.items_at = append(items.data(), items.size());
  h.alibi_at = append(options.alibi_slopes.data(), options.alibi_slopes.size());
  h.sinks_at = append(options.sinks.data(), options.sinks.size());
  h.qq_bias_at = append(options.qq_bias.data(), options.qq_bias.size());
  h.qq_bias_stride = options.qq_bias_stride;
  h.qq_bias_rows = options.qq_bias_stride ? static_cast<uint32_t>(options.qq_bias.size() / options.qq_bias_stride) : 0;
  h.sliding_window = options.sliding_window;
  h.scale = options.scale;
  h.softcap = options.softcap;
  h.k_scale = c.k_scale;
  h.v_scale = c.v_scale;
  h.out_inv_scale = static_cast<float>(1.0 / options.out_scale);
  w.push_back(0);   // never empty
  std::vector<uint8_t> bytes(sizeof h + w.size() * 4);
  std::memcpy(bytes.data(), &h, sizeof h);
  std::memcpy(bytes.data() + sizeof h, w.data(), w.size() * 4);
  p.meta = Buffer(ctx, bytes.size());
  p.meta.upload(bytes.data(), bytes.size());
  p.scratch = Buffer(ctx, p.split ? per_segment * segments : 16);
  p.dummy = Buffer(ctx, 16);
}

PagedAttentionPlan::~PagedAttentionPlan() = default;
PagedAttentionPlan::PagedAttentionPlan(PagedAttentionPlan&&) noexcept = default;
PagedAttentionPlan& PagedAttentionPlan::operator=(PagedAttentionPlan&&) noexcept = default;
uint32_t PagedAttentionPlan::num_tokens() const { return data_->num_tokens; }
uint32_t PagedAttentionPlan::num_seqs() const { return data_->num_seqs; }
uint32_t PagedAttentionPlan::num_q_heads() const { return data_->num_q_heads; }
uint32_t PagedAttentionPlan::head_size() const { return data_->cache.head_size; }
bool PagedAttentionPlan::split() const { return data_->split; }
uint32_t PagedAttentionPlan::num_segments() const { return data_->num_segments; }
uint32_t PagedAttentionPlan::num_work_items() const { return data_->num_items; }
uint32_t PagedAttentionPlan::workgroup_size() const { return data_->workgroup; }
Path PagedAttentionPlan::path() const { return data_->path; }

void paged_attention(Context& ctx, const PagedAttentionPlan& plan, const PagedKvCache& cache, const TensorView& q,
                     const TensorView& out, const std::optional<TensorView>& lse, VkCommandBuffer cmd) {
  auto& impl = ctx.impl();
  const auto& p = plan.data();
  if (p.ctx != &ctx) fail("the plan was made for another Context");
  const auto& c = cache.config();
  if (c.num_blocks != p.cache.num_blocks || c.block_size != p.cache.block_size || c.num_kv_heads != p.cache.num_kv_heads ||
      c.head_size != p.cache.head_size || c.dtype != p.cache.dtype || c.layout != p.cache.layout)
    fail("the cache differs from the one the plan was made for (blocks, block size, heads, head size, dtype or layout)");
  const int64_t T = p.num_tokens, H = p.num_q_heads, D = c.head_size;
  check_view(kOp, "q", q, {p.q_dtype}, {T, H, D}, {"num_tokens", "num_q_heads", "head_size"});
  check_view(kOp, "out", out, {DType::f16, DType::bf16, DType::f32, DType::fp8_e4m3, DType::fp8_e5m2}, {T, H, D},
             {"num_tokens", "num_q_heads", "head_size"});
  check_strides(kOp, "q", q);
  check_strides(kOp, "out", out);
  if (lse) {
    check_view(kOp, "lse", *lse, {DType::f32}, {T, H}, {"num_tokens", "num_q_heads"});
    check_strides(kOp, "lse", *lse);
  }
  if (!cmd) fail("the command buffer is VK_NULL_HANDLE");
  if (T == 0 || p.num_items == 0) return;

  BoundView qb = bind_view(impl, q, kOp, "q");
  BoundView ob = bind_view(impl, out, kOp, "out");
  BoundView lb = lse ? bind_view(impl, *lse, kOp, "lse") : BoundView{{p.dummy.handle(), 0, 16}, 0};
  const BufferBinding meta{p.meta.handle(), 0, p.meta.size()};
  const BufferBinding scratch{p.scratch.handle(), 0, p.scratch.size()};

  abi::PagedAttentionPush push{};
  push.chunk_table_address = cache.chunk_table_address();
  push.q_offset = qb.element_offset;
  push.q_token_stride = to_u32(kOp, "q stride 0", q.stride(0));
  push.q_head_stride = to_u32(kOp, "q stride 1", q.stride(1));
  push.out_offset = ob.element_offset;
  push.out_token_stride = to_u32(kOp, "out stride 0", out.stride(0));
  push.out_head_stride = to_u32(kOp, "out stride 1", out.stride(1));
  push.lse_offset = lb.element_offset;
  push.lse_token_stride = lse ? to_u32(kOp, "lse stride 0", lse->stride(0)) : 0;
  push.num_blocks = c.num_blocks;
  push.blocks_per_chunk = cache.blocks_per_chunk();
  push.num_k_chunks = cache.num_chunks();

  const auto& o = p.options;
  abi::PagedAttentionSpec spec;
  spec.PA_HEAD_SIZE = c.head_size;
  spec.PA_BLOCK_SIZE = c.block_size;
  spec.PA_NUM_KV_HEADS = c.num_kv_heads;
  spec.PA_GQA = p.num_q_heads / c.num_kv_heads;
  spec.PA_BM = p.bm;
  spec.PA_BN = p.bn;
  spec.PA_WORKGROUP_SIZE = p.workgroup;
  spec.PA_CACHE_DTYPE = static_cast<uint32_t>(c.dtype);
  spec.PA_LAYOUT = static_cast<uint32_t>(c.layout);
  spec.PA_Q_DTYPE = static_cast<uint32_t>(p.q_dtype);
  spec.PA_OUT_DTYPE = static_cast<uint32_t>(out.dtype);
  spec.PA_HAS_ALIBI = !o.alibi_slopes.empty();
  spec.PA_HAS_SINKS = !o.sinks.empty();
  spec.PA_HAS_QQ_BIAS = !o.qq_bias.empty();
  spec.PA_HAS_SOFTCAP = o.softcap > 0;
  spec.PA_HAS_WINDOW = o.sliding_window > 0;
  spec.PA_WRITE_LSE = lse.has_value();
  spec.PA_SPLIT = p.split;
  spec.PA_SUBGROUP_SIZE = ctx.capabilities().subgroup_size;
  const Pipeline& main = impl.pipelines->get({kOp, p.path, spec_words(spec), 6, sizeof push});
  Grid grid = fold_grid(impl, p.num_items, kOp);
  push.num_items = p.num_items;
  push.grid_x = grid.x;
  const BufferBinding bindings[] = {qb.binding, ob.binding, lb.binding, meta, scratch};
  record_dispatch(impl, cmd, main, bindings, &push, grid);
  if (!p.split) return;

  compute_barrier(impl, cmd);
  abi::PagedAttentionReduceSpec rspec;
  rspec.PR_HEAD_SIZE = c.head_size;
  rspec.PR_OUT_DTYPE = static_cast<uint32_t>(out.dtype);
  rspec.PR_HAS_SINKS = !o.sinks.empty();
  rspec.PR_WRITE_LSE = lse.has_value();
  rspec.PR_WORKGROUP_SIZE = c.head_size >= 128 ? 128 : 64;
  const Pipeline& reduce = impl.pipelines->get({"paged_attention_reduce", Path::scalar, spec_words(rspec), 5, sizeof push});
  const uint64_t rows = uint64_t(T) * H;
  Grid rgrid = fold_grid(impl, rows, kOp);
  push.num_items = static_cast<uint32_t>(rows);
  push.grid_x = rgrid.x;
  const BufferBinding rbindings[] = {ob.binding, lb.binding, meta, scratch};
  record_dispatch(impl, cmd, reduce, rbindings, &push, rgrid);
}

void paged_attention(Context& ctx, const PagedAttentionPlan& plan, const PagedKvCache& cache, const TensorView& q,
                     const TensorView& out, const std::optional<TensorView>& lse) {
  ctx.submit_and_wait([&](VkCommandBuffer cmd) { paged_attention(ctx, plan, cache, q, out, lse, cmd); });
}

}  // namespace vkattn
