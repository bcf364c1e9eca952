// Plan-level guarantees of paged attention: the kernel never reads outside the
// cache, even when the engine's block table holds entries outside it (they
// are bounds-checked on the device, reported, and replaced by block 0); the
// path a plan picks; and when it splits the KV range.
#include <cstring>

#include "device_batch.hpp"
#include "abi/paged_attention.h"
#include "schedule/paged_attention_schedule.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

class PagedAttentionSafety : public VkTest {};

TEST_F(PagedAttentionSafety, CorruptedBlockTableIsClampedAndReported) {
  KvCacheConfig cfg{.num_blocks = 8, .block_size = 16, .num_kv_heads = 2, .head_size = 64};
  PagedKvCache cache(ctx(), cfg);
  cache.fill(0x3C003C00u);   // every element 1.0
  DeviceBatch batch(ctx(), {0, 1, 3}, {20, 40}, {3, 1, 0, 7, 2, 5}, 3);
  PagedAttentionPlan plan(ctx(), cfg, 4, DType::f16, batch.lengths());

  // The engine's table, changed after planning to entries far outside the cache.
  batch.block_table() = {1 << 30, -5, 8, 100000, 3, 2};
  batch.upload();

  Buffer q(ctx(), 3 * 4 * 64 * 2), out(ctx(), 3 * 4 * 64 * 4);
  q.fill(0x3C003C00u);
  out.fill(0x7FC00000u);
  PagedAttentionArgs a;
  a.q = TensorView::contiguous(q, DType::f16, {3, 4, 64});
  a.out = TensorView::contiguous(out, DType::f32, {3, 4, 64});
  a.batch = batch.view();
  a.params.scale = 0.125f;
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), plan, cache, a), "block_table[", "not a block of the cache");
  // Block 0 stood in for the bad entries: every value read was 1.0, so every output is 1.0.
  auto o = out.download_as<float>(3 * 4 * 64);
  for (size_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], 1.0f) << "element " << i;
}

// The same through the prefill kernel (paged attention and prefix prefill),
// whose key loop looks each key's block up a tile ahead: a bad entry in the
// first tile and one in the last are each reported, with block 0 read
// instead. (One bad entry per table: which of several a kernel reports
// first is not fixed.)
TEST_F(PagedAttentionSafety, CorruptedBlockTableIsReportedByThePrefillKernel) {
  KvCacheConfig cfg{.num_blocks = 8, .block_size = 16, .num_kv_heads = 2, .head_size = 128};
  PagedKvCache cache(ctx(), cfg);
  cache.fill(0x3C003C00u);   // every element 1.0
  constexpr uint32_t T = 100, Hq = 8, D = 128;   // one causal prefill of 100 tokens, 7 blocks
  DeviceBatch batch(ctx(), {0, int32_t(T)}, {int32_t(T)}, {1, 2, 3, 4, 5, 6, 7}, 7);
  PagedAttentionPlanOptions o;
  o.prefill = PrefillKernel::on;
  PagedAttentionPlan plan(ctx(), cfg, Hq, DType::f16, batch.lengths(), o);
  // (Every matrix path runs it with PrefillKernel::on; the scalar kernel reports in its loop.)
  EXPECT_EQ(plan.routes_prefill(), plan.path() != Path::scalar);
  batch.block_table() = {1, 2, 3, -7, 5, 6, 7};   // keys 48-63
  batch.upload();
  Buffer q(ctx(), T * Hq * D * 2), out(ctx(), T * Hq * D * 4);
  q.fill(0x3C003C00u);
  out.fill(0x7FC00000u);
  PagedAttentionArgs a;
  a.q = TensorView::contiguous(q, DType::f16, {T, Hq, D});
  a.out = TensorView::contiguous(out, DType::f32, {T, Hq, D});
  a.batch = batch.view();
  a.params.scale = 0.125f;
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), plan, cache, a), "block_table[0, 3] = -7", "not a block of the cache");
  auto o_ = out.download_as<float>(T * Hq * D);
  // Every value read was 1.0 (to the kernels' rounding of P and its sums over several tiles).
  for (size_t i = 0; i < o_.size(); ++i) ASSERT_NEAR(o_[i], 1.0f, 1e-6f) << "element " << i;
  // A table whose only bad entry is the last tile's: reported too.
  batch.block_table() = {1, 2, 3, 4, 5, 6, 8};
  batch.upload();
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), plan, cache, a), "block_table[0, 6] = 8", "not a block of the cache");

  // prefix_prefill: 100 new tokens over a context of 40 (keys 0-39 from
  // blocks 1-3), its new K/V from tensors; a bad context block.
  PrefixPrefillOptions po;
  po.prefill = PrefillKernel::on;
  DeviceBatch prefix(ctx(), {0, int32_t(T)}, {int32_t(T) + 40}, {1, 2, 3, 4, 5, 6, 7, 1, 2}, 9);
  PrefixPrefillPlan pp(ctx(), cfg, Hq, DType::f16, prefix.lengths(), po);
  EXPECT_EQ(pp.attention().routes_prefill(), pp.attention().path() != Path::scalar);
  prefix.block_table() = {1, 9, 3, 4, 5, 6, 7, 1, 2};   // keys 16-31
  prefix.upload();
  Buffer kv(ctx(), T * 2 * D * 2);
  kv.fill(0x3C003C00u);
  PrefixPrefillArgs pa = PrefixPrefillArgs::from(a, TensorView::contiguous(kv, DType::f16, {T, 2, D}),
                                                  TensorView::contiguous(kv, DType::f16, {T, 2, D}));
  pa.batch = prefix.view();
  out.fill(0x7FC00000u);
  EXPECT_VKATTN_ERROR(prefix_prefill(ctx(), pp, cache, pa), "prefix_prefill: block_table[0, 1] = 9", "not a block of the cache");
  o_ = out.download_as<float>(T * Hq * D);
  for (size_t i = 0; i < o_.size(); ++i) ASSERT_NEAR(o_[i], 1.0f, 1e-6f) << "element " << i;
}

class PagedAttentionPathChoice : public VkTest {};

TEST_F(PagedAttentionPathChoice, DecodeAndPrefillRunTheBestPathBf16WhereTheDeviceMultipliesIt) {
  KvCacheConfig cfg{.num_blocks = 8, .block_size = 16, .num_kv_heads = 2, .head_size = 64};
  KvCacheConfig bf16_cfg = cfg, e4m3_cfg = cfg;
  bf16_cfg.dtype = DType::bf16;
  e4m3_cfg.dtype = DType::fp8_e4m3;
  const std::vector<int32_t> one{0, 1}, twenty{0, 20}, forty{40}, long_len{128};
  // 8 q heads over 2 kv heads: 4 rows per kv head when decoding, 4 * 20 in prefill.
  PagedAttentionPlan decode(ctx(), cfg, 8, DType::f16, PagedAttentionLengths{one, forty});
  PagedAttentionPlan prefill(ctx(), cfg, 8, DType::f16, PagedAttentionLengths{twenty, forty});
  PagedAttentionPlan bf16(ctx(), cfg, 8, DType::bf16, PagedAttentionLengths{twenty, forty});   // bf16 q, f16 cache
  PagedAttentionPlan all_bf16(ctx(), bf16_cfg, 8, DType::bf16, PagedAttentionLengths{twenty, forty});
  PagedAttentionPlan bf16_fp8(ctx(), e4m3_cfg, 8, DType::bf16, PagedAttentionLengths{one, forty});
  PagedAttentionPlan f16_bf16(ctx(), bf16_cfg, 8, DType::f16, PagedAttentionLengths{one, forty});
  EXPECT_EQ(decode.path(), ctx().path_for("paged_attention"));
  EXPECT_EQ(prefill.path(), ctx().path_for("paged_attention"));
  EXPECT_EQ(bf16.path(), Path::scalar);       // f16 and bf16 mixed: neither holds the other
  EXPECT_EQ(f16_bf16.path(), Path::scalar);
  const Path bf16_path = ctx().capabilities().bf16_matrices ? ctx().path_for("paged_attention") : Path::scalar;
  EXPECT_EQ(all_bf16.path(), bf16_path);
  EXPECT_EQ(bf16_fp8.path(), bf16_path);

  // The workgroup size each plan dispatches: scalar tiles of 128 invocations
  // here; on the matrix paths (detail::matrix_subgroups) 4 subgroups for items
  // of fewer than 8 tiles, 8 once every subgroup of 8 gets a tile (unsplit:
  // split automatically, its 128 keys would make 2 segments of 4 tiles).
  PagedAttentionPlanOptions unsplit;
  unsplit.split = SplitKv::off;
  PagedAttentionPlan long_decode(ctx(), cfg, 8, DType::f16, PagedAttentionLengths{one, long_len}, unsplit);
  const uint32_t sg = ctx().capabilities().subgroup_size;
  const bool matrix = decode.path() != Path::scalar;
  EXPECT_EQ(decode.workgroup_size(), matrix ? 4 * sg : 128u);
  EXPECT_EQ(long_decode.workgroup_size(), matrix ? 8 * sg : 128u);
  EXPECT_EQ(bf16.workgroup_size(), 128u);
}

// Whether an fp8 module that can stage half a tile per subgroup does (3
// workgroups of 4 per SM, each wave 1.22x as long as a wave of 2 for f16 q,
// 1.29x for bf16 q), with the H200 measurements behind it (DEVELOPERS.md,
// "What holds decode workgroups per SM"): 8 work items per sequence.
TEST(PagedAttentionPlanSegments, HalfStagingWhereThreeWorkgroupsPerSmPay) {
  using detail::automatic_segments;
  using detail::half_staging_pays;
  const uint32_t sms = 132;
  const float f16 = detail::half_staging_wave(DType::f16), bf16 = detail::half_staging_wave(DType::bf16);
  auto keys = [](size_t items, int64_t each) { return std::vector<int64_t>(items, each); };
  // Up to 2 items per SM, 3 per SM would run no more at once.
  EXPECT_FALSE(half_staging_pays(Path::coopmat2, sms, keys(128, 32768), f16));   // B=16
  EXPECT_FALSE(half_staging_pays(Path::coopmat2, sms, keys(256, 4096), f16));    // B=32
  EXPECT_FALSE(half_staging_pays(Path::scalar, sms, keys(2048, 4096), f16));
  // B=34 and B=48: one wave of 3 per SM (measured 120.3 and 124.6 µs against 142 and 161, e5m2).
  EXPECT_TRUE(half_staging_pays(Path::coopmat2, sms, keys(272, 4096), f16));
  EXPECT_TRUE(half_staging_pays(Path::coopmat2, sms, keys(384, 4096), f16));
  // B=64 ctx=4096: 4 waves of a third as long, in 3 segments (182 against 197 µs).
  EXPECT_TRUE(half_staging_pays(Path::coopmat2, sms, keys(512, 4096), f16));
  EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(512, 4096), 3), 3u);
  // B=64 ctx=512: too short to split, 2 waves either way (41.1 against 36.3 µs).
  EXPECT_FALSE(half_staging_pays(Path::coopmat2, sms, keys(512, 512), f16));
  // B=256: 6 waves, not 8, at ctx 512 and 4096 (112.6 against 129.3 µs; 677 against 767).
  EXPECT_TRUE(half_staging_pays(Path::coopmat2, sms, keys(2048, 512), f16));
  EXPECT_TRUE(half_staging_pays(Path::coopmat2, sms, keys(2048, 4096), f16));
  EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(2048, 4096), 3), 1u);
  // Many uneven items: more of them at once.
  std::vector<int64_t> uneven(423, 2000);
  uneven.push_back(100000);
  EXPECT_TRUE(half_staging_pays(Path::coopmat2, sms, uneven, f16));
  // A module that cannot.
  EXPECT_FALSE(half_staging_pays(Path::coopmat2, sms, keys(2048, 4096), 0));
  // bf16 q's waves of 3 are longer: B=34 keeps whole tiles (e4m3 took
  // 175.4 µs in halves, 171.2 whole); B=48, B=96 and B=256 take halves
  // (176.7 against 205.6, 342.2 against 382.6, 881.5 against 1003).
  EXPECT_FALSE(half_staging_pays(Path::coopmat2, sms, keys(272, 4096), bf16));
  EXPECT_TRUE(half_staging_pays(Path::coopmat2, sms, keys(384, 4096), bf16));
  EXPECT_TRUE(half_staging_pays(Path::coopmat2, sms, keys(768, 4096), bf16));
  EXPECT_TRUE(half_staging_pays(Path::coopmat2, sms, keys(2048, 4096), bf16));
}

// The automatic split decision, with the H200 measurements behind it
// (src/schedule/paged_attention_schedule.cpp): 8 work items per sequence (32/8 heads).
TEST(PagedAttentionPlanSegments, AutomaticChoiceFollowsTheMeasurements) {
  using detail::automatic_segments;
  const uint32_t sms = 132;
  auto keys = [](size_t items, int64_t each) { return std::vector<int64_t>(items, each); };
  // Matrix kernel: one workgroup per SM for short segments...
  EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(8, 32768)), 16u);     // B=1 ctx=32768: 128 workgroups
  EXPECT_EQ(automatic_segments(Path::coopmat, sms, keys(8, 4096)), 16u);       // B=1 ctx=4096
  EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(128, 4096)), 1u);     // B=16 ctx=4096: no split
  // ... two when each segment keeps >= 4096 keys.
  EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(128, 32768)), 2u);    // B=16 ctx=32768: 256 workgroups
  // Between one and two items per SM: unsplit.
  EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(133, 32768)), 1u);    // B=17
  EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(256, 32768)), 1u);    // B=32
  EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(264, 32768)), 1u);
  // More even items: in waves of 2 workgroups per SM, the segments (up to 4,
  // of >= 1024 keys) that need the fewest waves, each 1/s long, if that
  // promises 15% (H200 measurements in DEVELOPERS.md, ctx 4096 and 32768).
  for (int64_t each : {4096, 32768}) {
    EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(272, each)), 4u) << each;   // B=34: 1.25 waves, not 2
    EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(320, each)), 4u) << each;   // B=40
    EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(384, each)), 2u) << each;   // B=48: 1.5, not 2
    EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(400, each)), 3u) << each;   // B=50: 1.67
    EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(448, each)), 1u) << each;   // B=56: 1.75 promises too little
    EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(512, each)), 1u) << each;   // B=64: 2 waves either way
    EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(576, each)), 4u) << each;   // B=72: 2.25, not 3
    EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(640, each)), 2u) << each;   // B=80: 2.5 (4 too: the fewer)
    EXPECT_EQ(automatic_segments(Path::coopmat, sms, keys(640, each)), 2u) << each;
    EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(768, each)), 1u) << each;   // B=96
    EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(1024, each)), 1u) << each;  // B=128
    EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(2048, each)), 1u) << each;  // B=256
    EXPECT_EQ(automatic_segments(Path::scalar, sms, keys(320, each)), 1u) << each;
  }
  // Segments keep >= 1024 keys.
  EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(320, 1024)), 1u);
  EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(320, 2048)), 2u);
  EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(320, 3072)), 3u);
  EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(320, 512)), 1u);
  // Uneven batches (one long prefill among short decodes) wait on their longest item: unsplit.
  std::vector<int64_t> uneven(423, 2000);
  uneven.push_back(100000);
  EXPECT_EQ(automatic_segments(Path::coopmat2, sms, uneven), 1u);
  std::vector<int64_t> edge(400, 4096);
  edge[0] = 2 * 4096 + 100;   // longest over twice the mean: uneven
  EXPECT_EQ(automatic_segments(Path::coopmat2, sms, edge), 1u);
  edge[0] = 2 * 4096;         // twice the mean at most: even
  EXPECT_EQ(automatic_segments(Path::coopmat2, sms, edge), 3u);
  // Scalar kernel: about 4 workgroups per SM, at most 64 segments of >= 256 keys.
  EXPECT_EQ(automatic_segments(Path::scalar, sms, keys(8, 32768)), 64u);
  EXPECT_EQ(automatic_segments(Path::scalar, sms, keys(8, 1000)), 3u);
  // Short sequences: the matrix kernel's segments keep >= 64 keys, the scalar one's >= 256.
  EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(8, 512)), 8u);       // B=1 ctx=512
  EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(8, 1024)), 16u);
  EXPECT_EQ(automatic_segments(Path::scalar, sms, keys(8, 512)), 2u);
  EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(8, 100)), 1u);
  // Empty batches.
  EXPECT_EQ(automatic_segments(Path::coopmat2, sms, keys(0, 32768)), 1u);
}

// Subgroups per workgroup of the matrix kernel (H200 measurements in
// DEVELOPERS.md, "The decode schedule's rules"): all that fit for one item per
// SM when each gets a tile, else 4.
TEST(PagedAttentionPlanSubgroups, FollowTheMeasurements) {
  using detail::matrix_subgroups;
  const uint32_t sms = 132;
  // One workgroup per SM at most: 8 when shared memory allows and every subgroup gets a tile.
  EXPECT_EQ(matrix_subgroups(8, sms, std::vector<int64_t>(128, 2048)), 8u);   // B=1 ctx=32768, 16 segments
  EXPECT_EQ(matrix_subgroups(8, sms, std::vector<int64_t>(128, 4096)), 8u);   // B=16 ctx=4096
  EXPECT_EQ(matrix_subgroups(8, sms, std::vector<int64_t>(132, 128)), 8u);
  EXPECT_EQ(matrix_subgroups(8, sms, std::vector<int64_t>(64, 64)), 4u);      // B=1 ctx=512: 64-key segments
  EXPECT_EQ(matrix_subgroups(4, sms, std::vector<int64_t>(8, 4096)), 4u);     // prefill tiles: 4 fit
  // More items than SMs: 4, even or not, short or long.
  for (size_t items : {133u, 395u, 396u, 512u, 2048u})
    for (int64_t each : {512, 4096, 32768}) {
      EXPECT_EQ(matrix_subgroups(8, sms, std::vector<int64_t>(items, each)), 4u) << items << " x " << each;
      EXPECT_EQ(matrix_subgroups(4, sms, std::vector<int64_t>(items, each)), 4u) << items << " x " << each;
    }
  std::vector<int64_t> uneven(500, 100);
  uneven.push_back(20000);
  EXPECT_EQ(matrix_subgroups(8, sms, uneven), 4u);
  // Where shared memory allows fewer (head size 256), no more than that.
  EXPECT_EQ(matrix_subgroups(2, sms, std::vector<int64_t>(512, 4096)), 2u);
  EXPECT_EQ(matrix_subgroups(2, sms, std::vector<int64_t>(8, 4096)), 2u);
  EXPECT_EQ(matrix_subgroups(1, sms, std::vector<int64_t>(512, 4096)), 1u);
  EXPECT_EQ(matrix_subgroups(4, sms, {}), 4u);
  // The pipelines a plan prepares are every count it may return.
  using detail::matrix_subgroup_choices;
  EXPECT_EQ(matrix_subgroup_choices(8), (std::vector<uint32_t>{4, 8}));
  EXPECT_EQ(matrix_subgroup_choices(4), (std::vector<uint32_t>{4}));
  EXPECT_EQ(matrix_subgroup_choices(2), (std::vector<uint32_t>{2}));
}

// The decode kernel's tile (detail::choose_tile): rows as the matrices' N (8
// where the device has 16x8x16 of the element type, else 16), the rows an
// item has at most (tile_rows, which its softmax covers), and as many
// subgroups as its shared memory (PA_SUBGROUP_SHARED_BYTES) allows.
TEST(PagedAttentionPlanTile, DecodeTilesFollowTheRowsAndTheSharedMemory) {
  using detail::choose_tile;
  detail::ScheduleDevice f16, bf16;
  f16.path = bf16.path = Path::coopmat2;
  f16.has_16x8x16 = true;    // an H200's f16
  bf16.has_16x8x16 = false;  // its bf16
  bf16.bf16 = true;
  for (const auto& dev : {f16, bf16}) {
    const uint32_t n = dev.has_16x8x16 ? 8u : 16u;
    auto t = choose_tile(dev, 128, 4);   // decode, GQA 4
    EXPECT_EQ(t.bm, n);
    EXPECT_EQ(t.rows, 4u);
    EXPECT_EQ(t.workgroup, 8u * 32u);   // bf16's 16-row tiles fit 8 subgroups too: P lies in S's free rows
    EXPECT_LE(PA_SUBGROUP_SHARED_BYTES(128, 8, t.bm, t.rows, 1u), dev.max_shared_memory);
    // Two 4-subgroup workgroups (batches of more items than SMs) share an
    // SM's 48 KiB: bf16's were 16 bytes over by this count (8 by the
    // driver's), and ran one per SM (DEVELOPERS.md, "bf16 q with fp8 caches:
    // what holds it").
    EXPECT_LE(2u * PA_SUBGROUP_SHARED_BYTES(128, 4, t.bm, t.rows, 1u), 49152u);
    // GQA 8 (and two tokens at GQA 4): bf16's was 1008 bytes over, with a
    // chunk table of 64 and row state of 16 rows per subgroup.
    const auto gqa8 = choose_tile(dev, 128, 8);
    EXPECT_EQ(gqa8.rows, 8u);
    EXPECT_LE(2u * PA_SUBGROUP_SHARED_BYTES(128, 4, gqa8.bm, gqa8.rows, 1u), 49152u);
    EXPECT_EQ(detail::packed_slices_fit(dev, 128, t.bm, t.rows, 8), dev.bf16);   // packed O fits too (bf16 only)
    EXPECT_EQ(choose_tile(dev, 128, 8).workgroup, 8u * 32u);   // GQA 8: packing never costs subgroups
    EXPECT_EQ(detail::packed_slices_fit(dev, 128, n, 8, 8), dev.bf16);   // (since the chunk table holds 8)
    EXPECT_EQ(detail::packed_slices_fit(dev, 128, n, 8, 4), dev.bf16);
    EXPECT_FALSE(detail::packed_slices_fit(dev, 128, n, 4, 2));   // at least 4 subgroups
    EXPECT_EQ(choose_tile(dev, 128, 1).rows, 4u);   // at least 4: each lane owns 2 keys of a tile
    EXPECT_EQ(choose_tile(dev, 128, 5).rows, 8u);   // GQA 5
    t = choose_tile(dev, 128, 40);                  // several tokens' rows: the whole tile
    EXPECT_EQ(t.bm, 16u);
    EXPECT_EQ(t.rows, 16u);
    EXPECT_EQ(t.workgroup, 4u * 32u);   // S and P apart: 8 subgroups do not fit 48 KiB
  }
  EXPECT_EQ(abi::subgroup_tile_rows(16, 4, 64), 8u);    // subgroups of 64: 8 lanes per row at most
  EXPECT_EQ(abi::subgroup_tile_rows(8, 16, 32), 8u);    // never past the tile
}

// An H200's scheduling figures on the coopmat2 path (132 SMs, the prefill kernel).
static detail::ScheduleDevice h200_coopmat2() {
  detail::ScheduleDevice dev;
  dev.path = Path::coopmat2;
  dev.subgroup_size = 32;
  dev.multiprocessors = 132;
  dev.prefill_kernel = true;
  dev.prefill_shared_softmax = false;
  return dev;
}
// The same for bf16 or f16 q: the H200 multiplies f16 in 16x8x16 shapes too, bf16 in 16x16x16 only.
static detail::ScheduleDevice h200_coopmat2(bool bf16) {
  detail::ScheduleDevice dev = h200_coopmat2();
  dev.has_16x8x16 = !bf16;
  dev.bf16 = bf16;
  return dev;
}

// A plan's problem for a batch of (query_len, seq_len) sequences and
// `decodes` decodes of decode_len keys, 32/8 heads x 128, split automatic.
struct Batch {
  std::vector<int32_t> qsl{0}, lens;
  detail::ScheduleProblem p;
  Batch(std::initializer_list<std::pair<int32_t, int32_t>> seqs, uint32_t decodes = 0, int32_t decode_len = 0) {
    for (auto [q, s] : seqs) {
      qsl.push_back(qsl.back() + q);
      lens.push_back(s);
      p.max_query_len = std::max<uint32_t>(p.max_query_len, q);
    }
    for (uint32_t i = 0; i < decodes; ++i) {
      qsl.push_back(qsl.back() + 1);
      lens.push_back(decode_len);
    }
    if (decodes) p.max_query_len = std::max<uint32_t>(p.max_query_len, 1);
    p.num_q_heads = 32;
    p.num_kv_heads = 8;
    p.head_size = 128;
    p.num_seqs = uint32_t(lens.size());
    p.num_tokens = uint32_t(qsl.back());
    p.query_start_loc = qsl;
    p.seq_lens = lens;
    p.split = SplitKv::automatic;
    p.workspace_bytes = kDefaultPagedAttentionWorkspaceBytes;
  }
};

// Whole plans of many decodes: 256 sequences at ctx 4096 run unsplit in
// workgroups of 4 subgroups, with 8-row tiles (f16 on an H200) and 16-row
// ones (bf16: no 16x8x16) alike, and with rows of several tokens too.
TEST(PagedAttentionPlanSegments, ManyDecodesRunUnsplitInWorkgroupsOfFour) {
  detail::ScheduleDevice dev = h200_coopmat2();
  for (bool has_16x8x16 : {true, false}) {
    dev.has_16x8x16 = has_16x8x16;
    const detail::Schedule s = detail::schedule_paged_attention(dev, Batch({}, 256, 4096).p);
    EXPECT_EQ(s.num_segments, 1u);
    EXPECT_FALSE(s.split);
    EXPECT_EQ(s.workgroup, 128u);
    const detail::Schedule chunk = detail::schedule_paged_attention(dev, Batch({{64, 4096}}, 256, 4096).p);
    EXPECT_FALSE(chunk.prefill.on);
    EXPECT_EQ(chunk.num_segments, 1u);
    EXPECT_EQ(chunk.workgroup, 128u);
  }
}

// Batches of 2 to 5 items per SM split by the waves of 4-subgroup workgroups
// an SM holds: 2 at head size 128 (their shared memory), 3 at head size 64
// (12.1 KiB each). H200, ctx 4096, head size 64, B=64: 187.8 µs unsplit, 154.7
// in 3 segments; B=256 579.8 unsplit (DEVELOPERS.md).
TEST(PagedAttentionPlanSegments, SmallerHeadsSplitByWavesOfThreeWorkgroupsPerSm) {
  const detail::ScheduleDevice dev = h200_coopmat2();
  auto plan = [&](uint32_t head_size, uint32_t b, int32_t ctx) {
    Batch d({}, b, ctx);
    d.p.head_size = head_size;
    return detail::schedule_paged_attention(dev, d.p);
  };
  EXPECT_EQ(plan(64, 64, 4096).num_segments, 3u);
  EXPECT_EQ(plan(64, 64, 32768).num_segments, 3u);
  EXPECT_EQ(plan(64, 256, 4096).num_segments, 1u);
  EXPECT_EQ(plan(64, 64, 4096).workgroup, 128u);
  EXPECT_EQ(plan(128, 64, 4096).num_segments, 1u);   // head size 128: two waves of 2 per SM either way
  EXPECT_EQ(plan(128, 256, 4096).num_segments, 1u);
}

// Which split plans merge in the attention kernel (Schedule::merge_last,
// PA_FLAG_MERGE_LAST): those whose items are all the decode kernel's, up to
// one arrival counter each; with prefill-kernel items, the reduce merges.
TEST(PagedAttentionPlanSegments, DecodeSplitsMergeInTheLastSegment) {
  const detail::ScheduleDevice dev = h200_coopmat2();
  const detail::Schedule one = detail::schedule_paged_attention(dev, Batch({}, 1, 32768).p);
  EXPECT_TRUE(one.split);
  EXPECT_TRUE(one.merge_last);
  EXPECT_EQ(one.workspace_bytes, kPagedAttentionWorkspaceCounterBytes + 4 * (PA_PARTIALS_ALIGN_WORDS - 1) + detail::partial_result_bytes(1, 32, 128, one.num_segments));
  const detail::Schedule whole = detail::schedule_paged_attention(dev, Batch({}, 256, 4096).p);
  EXPECT_FALSE(whole.split);
  EXPECT_FALSE(whole.merge_last);
  EXPECT_EQ(whole.workspace_bytes, 0u);
  // `bench decode`'s varlen batch: its chunks' segments on the prefill kernel.
  const detail::Schedule varlen = detail::schedule_paged_attention(dev, Batch({{1, 1328}, {5, 18}, {129, 463}, {1, 4096}, {64, 2048}}).p);
  ASSERT_TRUE(varlen.prefill.on && varlen.split);
  EXPECT_FALSE(varlen.merge_last);
  // 513 sequences x 8 kv heads = 4104 items: more than the counters.
  Batch many({}, 513, 4096);
  many.p.split = SplitKv::on;
  many.p.num_segments = 2;
  many.p.workspace_bytes = 1ull << 30;
  const detail::Schedule over = detail::schedule_paged_attention(dev, many.p);
  EXPECT_TRUE(over.split);
  EXPECT_FALSE(over.merge_last);
  many.p.num_seqs = 512;
  many.p.query_start_loc = std::span<const int32_t>(many.qsl.data(), 513);
  many.p.seq_lens = std::span<const int32_t>(many.lens.data(), 512);
  many.p.num_tokens = 512;
  EXPECT_TRUE(detail::schedule_paged_attention(dev, many.p).merge_last);
}

// bf16 decode packs O's head slices (Schedule::pack_o, PA_PACK_O) for at
// most one work item per SM: in 8-subgroup workgroups, and in 4-subgroup
// ones only where each subgroup has one 16-key tile; f16 never.
TEST(PagedAttentionPlanSubgroups, Bf16PacksSlicesForSmallBatchesOnly) {
  using detail::pack_slices;
  const uint32_t sms = 132;
  EXPECT_TRUE(pack_slices(8, sms, std::vector<int64_t>(128, 4096)));     // B=16 ctx=4096
  EXPECT_TRUE(pack_slices(4, sms, std::vector<int64_t>(64, 64)));        // B=1 ctx=512 in 8 segments
  EXPECT_FALSE(pack_slices(4, sms, std::vector<int64_t>(64, 100)));      // two tiles per subgroup
  EXPECT_FALSE(pack_slices(4, sms, std::vector<int64_t>(136, 4096)));    // B=17: more items than SMs
  EXPECT_FALSE(pack_slices(8, sms, std::vector<int64_t>(133, 4096)));
  detail::ScheduleDevice dev = h200_coopmat2(true);
  EXPECT_TRUE(detail::schedule_paged_attention(dev, Batch({}, 16, 4096).p).pack_o);
  EXPECT_TRUE(detail::schedule_paged_attention(dev, Batch({}, 1, 512).p).pack_o);
  EXPECT_FALSE(detail::schedule_paged_attention(dev, Batch({}, 64, 512).p).pack_o);
  EXPECT_FALSE(detail::schedule_paged_attention(h200_coopmat2(false), Batch({}, 16, 4096).p).pack_o);   // f16
}

// bf16 q with an fp8 cache whose K/V matrices are built in registers: that
// module's registers hold an SM to 2 workgroups of 4, so its plans stage half
// tiles (their shared memory, not their staging, is what counts there) and
// split by waves of 2 per SM. H200, bf16 q, e4m3, ctx 4096, B=64: split in 3
// segments for waves of 3 it took 272.8 µs, unsplit 243.6 (e5m2 246.2 and
// 213.2); B=256 ran unsplit either way (DEVELOPERS.md, "bf16 q with fp8
// caches: what holds it").
TEST(PagedAttentionPlanSegments, RegisterBuiltBf16MatricesCountTwoWorkgroupsPerSm) {
  detail::ScheduleDevice dev = h200_coopmat2(true);
  for (uint32_t b : {24u, 34u, 64u, 256u}) {
    Batch staged({}, b, 4096);
    staged.p.half_staging_wave = detail::half_staging_wave(DType::bf16);
    Batch registers = staged;
    registers.p.registers_hold_two = true;
    const detail::Schedule s = detail::schedule_paged_attention(dev, staged.p), r = detail::schedule_paged_attention(dev, registers.p);
    EXPECT_EQ(r.workgroup, 128u) << "B=" << b;
    EXPECT_TRUE(r.stage_halves) << "B=" << b;   // 2 per SM by shared memory too
    EXPECT_FALSE(r.pack_o) << "B=" << b;
    EXPECT_EQ(r.num_segments, detail::automatic_segments(Path::coopmat2, 132, std::vector<int64_t>(8 * b, 4096), 2)) << "B=" << b;
    if (b == 64) {
      EXPECT_EQ(s.num_segments, 3u);   // waves of 3 per SM
      EXPECT_EQ(r.num_segments, 1u);
    }
    if (b == 24) EXPECT_FALSE(s.stage_halves);   // whole tiles where no third workgroup would run
  }
  // At most one item per SM the bf16 modules pack O and stage whole tiles.
  Batch few({}, 16, 4096);
  few.p.registers_hold_two = true;
  const detail::Schedule f = detail::schedule_paged_attention(dev, few.p);
  EXPECT_TRUE(f.pack_o);
  EXPECT_FALSE(f.stage_halves);
}

// fp8 caches at head size 128 stage half tiles where more workgroups per SM
// pay. With 16 tile rows (GQA 16, or two-token rows at GQA 8) a workgroup
// of 4 takes 29008 bytes of shared memory in whole tiles and 20816 in
// halves: an SM holds 1 and 2 of them, not the 2 and 3 of 8-row tiles, and
// the plan's waves count so (the split of B=96, 384 items: 2 segments for
// waves of 2 per SM, where waves of 3 would leave it unsplit).
TEST(PagedAttentionPlanSegments, SixteenRowHalfTilesCountTheWorkgroupsTheirSharedMemoryHolds) {
  const detail::ScheduleDevice dev = h200_coopmat2();
  EXPECT_EQ(detail::decode_workgroups_per_sm(dev, 128, 16, 16, false), 1u);
  EXPECT_EQ(detail::decode_workgroups_per_sm(dev, 128, 16, 16, true), 2u);
  EXPECT_EQ(detail::decode_workgroups_per_sm(dev, 128, 8, 8, false), 2u);
  EXPECT_EQ(detail::decode_workgroups_per_sm(dev, 128, 8, 8, true), 3u);
  const float wave = detail::half_staging_wave(DType::f16);
  for (uint32_t query_len : {1u, 2u}) {
    for (uint32_t b : {16u, 34u, 48u, 64u, 96u, 256u}) {
      Batch fp8({}, 0);
      for (uint32_t i = 0; i < b; ++i) {
        fp8.qsl.push_back(fp8.qsl.back() + int32_t(query_len));
        fp8.lens.push_back(4096);
      }
      fp8.p.num_q_heads = query_len == 1 ? 64 : 32;   // GQA 16, or GQA 8 with two tokens: 16 rows
      fp8.p.num_kv_heads = 4;
      fp8.p.max_query_len = query_len;
      fp8.p.num_seqs = b;
      fp8.p.num_tokens = uint32_t(fp8.qsl.back());
      fp8.p.query_start_loc = fp8.qsl;
      fp8.p.seq_lens = fp8.lens;
      fp8.p.half_staging_wave = wave;
      const detail::Schedule s = detail::schedule_paged_attention(dev, fp8.p);
      const std::string at = "B=" + std::to_string(b) + " query_len " + std::to_string(query_len);
      ASSERT_EQ(s.tile_rows, 16u) << at;
      const std::vector<int64_t> items(4 * b, 4096);
      // Halves where the items are more than the SMs hold whole (one each).
      EXPECT_EQ(s.stage_halves, b > 33) << at;
      EXPECT_EQ(s.stage_halves, detail::half_staging_pays(Path::coopmat2, 132, items, wave, 2, 1)) << at;
      if (s.stage_halves) {
        EXPECT_EQ(s.num_segments, detail::automatic_segments(Path::coopmat2, 132, items, 2)) << at;
        EXPECT_LE(2u * PA_SUBGROUP_SHARED_BYTES_H(128, 4, s.bm, s.tile_rows, 1u, 1u), dev.max_shared_memory) << at;
      }
      if (b == 96) EXPECT_EQ(s.num_segments, 2u) << at;
    }
  }
}

// f16 and bf16 caches have no half tiles: with 16 tile rows their whole
// tiles (29008 bytes per workgroup of 4) run one workgroup per SM, and the
// plan splits by waves of one. H200, GQA 16, ctx 4096, µs: B=34 (136 items)
// took 190.2 unsplit and 154.5 in the 4 segments waves of one give; B=96 (384
// items) 327.3 in the 2 segments waves of two gave and 290.0 unsplit, as
// waves of one leave it; B=64 195 either way (DEVELOPERS.md, "What holds
// decode workgroups per SM").
TEST(PagedAttentionPlanSegments, SixteenRowWholeTilesCountOneWorkgroupPerSm) {
  for (bool bf16 : {false, true}) {
    const detail::ScheduleDevice dev = h200_coopmat2(bf16);
    for (uint32_t b : {16u, 34u, 48u, 64u, 96u, 256u}) {
      Batch gqa16({}, b, 4096);
      gqa16.p.num_q_heads = 64;
      gqa16.p.num_kv_heads = 4;
      const detail::Schedule s = detail::schedule_paged_attention(dev, gqa16.p);
      const std::string at = "B=" + std::to_string(b) + (bf16 ? " bf16" : " f16");
      ASSERT_EQ(s.tile_rows, 16u) << at;
      ASSERT_FALSE(s.stage_halves) << at;
      EXPECT_EQ(s.workgroup, 128u) << at;
      EXPECT_EQ(s.num_segments, detail::automatic_segments(Path::coopmat2, 132, std::vector<int64_t>(4 * b, 4096), 1)) << at;
      if (b == 34) EXPECT_EQ(s.num_segments, 4u) << at;
      if (b == 96) EXPECT_EQ(s.num_segments, 1u) << at;
    }
  }
}

// 16-bit caches at head size 256 (ScheduleProblem::head_halves): their whole
// tiles (38.5 KiB per workgroup of 4) allow one workgroup per SM, half tiles
// two, so such plans stage halves where the items are more than the SMs, and
// split by waves of 2 per SM; not at GQA 8, whose 8-row tiles' halves do not
// fit two per SM either.
TEST(PagedAttentionPlanSegments, HeadSize256StagesHalvesAndCountsTwoWorkgroupsPerSm) {
  for (bool bf16 : {false, true}) {
    const detail::ScheduleDevice dev = h200_coopmat2(bf16);
    for (uint32_t b : {1u, 16u, 24u, 64u, 256u}) {
      Batch halves({}, b, 4096);
      halves.p.num_q_heads = 16;
      halves.p.head_size = 256;
      Batch whole = halves;
      halves.p.head_halves = true;
      const detail::Schedule h = detail::schedule_paged_attention(dev, halves.p), w = detail::schedule_paged_attention(dev, whole.p);
      EXPECT_EQ(h.workgroup, 128u) << "B=" << b;
      EXPECT_EQ(h.stage_halves, b > 16) << "B=" << b;   // more items than SMs (B=16: 128 items)
      EXPECT_FALSE(w.stage_halves) << "B=" << b;
      if (!bf16) EXPECT_FALSE(h.pack_o) << "B=" << b;
      if (b > 16) EXPECT_EQ(h.num_segments, detail::automatic_segments(Path::coopmat2, 132, std::vector<int64_t>(8 * b, 4096), 2)) << "B=" << b;
      // Half tiles of 4 subgroups: two workgroups' shared memory within 48 KiB.
      if (h.stage_halves) EXPECT_LE(2u * PA_SUBGROUP_SHARED_BYTES_H(256, 4, h.bm, h.tile_rows, 1u, 1u), 49152u) << "B=" << b;
    }
    Batch gqa8({}, 64, 4096);
    gqa8.p.num_q_heads = 32;
    gqa8.p.num_kv_heads = 4;
    gqa8.p.head_size = 256;
    gqa8.p.head_halves = true;
    EXPECT_FALSE(detail::schedule_paged_attention(dev, gqa8.p).stage_halves);
  }
}

// Routing sequences by rows (detail::schedule_paged_attention), only on a
// matrix path with the prefill kernel: with PrefillKernel::on, sequences of
// more rows than one token's decode tile; with automatic, on coopmat2,
// sequences of a whole prefill tile or more where they fill the GPU.
TEST(PagedAttentionPlanRouting, LongSequencesGoToThePrefillKernelWhereItPays) {
  using namespace detail;
  ScheduleDevice dev = h200_coopmat2();
  const std::vector<int32_t> qsl = {0, 300, 301, 304}, lens = {300, 1000, 900};   // 300 and 3 new tokens, one decode
  ScheduleProblem p;
  p.num_q_heads = 32;
  p.num_kv_heads = 8;
  p.head_size = 128;
  p.num_seqs = 3;
  p.num_tokens = 304;
  p.max_query_len = 300;
  p.query_start_loc = qsl;
  p.seq_lens = lens;
  p.split = SplitKv::off;
  // automatic: 300 tokens give 10 tiles of 128 rows per kv head, 80
  // workgroups for 132 multiprocessors: the decode kernel.
  EXPECT_FALSE(schedule_paged_attention(dev, p).prefill.on);
  {
    // Two such sequences (160 workgroups) and a short one: the long ones go
    // to the prefill kernel, the rest (up to 127 rows, several 16-row tiles
    // each) to the decode kernel.
    const std::vector<int32_t> qsl2 = {0, 300, 600, 620, 621}, lens2 = {300, 1000, 900, 50};
    ScheduleProblem q = p;
    q.num_seqs = 4;
    q.num_tokens = 621;
    q.query_start_loc = qsl2;
    q.seq_lens = lens2;
    const Schedule a = schedule_paged_attention(dev, q);
    ASSERT_TRUE(a.prefill.on);
    EXPECT_EQ(a.prefill.min_rows, 128u);
    EXPECT_EQ(a.bm, 16u);
    EXPECT_FALSE(a.one_tile_per_seq);
    EXPECT_GT(a.num_workgroups, 0u);
    // The KHR path without the element order (its softmax through shared
    // memory) routes by the same rule with its own 64-row tile (two
    // 300-token sequences: 19 tiles each, 304 workgroups); the scalar path
    // and off keep the decode kernel.
    ScheduleDevice khr = dev;
    khr.path = Path::coopmat;
    khr.prefill_shared_softmax = true;
    const Schedule k = schedule_paged_attention(khr, q);
    ASSERT_TRUE(k.prefill.on);
    EXPECT_EQ(k.prefill.min_rows, 64u);
    EXPECT_EQ(k.prefill.bm, 64u);
    // One 300-token sequence, which coopmat2 keeps on the decode kernel (80
    // workgroups of 128 rows), fills the GPU in the KHR tile's 64 rows (19 x
    // 8 = 152 workgroups).
    EXPECT_TRUE(schedule_paged_attention(khr, p).prefill.on);
    // Below head size 128 it keeps the decode kernel (where the prefill
    // kernel was measured slower); coopmat2 routes there too.
    {
      ScheduleProblem small = q;
      small.head_size = 64;
      EXPECT_FALSE(schedule_paged_attention(khr, small).prefill.on);
      EXPECT_TRUE(schedule_paged_attention(dev, small).prefill.on);
      small.head_size = 256;
      EXPECT_TRUE(schedule_paged_attention(khr, small).prefill.on);
    }
    // With the order, the KHR module's softmax runs in registers: coopmat2's
    // tile (128 rows in 8 subgroups, 64-key tiles) and rule, head size 64 too.
    {
      ScheduleDevice khr_registers = khr;
      khr_registers.prefill_shared_softmax = false;
      const Schedule r = schedule_paged_attention(khr_registers, q);
      ASSERT_TRUE(r.prefill.on);
      EXPECT_EQ(r.prefill.bm, 128u);
      EXPECT_EQ(r.prefill.bn, 64u);
      EXPECT_EQ(r.prefill.workgroup, 256u);
      EXPECT_FALSE(schedule_paged_attention(khr_registers, p).prefill.on);   // one 300-token sequence: 80 workgroups
      ScheduleProblem small = q;
      small.head_size = 64;
      EXPECT_TRUE(schedule_paged_attention(khr_registers, small).prefill.on);
    }
    ScheduleDevice scalar = dev;
    scalar.path = Path::scalar;
    EXPECT_FALSE(schedule_paged_attention(scalar, q).prefill.on);
    q.prefill = PrefillKernel::off;
    EXPECT_FALSE(schedule_paged_attention(dev, q).prefill.on);
    // A replay plan: sized by max_query_len for every sequence.
    q.prefill = PrefillKernel::automatic;
    q.query_start_loc = {};
    q.seq_lens = {};
    q.max_seq_len = 1000;
    EXPECT_TRUE(schedule_paged_attention(dev, q).prefill.on);   // 4 x 10 tiles x 8 heads
    q.num_seqs = 1;
    EXPECT_FALSE(schedule_paged_attention(dev, q).prefill.on);  // 80 workgroups
  }
  p.prefill = PrefillKernel::on;
  const Schedule on = schedule_paged_attention(dev, p);
  ASSERT_TRUE(on.prefill.on);
  EXPECT_EQ(on.bm, 16u);                    // one token's 4 rows: 16-row tiles (no 16x8x16 shape here)
  EXPECT_TRUE(on.one_tile_per_seq);
  EXPECT_EQ(on.prefill.min_rows, 17u);      // 3 new tokens (12 rows) stay on the decode kernel
  EXPECT_EQ(on.prefill.bm, 128u);           // coopmat2: 8 subgroups
  EXPECT_EQ(on.prefill.bn, 64u);            // keys per K/V tile
  EXPECT_EQ(on.prefill.workgroup, 256u);
  EXPECT_EQ(on.num_workgroups, 3u * 8u);    // one tile per sequence and kv head
  EXPECT_EQ(on.prefill.num_workgroups, (304u * 4u / 128u + 3u) * 8u);
  EXPECT_LE(PP_SHARED_BYTES(128u, 8u, on.prefill.bn, 0u), dev.max_shared_memory);
  // A batch of prefill rows only dispatches no decode workgroups.
  const std::vector<int32_t> qsl1 = {0, 300}, lens1 = {300};
  p.num_seqs = 1;
  p.num_tokens = 300;
  p.query_start_loc = qsl1;
  p.seq_lens = lens1;
  EXPECT_EQ(schedule_paged_attention(dev, p).num_workgroups, 0u);
  // Not where there is no prefill kernel, nor where every sequence fits one tile.
  p.max_query_len = 4;
  EXPECT_FALSE(schedule_paged_attention(dev, p).prefill.on);
  p.max_query_len = 300;
  dev.prefill_kernel = false;
  EXPECT_FALSE(schedule_paged_attention(dev, p).prefill.on);
  // Tiles by head size; a plan routes only where a tile fits. Head size 256
  // takes pairs of subgroups sharing each 16 rows (PP_HEAD_PARTS: its O and Q
  // for 16 rows would not fit one subgroup's registers), 4 subgroups; the KHR
  // path (S and P in shared memory) takes 4 subgroups; above 256 none fits.
  dev.prefill_kernel = true;
  EXPECT_EQ(prefill_tile(dev, 64).bn, 64u);
  EXPECT_EQ(prefill_tile(dev, 80).bn, 64u);
  for (bool khr : {false, true}) {
    dev.prefill_shared_softmax = khr;
    for (uint32_t d : {64u, 80u, 128u, 256u}) {
      const Tile t = prefill_tile(dev, d);
      ASSERT_NE(t.bm, 0u) << "head size " << d;
      p.head_size = d;
      EXPECT_TRUE(schedule_paged_attention(dev, p).prefill.on) << "head size " << d;
      const uint32_t nw = t.workgroup / 32;
      EXPECT_EQ(t.bm, 16 * nw / PP_HEAD_PARTS(d));
      EXPECT_EQ(nw, khr || d > 128 ? 4u : 8u) << "head size " << d;
      EXPECT_LE(PP_SHARED_BYTES(d, nw, t.bn, khr ? 1u : 0u), dev.max_shared_memory) << "head size " << d;
      EXPECT_GE(2 * t.bn * PP_ROW_VEC4(d), 64 * nw) << "head size " << d;   // the results' staging
      EXPECT_LE(t.bn * d / 8, 8u * t.workgroup) << "head size " << d;       // <= 8 loads of 16 bytes per invocation
    }
    EXPECT_EQ(prefill_tile(dev, 272).bm, 0u);
    // Pairs split the head's 16-wide slices evenly: 160 and 224 (10 and 14
    // slices) have a tile, 144 and 240 (9 and 15) none.
    EXPECT_NE(prefill_tile(dev, 160).bm, 0u);
    EXPECT_NE(prefill_tile(dev, 224).bm, 0u);
    EXPECT_EQ(prefill_tile(dev, 144).bm, 0u);
    EXPECT_EQ(prefill_tile(dev, 240).bm, 0u);
  }
}

// Block-sparse attention's tile on the prefill kernel
// (detail::block_sparse_prefill_tile): paged attention's where its rows and
// keys divide the mask's blocks, else the largest that does.
TEST(PagedAttentionPlanTile, BlockSparseTakesThePrefillTileWhereItDividesTheBlocks) {
  using namespace detail;
  ScheduleDevice dev = h200_coopmat2();
  auto tile = [&](uint32_t d, uint32_t qb, uint32_t kb) {
    const Tile t = block_sparse_prefill_tile(dev, d, qb, kb);
    return std::vector<uint32_t>{t.bm, t.bn, t.workgroup};
  };
  using V = std::vector<uint32_t>;
  EXPECT_EQ(tile(128, 128, 128), (V{128, 64, 256}));
  EXPECT_EQ(tile(128, 64, 128), (V{64, 64, 128}));     // q blocks of 64: 4 subgroups
  EXPECT_EQ(tile(128, 128, 32), (V{128, 32, 256}));    // kv blocks of 32: 32-key tiles
  EXPECT_EQ(tile(256, 128, 128), (V{32, 16, 128}));    // pairs: prefill_tile's 4 subgroups, not 8
  EXPECT_EQ(tile(256, 16, 128), (V{16, 16, 64}));      // q blocks of 16: one pair
  EXPECT_EQ(tile(240, 128, 128), (V{0, 0, 0}));        // an odd number of head slices: none
  dev.path = Path::coopmat;
  EXPECT_EQ(tile(128, 128, 128), (V{128, 64, 256}));   // KHR with the softmax in registers: coopmat2's
  dev.prefill_shared_softmax = true;
  EXPECT_EQ(tile(128, 128, 128), (V{64, 32, 128}));    // through shared memory: 4 subgroups at most
  EXPECT_EQ(tile(256, 128, 128), (V{32, 16, 128}));
}

// Routing by splitting (detail::schedule_paged_attention): with an automatic
// split, chunks too few to give the prefill kernel a workgroup per
// multiprocessor still take it, in the fewest segments that do (at most 4,
// of at least 256 keys), unless the decodes the split takes along are 4 or
// more work items per multiprocessor.
// A prefix-prefill plan (prefix_prefill_passes): the prefill kernel's grid
// becomes one pass's (one workgroup per q tile and kv head instead of one per
// segment), the decode kernel's items keep the segments; marking it again,
// or a plan without the prefill kernel, changes nothing.
TEST(PagedAttentionPlanRouting, PrefixPrefillPassesCountOnlyThePrefillKernelsItemsOnce) {
  using namespace detail;
  const ScheduleDevice dev = h200_coopmat2();
  Batch b({{512, 4608}, {512, 4608}, {512, 4608}, {512, 4608}}, 3, 900);   // 4 chunks of 512 over 4096, 3 decodes
  b.p.split = SplitKv::on;
  b.p.num_segments = 2;
  b.p.workspace_bytes = UINT64_MAX;   // as PrefixPrefillPlan asks, unless the engine says otherwise
  const Schedule two = schedule_paged_attention(dev, b.p);
  ASSERT_TRUE(two.prefill.on);
  ASSERT_EQ(two.num_segments, 2u);
  // Each chunk's 512 tokens x GQA 4 are 16 tiles of 128 rows, for each of 8
  // kv heads, in 2 segments (the grid has room for a tile more per sequence).
  EXPECT_GE(two.prefill.num_workgroups, 4u * 16u * 8u * 2u);
  // In two passes: an item per q tile and kv head in each pass, the grid
  // one pass's.
  Schedule passes = two;
  prefix_prefill_passes(passes);
  EXPECT_TRUE(passes.prefill.passes);
  EXPECT_EQ(2 * passes.prefill.num_workgroups, two.prefill.num_workgroups);
  EXPECT_EQ(passes.num_workgroups, two.num_workgroups);   // the decode kernel's
  EXPECT_EQ(passes.workspace_bytes, two.workspace_bytes);
  prefix_prefill_passes(passes);
  EXPECT_EQ(2 * passes.prefill.num_workgroups, two.prefill.num_workgroups);
  Schedule none = two;
  none.prefill = PrefillSchedule{};
  prefix_prefill_passes(none);
  EXPECT_FALSE(none.prefill.passes);
  EXPECT_EQ(none.prefill.num_workgroups, 0u);
}

TEST(PagedAttentionPlanRouting, ChunksTooFewToFillTheGpuTakeThePrefillKernelInSegments) {
  using namespace detail;
  ScheduleDevice dev = h200_coopmat2();
  // `bench decode`'s varlen batch: a 129- and a 64-token chunk among decodes
  // give the prefill kernel 7 tiles x 8 heads = 56 workgroups, 168 in 3 segments.
  Batch varlen({{1, 1328}, {5, 18}, {129, 463}, {1, 4096}, {64, 2048}});
  const Schedule a = schedule_paged_attention(dev, varlen.p);
  ASSERT_TRUE(a.prefill.on);
  EXPECT_EQ(a.prefill.min_rows, 128u);
  EXPECT_EQ(a.num_segments, 3u);
  EXPECT_TRUE(a.split);
  EXPECT_EQ(a.prefill.num_workgroups, (200u * 4u / 128u + 5u) * 8u * 3u);
  // Not when the split is off or explicit, nor without the workspace the segments need.
  ScheduleProblem q = varlen.p;
  q.split = SplitKv::off;
  EXPECT_FALSE(schedule_paged_attention(dev, q).prefill.on);
  q.split = SplitKv::on;
  q.num_segments = 3;
  EXPECT_FALSE(schedule_paged_attention(dev, q).prefill.on);
  q = varlen.p;
  q.workspace_bytes = split_workspace_bytes(200, 32, 128, 3) - 1;
  EXPECT_FALSE(schedule_paged_attention(dev, q).prefill.on);
  q.workspace_bytes = split_workspace_bytes(200, 32, 128, 3);
  EXPECT_TRUE(schedule_paged_attention(dev, q).prefill.on);
  // Not when it would take more than 4 segments: one 32-token chunk (128
  // rows, 8 workgroups) over 4096 keys stays on the decode kernel.
  EXPECT_FALSE(schedule_paged_attention(dev, Batch({{32, 4096}}).p).prefill.on);
  // Nor when the segments would be short: 300 tokens over 300 keys (80
  // workgroups) would need 2 segments of 150 keys.
  EXPECT_FALSE(schedule_paged_attention(dev, Batch({{300, 300}, {1, 1000}, {3, 900}}).p).prefill.on);
  // 300 new tokens after a context of 700 keys: 2 segments of 500.
  const Schedule b = schedule_paged_attention(dev, Batch({{300, 1000}, {1, 1000}, {3, 900}}).p);
  ASSERT_TRUE(b.prefill.on);
  EXPECT_EQ(b.num_segments, 2u);
  // `bench serve`'s step of a 256-token chunk (64 prefill workgroups) beside
  // 256 decodes (2048 decode items) stays unsplit on the decode kernel; beside
  // 64 decodes (512 items, under 4 per SM) the chunk takes the prefill kernel
  // in 3 segments.
  for (uint32_t decodes : {256u, 64u}) {
    const Schedule c = schedule_paged_attention(dev, Batch({{256, 4096 + 256}}, decodes, 4096).p);
    EXPECT_EQ(c.prefill.on, decodes == 64u) << decodes << " decodes";
    EXPECT_EQ(c.num_segments, decodes == 64u ? 3u : 1u) << decodes << " decodes";
  }
}

}  // namespace
}  // namespace vkattn::test
