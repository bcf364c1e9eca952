// Inputs the hostile-input generators found mishandled (test_hostile_inputs.cpp,
// test_hostile_cache_inputs.cpp), kept as named cases: each failed before
// its fix, as its comment says.
#include <vkattn_ref/number_formats.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "device_batch.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

// Records into a command buffer that is never submitted: were a check to
// regress, the test fails instead of running what it recorded.
template <class F>
void record_only(Context& ctx, F&& record) {
  struct Abandon {};
  try {
    ctx.submit_and_wait([&](VkCommandBuffer cmd) {
      record(cmd);
      throw Abandon{};
    });
  } catch (const Abandon&) {
  }
}

class HostileRegressions : public VkTest {
 protected:
  KvCacheConfig cfg_{.num_blocks = 4, .block_size = 16, .num_kv_heads = 1, .head_size = 16};
  // One token of one head over cfg_, every view in `buf` (at least 1 KiB).
  static PagedAttentionArgs one_token(const Buffer& buf, int64_t table_columns) {
    PagedAttentionArgs a;
    a.q = TensorView::contiguous(buf, DType::f16, {1, 1, 16});
    a.out = TensorView::contiguous(buf, DType::f16, {1, 1, 16}, 256);
    a.batch.query_start_loc = TensorView::contiguous(buf, DType::i32, {2}, 512);
    a.batch.seq_lens = TensorView::contiguous(buf, DType::i32, {1}, 528);
    a.batch.block_table = TensorView::contiguous(buf, DType::i32, {1, table_columns}, 544);
    a.params.scale = 0.25f;
    return a;
  }
};

// An offset near 2^64 made end_byte() wrap to a small number, which passed
// the bounds check: write_kv_cache recorded the dispatch, and its submission
// crashed (SIGSEGV on lavapipe).
TEST_F(HostileRegressions, ViewWhoseEndWrapsPast64BitsIsRefused) {
  PagedKvCache cache(ctx(), cfg_);
  Buffer kv(ctx(), 4096), slots(ctx(), 64);
  const TensorView key = TensorView::contiguous(kv, DType::f16, {2, 1, 16});
  TensorView s = TensorView::contiguous(slots, DType::i32, {2});
  s.offset = std::numeric_limits<VkDeviceSize>::max() / 4 * 4;   // end: offset + 8, past 2^64
  record_only(ctx(), [&](VkCommandBuffer cmd) {
    EXPECT_VKATTN_ERROR(write_kv_cache(ctx(), cache, key, key, s, cmd), "write_kv_cache: slot_mapping: the view [2]",
                        "reaches past byte 2^62");
  });
  const std::vector<int32_t> qsl{0, 2}, lens{2};
  PagedAttentionPlan plan(ctx(), cfg_, 1, DType::f16, PagedAttentionLengths{qsl, lens});
  PagedAttentionArgs a;
  a.q = key;
  a.out = TensorView::contiguous(kv, DType::f16, {2, 1, 16}, 1024);
  a.out.offset = std::numeric_limits<VkDeviceSize>::max() / 2 * 2 - 2;
  a.batch.query_start_loc = TensorView::contiguous(slots, DType::i32, {2});
  a.batch.seq_lens = TensorView::contiguous(slots, DType::i32, {1}, 8);
  a.batch.block_table = TensorView::contiguous(slots, DType::i32, {1, 1}, 12);
  a.params.scale = 0.25f;
  record_only(ctx(), [&](VkCommandBuffer cmd) {
    EXPECT_VKATTN_ERROR(paged_attention(ctx(), plan, cache, a, cmd), "paged_attention: out: the view", "reaches past byte 2^62");
  });
}

// Extents whose byte count overflows 64 bits: element counts were computed
// in int64 (undefined behaviour; a split plan's workspace of 2^62 + 2^20
// floats wrapped to 4 MiB and passed both the size and the bounds check).
TEST_F(HostileRegressions, ExtentsPast2To62BytesAreRefused) {
  PagedKvCache cache(ctx(), cfg_);
  Buffer buf(ctx(), 1 << 16);
  const std::vector<int32_t> qsl{0, 1}, lens{40};
  PagedAttentionPlanOptions o;
  o.split = SplitKv::on;
  o.num_segments = 2;
  PagedAttentionPlan plan(ctx(), cfg_, 1, DType::f16, PagedAttentionLengths{qsl, lens}, o);
  auto args = [&] {
    PagedAttentionArgs a = one_token(buf, 3);
    a.workspace = TensorView::contiguous(buf, DType::f32, {(int64_t(1) << 62) + (1 << 20)}, 1024);
    return a;
  };
  record_only(ctx(), [&](VkCommandBuffer cmd) {
    EXPECT_VKATTN_ERROR(paged_attention(ctx(), plan, cache, args(), cmd), "paged_attention: workspace has shape [4611686018428436480]",
                        "more than 2^62 bytes");
    auto a = args();
    a.workspace->shape = {int64_t(plan.workspace_bytes() / 4)};
    a.params.qq_bias = TensorView::contiguous(buf, DType::f32, {int64_t(1) << 40, int64_t(1) << 40}, 2048);
    EXPECT_VKATTN_ERROR(paged_attention(ctx(), plan, cache, a, cmd), "paged_attention: qq_bias has shape", "more than 2^62 bytes");
    a.params.qq_bias.reset();
    a.batch.block_table.shape = {1, int64_t(1) << 62};
    EXPECT_VKATTN_ERROR(paged_attention(ctx(), plan, cache, a, cmd), "paged_attention: block_table has shape", "more than 2^62 bytes");
  });
}

// Strides given for another number of dimensions were reported as a shape
// that matched what it expected ("q has shape [2, 1, 16], expected [2, 1, 16]").
TEST_F(HostileRegressions, StridesForAnotherRankAreNamedAsStrides) {
  PagedKvCache cache(ctx(), cfg_);
  Buffer kv(ctx(), 4096);
  TensorView key = TensorView::contiguous(kv, DType::f16, {2, 1, 16});
  const TensorView slots = TensorView::contiguous(kv, DType::i32, {2}, 2048);
  key.strides = {16, 1};
  EXPECT_VKATTN_ERROR(write_kv_cache(ctx(), cache, key, key, slots), "write_kv_cache: key has 2 strides for its 3 dimensions [2, 1, 16]");
}

// A plan and prepare take a KvCacheConfig alone: its block size, kv heads
// (up to 1024), dtype and layout went unchecked, so a plan was made for a
// geometry no cache can have (with 2^31 kv heads, a split plan's workspace
// size and workgroup count wrapped to 0) and prepare compiled pipelines for it.
TEST_F(HostileRegressions, PlansAndPrepareRefuseAGeometryNoCacheCanHave) {
  const std::vector<int32_t> qsl{0, 1}, lens{8};
  const PagedAttentionLengths lengths{qsl, lens};
  KvCacheConfig c = cfg_;
  c.block_size = 0;
  EXPECT_VKATTN_ERROR(PagedAttentionPlan(ctx(), c, 1, DType::f16, lengths), "paged_attention: the cache's block_size = 0",
                      "1 to 1024");
  EXPECT_VKATTN_ERROR(prepare_paged_attention(ctx(), c, 1, DType::f16, {}), "the cache's block_size = 0");
  EXPECT_VKATTN_ERROR(prepare_write_kv_cache(ctx(), c, DType::f16, DType::i32),
                      "prepare_write_kv_cache: the cache's block_size = 0");
  c = cfg_;
  c.dtype = DType::f32;
  EXPECT_VKATTN_ERROR(PagedAttentionPlan(ctx(), c, 1, DType::f16, lengths), "the cache's dtype = f32");
  EXPECT_VKATTN_ERROR(prepare_write_kv_cache(ctx(), c, DType::f16, DType::i32), "the cache's dtype = f32");
  c = cfg_;
  c.layout = static_cast<KvLayout>(7);
  EXPECT_VKATTN_ERROR(PagedAttentionPlan(ctx(), c, 1, DType::f16, lengths), "the cache's layout = KvLayout(7)");
  c = cfg_;
  c.num_kv_heads = 1u << 31;
  c.head_size = 256;
  PagedAttentionPlanOptions o;
  o.split = SplitKv::on;
  o.num_segments = 256;
  EXPECT_VKATTN_ERROR(PagedAttentionPlan(ctx(), c, 1u << 31, DType::f16,
                                         PagedAttentionLimits{.num_seqs = 1u << 30, .max_num_tokens = 1u << 30, .max_query_len = 1}, o),
                      "the cache's num_kv_heads = 2147483648", "1 to 1024");
  EXPECT_EQ(ctx().pipelines_created(), 0u);
}

// A SplitKv outside the enum was taken for SplitKv::off.
TEST_F(HostileRegressions, SplitOutsideTheEnumIsRefused) {
  const std::vector<int32_t> qsl{0, 1}, lens{8};
  PagedAttentionPlanOptions o;
  o.split = static_cast<SplitKv>(3);
  EXPECT_VKATTN_ERROR(PagedAttentionPlan(ctx(), cfg_, 1, DType::f16, PagedAttentionLengths{qsl, lens}, o),
                      "options.split = SplitKv(3)", "automatic, off or on");
}

// The limits' sizes were reported as "limits of N sequences and M tokens".
TEST_F(HostileRegressions, LimitsNameTheirField) {
  EXPECT_VKATTN_ERROR(PagedAttentionPlan(ctx(), cfg_, 1, DType::f16, PagedAttentionLimits{.num_seqs = (1u << 30) + 1, .max_num_tokens = 4}),
                      "limits.num_seqs = 1073741825", "at most 2^30");
  EXPECT_VKATTN_ERROR(PagedAttentionPlan(ctx(), cfg_, 1, DType::f16, PagedAttentionLimits{.num_seqs = 1, .max_num_tokens = 0xFFFFFFFFu}),
                      "limits.max_num_tokens = 4294967295");
}

// Scales below 2^-126 were accepted though their reciprocal, which the
// kernels multiply by, is inf in f32: write_kv_cache stored a zero key as
// NaN (0 * inf) in an fp8 cache, and an fp8 output of 0 would be NaN too.
TEST_F(HostileRegressions, ScalesWhoseReciprocalIsInfAreRefused) {
  KvCacheConfig c = cfg_;
  c.dtype = DType::fp8_e4m3;
  c.k_scale = 1e-40f;
  EXPECT_VKATTN_ERROR(PagedKvCache(ctx(), c), "PagedKvCache: k_scale = ", "at least 2^-126");
  c.k_scale = 1;
  c.v_scale = 5e-39f;
  EXPECT_VKATTN_ERROR(PagedKvCache(ctx(), c), "PagedKvCache: v_scale = ", "at least 2^-126");
  c.v_scale = std::numeric_limits<float>::min();   // 2^-126 itself is fine
  EXPECT_NO_THROW(PagedKvCache(ctx(), c));

  PagedKvCache cache(ctx(), cfg_);
  Buffer buf(ctx(), 4096);
  const std::vector<int32_t> qsl{0, 1}, lens{8};
  PagedAttentionPlan plan(ctx(), cfg_, 1, DType::f16, PagedAttentionLengths{qsl, lens});
  PagedAttentionArgs a;
  a.q = TensorView::contiguous(buf, DType::f16, {1, 1, 16});
  a.out = TensorView::contiguous(buf, DType::fp8_e4m3, {1, 1, 16}, 256);
  a.batch.query_start_loc = TensorView::contiguous(buf, DType::i32, {2}, 512);
  a.batch.seq_lens = TensorView::contiguous(buf, DType::i32, {1}, 528);
  a.batch.block_table = TensorView::contiguous(buf, DType::i32, {1, 1}, 544);
  a.params.scale = 0.25f;
  a.params.out_scale = 1e-40f;
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), plan, cache, a, VK_NULL_HANDLE), "paged_attention: out_scale = ", "at least 2^-126");
}

// Chunks of the application's memory that share bytes were accepted: writing
// one block then changed another.
TEST_F(HostileRegressions, ChunksThatShareMemoryAreRefused) {
  Buffer mem(ctx(), 1 << 16);
  const uint64_t block = 16 * 16 * 2;
  KvCacheChunk a{.k_buffer = mem, .v_buffer = mem, .k_offset = 0, .v_offset = 2 * block, .num_blocks = 2};
  KvCacheChunk b{.k_buffer = mem, .v_buffer = mem, .k_offset = 4 * block, .v_offset = 6 * block, .num_blocks = 2};
  const std::vector<KvCacheChunk> fine{a, b};
  EXPECT_NO_THROW(PagedKvCache(ctx(), cfg_, fine));
  KvCacheChunk kv_same = a;
  kv_same.v_offset = block;   // V's first block is K's second
  EXPECT_VKATTN_ERROR(PagedKvCache(ctx(), cfg_, std::vector<KvCacheChunk>{kv_same, b}), "chunk 0's K blocks", "overlap chunk 0's V blocks");
  KvCacheChunk b_on_a = b;
  b_on_a.k_offset = 3 * block;   // over a's V
  EXPECT_VKATTN_ERROR(PagedKvCache(ctx(), cfg_, std::vector<KvCacheChunk>{a, b_on_a}), "chunk 0's V blocks", "overlap chunk 1's K blocks");
}

// prepare compiled the check kernels for every tile before it looked at the
// variants, then refused a bad output dtype.
TEST_F(HostileRegressions, PrepareRefusesABadVariantBeforeCompilingAnything) {
  PagedAttentionVariant bad;
  bad.out_dtype = DType::i32;
  const PagedAttentionVariant variants[] = {PagedAttentionVariant{}, bad};
  EXPECT_VKATTN_ERROR(prepare_paged_attention(ctx(), cfg_, 1, DType::f16, variants), "out dtype i32");
  const std::vector<int32_t> qsl{0, 1}, lens{8};
  PagedAttentionPlan plan(ctx(), cfg_, 1, DType::f16, PagedAttentionLengths{qsl, lens});
  EXPECT_VKATTN_ERROR(plan.prepare(ctx(), variants), "out dtype i32");
  EXPECT_EQ(ctx().pipelines_created(), 0u);
}

// Views in the memory of a cache over the application's buffers were not
// compared with it: paged_attention wrote its output into the K/V blocks it
// was reading, and write_kv_cache read its inputs from the blocks it wrote.
TEST_F(HostileRegressions, ViewsOverTheCachesMemoryAreRefused) {
  Buffer mem(ctx(), 1 << 16);
  const uint64_t block = 16 * 16 * 2;
  const KvCacheChunk chunk{.k_buffer = mem, .v_buffer = mem, .k_offset = 0, .v_offset = 4 * block, .num_blocks = 4};
  PagedKvCache cache(ctx(), cfg_, std::span<const KvCacheChunk>(&chunk, 1));
  const TensorView in_v = TensorView::contiguous(mem, DType::f16, {2, 1, 16}, 5 * block);
  const TensorView key = TensorView::contiguous(mem, DType::f16, {2, 1, 16}, 8 * block);
  const TensorView slots = TensorView::contiguous(mem, DType::i32, {2}, 8 * block + 1024);
  EXPECT_VKATTN_ERROR(write_kv_cache(ctx(), cache, key, in_v, slots), "write_kv_cache: value (bytes 2560 to 2624) overlaps the cache's V chunk 0");

  const std::vector<int32_t> qsl{0, 1}, lens{8};
  PagedAttentionPlan plan(ctx(), cfg_, 1, DType::f16, PagedAttentionLengths{qsl, lens});
  PagedAttentionArgs a;
  a.q = TensorView::contiguous(mem, DType::f16, {1, 1, 16}, 8 * block);
  a.out = TensorView::contiguous(mem, DType::f16, {1, 1, 16}, 64);   // in K's block 0
  a.batch.query_start_loc = TensorView::contiguous(mem, DType::i32, {2}, 8 * block + 512);
  a.batch.seq_lens = TensorView::contiguous(mem, DType::i32, {1}, 8 * block + 528);
  a.batch.block_table = TensorView::contiguous(mem, DType::i32, {1, 1}, 8 * block + 544);
  a.params.scale = 0.25f;
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), plan, cache, a), "paged_attention: out (bytes 64 to 96) overlaps the cache's K chunk 0");
}

// Two decode sequences (1000 and 700 keys) over a random f16 cache, 2 q
// heads on 1 kv head of 16 dims: a batch a split plan takes in segments.
struct SplitDecode {
  static constexpr uint32_t kBlocks = 1 + 63 + 44;   // block 0 unused
  KvCacheConfig cfg{.num_blocks = kBlocks, .block_size = 16, .num_kv_heads = 1, .head_size = 16};
  PagedKvCache cache;
  DeviceBatch batch;
  Buffer q, out;

  static std::vector<int32_t> table() {
    std::vector<int32_t> t(2 * 63, 0);
    for (int b = 0; b < 63; ++b) t[b] = 1 + b;
    for (int b = 0; b < 44; ++b) t[63 + b] = 64 + b;
    return t;
  }
  explicit SplitDecode(Context& ctx)
      : cache(ctx, cfg), batch(ctx, {0, 1, 2}, {1000, 700}, table(), 63), q(ctx, 2 * 2 * 16 * 2),
        out(ctx, 2 * 2 * 16 * 4, MemoryKind::host_visible) {
    uint64_t x = 12345;
    auto next = [&] {   // values in [-1, 1] as f16
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      return ref::f16_from_double(double(x >> 11) / double(1ull << 53) * 2 - 1);
    };
    for (KvPart part : {KvPart::key, KvPart::value}) {
      std::vector<uint16_t> bits(size_t(kBlocks) * 16 * 16);
      for (auto& b : bits) b = next();
      cache.write_blocks(part, 0, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bits.data()), bits.size() * 2));
    }
    std::vector<uint16_t> qbits(2 * 2 * 16);
    for (auto& b : qbits) b = next();
    q.upload(qbits.data(), qbits.size() * 2);
  }
  PagedAttentionArgs args() const {
    PagedAttentionArgs a;
    a.q = TensorView::contiguous(q, DType::f16, {2, 2, 16});
    a.out = TensorView::contiguous(out, DType::f32, {2, 2, 16});
    a.batch = batch.view();
    a.params.scale = 0.25f;
    return a;
  }
  std::vector<float> result() const {
    std::vector<float> v(2 * 2 * 16);
    std::memcpy(v.data(), out.mapped(), v.size() * 4);
    return v;
  }
  void poison() { std::fill_n(static_cast<float*>(out.mapped()), 2 * 2 * 16, std::numeric_limits<float>::quiet_NaN()); }
};

float max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::isfinite(a[i]) && std::isfinite(b[i]) ? std::max(d, std::abs(a[i] - b[i])) : INFINITY;
  return d;
}

// A synchronous split call allocates the Context's workspace and records the
// fill that zeroes its arrival counters into its own command buffer. When the
// call then threw (a bad view), that command buffer was never submitted, but
// the next call took the workspace as cleared: in memory whose words held 1
// (reused from buffers freed before), each item merged with 3 of its 4
// segments (max error 0.05 on lavapipe) and the count stayed, every later
// call wrong too.
TEST_F(HostileRegressions, ASynchronousSplitCallAfterOneThatThrewClearsTheCountersAgain) {
  SplitDecode c(ctx());
  PagedAttentionPlanOptions o;
  o.split = SplitKv::on;
  o.num_segments = 4;
  PagedAttentionPlan plan(ctx(), c.cfg, 2, DType::f16, c.batch.lengths(), o);
  ASSERT_TRUE(plan.split());
  // The expected output: a recorded run on a cleared workspace of its own.
  Buffer ws(ctx(), plan.workspace_bytes());
  ws.fill(0u);
  ctx().submit_and_wait([&](VkCommandBuffer cmd) {
    PagedAttentionArgs a = c.args();
    a.workspace = TensorView::contiguous(ws, DType::f32, {int64_t(plan.workspace_bytes() / 4)});
    paged_attention(ctx(), plan, c.cache, a, cmd);
  });
  const std::vector<float> expected = c.result();
  // Memory of the workspace's size whose words hold 1, freed for the
  // Context's own workspace to reuse.
  for (int i = 0; i < 5; ++i) {
    Buffer junk(ctx(), plan.workspace_bytes());
    junk.fill(1u);
  }
  PagedAttentionArgs bad = c.args();
  bad.q.shape[0] += 1;
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), plan, c.cache, bad), "q has shape");
  for (int run = 0; run < 2; ++run) {
    c.poison();
    paged_attention(ctx(), plan, c.cache, c.args());
    EXPECT_LE(max_difference(c.result(), expected), 1e-6f) << "synchronous run " << run << " after the call that threw";
  }
}

// The Context's workspace only grows, and was bound whole: one synchronous
// split call whose plan needed more than the device binds at once
// (maxStorageBufferRange; 128 MiB on lavapipe) failed, and so did every later
// split call on that Context, whatever its plan needed. Plans now keep their
// workspace within the range (an explicit split that cannot is refused when
// planned), and a call binds only its plan's bytes.
TEST_F(HostileRegressions, SplitPlansKeepTheirWorkspaceWithinWhatTheDeviceBinds) {
  const uint64_t range = ctx().capabilities().max_storage_buffer_range;
  if (range >= (1ull << 31)) GTEST_SKIP() << "the device binds the kernels' whole 2 GiB at once";
  // 256 segments of 2 q heads x 16 dims: (16 + 2) floats each per token and
  // segment, so enough tokens pass the range.
  const uint32_t seqs = uint32_t(range / (256ull * 2 * 18 * 4)) + 64;
  std::vector<int32_t> qsl(seqs + 1), lens(seqs, 20);
  for (uint32_t i = 0; i <= seqs; ++i) qsl[i] = int32_t(i);
  const KvCacheConfig cfg{.num_blocks = 4, .block_size = 16, .num_kv_heads = 1, .head_size = 16};
  PagedAttentionPlanOptions o;
  o.split = SplitKv::on;
  o.num_segments = 256;
  o.workspace_bytes = 1ull << 31;
  EXPECT_VKATTN_ERROR(PagedAttentionPlan(ctx(), cfg, 2, DType::f16, PagedAttentionLengths{qsl, lens}, o),
                      "256 segments need", "bytes the device binds at once, maxStorageBufferRange");
  o.num_segments = 8;
  const PagedAttentionPlan fits(ctx(), cfg, 2, DType::f16, PagedAttentionLengths{qsl, lens}, o);
  EXPECT_LE(fits.workspace_bytes(), range);
}

// A moved-from plan's accessors, copies, prepare and runs dereferenced its
// null data (SIGSEGV), where a moved-from Context or cache throws.
TEST_F(HostileRegressions, AMovedFromPlanIsRefused) {
  const std::vector<int32_t> qsl{0, 1}, lens{8};
  PagedAttentionPlan plan(ctx(), cfg_, 1, DType::f16, PagedAttentionLengths{qsl, lens});
  PagedAttentionPlan moved = std::move(plan);
  EXPECT_EQ(moved.num_tokens(), 1u);
  const char* what = "this plan was moved from";
  EXPECT_VKATTN_ERROR((void)plan.num_tokens(), what);
  EXPECT_VKATTN_ERROR((void)plan.split(), what);
  EXPECT_VKATTN_ERROR((void)plan.workspace_bytes(), what);
  EXPECT_VKATTN_ERROR((void)PagedAttentionPlan(plan), what);
  EXPECT_VKATTN_ERROR(plan.prepare(ctx(), {}), what);
  PagedKvCache cache(ctx(), cfg_);
  Buffer mem(ctx(), 4096);
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), plan, cache, one_token(mem, 1)), what);
  plan = moved;   // assigning makes it a plan again
  EXPECT_EQ(plan.num_tokens(), 1u);
  // Copying a plan moved from throws and leaves the target as it was.
  PagedAttentionPlan kept = moved;
  PagedAttentionPlan taken = std::move(kept);
  EXPECT_VKATTN_ERROR(plan = kept, what);
  EXPECT_EQ(plan.num_tokens(), 1u);
  plan = std::move(plan);   // moving a plan onto itself keeps it
  EXPECT_EQ(plan.num_tokens(), 1u);
  EXPECT_EQ(taken.num_tokens(), 1u);
  // A prefix-prefill plan holds one.
  PrefixPrefillPlan prefix(ctx(), cfg_, 1, DType::f16, PagedAttentionLengths{qsl, lens});
  PrefixPrefillPlan prefix_moved = std::move(prefix);
  EXPECT_EQ(prefix_moved.num_tokens(), 1u);
  EXPECT_VKATTN_ERROR((void)prefix.workspace_bytes(), what);
  EXPECT_VKATTN_ERROR(prefix.prepare(ctx(), {}), what);
}

// A synchronous call inside a submit_and_wait record function locked the
// submission mutex its own thread held: it hung (undefined behaviour).
TEST_F(HostileRegressions, ASynchronousCallInsideARecordFunctionIsRefused) {
  Buffer b(ctx(), 64);
  const char* what = "inside a Context::submit_and_wait record function";
  ctx().submit_and_wait([&](VkCommandBuffer) {
    EXPECT_VKATTN_ERROR(ctx().submit_and_wait([](VkCommandBuffer) {}), what);
    EXPECT_VKATTN_ERROR(b.fill(0u), what);
  });
  b.fill(0u);   // and the Context is fine after it
  // An empty record function threw std::bad_function_call.
  EXPECT_VKATTN_ERROR(ctx().submit_and_wait(std::function<void(VkCommandBuffer)>{}), "the record function is empty");
}

// Buffer::fill's default size (the rest of the buffer) of a buffer whose size
// is not a multiple of 4 was refused with a size the caller never gave
// ("got 0, 6"); it fills the whole words, as vkCmdFillBuffer's VK_WHOLE_SIZE.
TEST_F(HostileRegressions, FillingTheRestOfABufferFillsItsWholeWords) {
  Buffer b(ctx(), 6, MemoryKind::host_visible);
  std::memset(b.mapped(), 0xAB, 6);
  b.fill(0u);
  const auto* bytes = static_cast<const uint8_t*>(b.mapped());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(bytes[i], 0u) << i;
  EXPECT_EQ(bytes[4], 0xABu);
  EXPECT_EQ(bytes[5], 0xABu);
  EXPECT_VKATTN_ERROR(b.fill(0u, 0, 6), "multiples of 4 (got 0, 6)");
}

// TensorView::stride threw std::out_of_range for strides shorter than the
// shape, and returned 1 for a dimension the view does not have.
TEST_F(HostileRegressions, StridesOfDimensionsAViewDoesNotHaveAreErrors) {
  Buffer b(ctx(), 64);
  TensorView v = TensorView::contiguous(b, DType::f16, {2, 2, 2});
  EXPECT_EQ(v.stride(0), 4);
  EXPECT_VKATTN_ERROR((void)v.stride(7), "TensorView::stride(7): the view has 3 dimensions");
  v.strides = {4, 2};
  EXPECT_VKATTN_ERROR((void)v.stride(0), "strides has 2 entries for the 3 dimensions of shape [2, 2, 2]");
  EXPECT_VKATTN_ERROR((void)v.end_byte(), "strides has 2 entries");
}

}  // namespace
}  // namespace vkattn::test
