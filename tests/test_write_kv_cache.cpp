// write_kv_cache against the float64 reference: every cache dtype, layout,
// input dtype and slot dtype; odd block sizes; padding; chunked caches; grids
// folded past 65535 workgroups; descriptor-set binding; and bad input.
#include <cmath>
#include <cstring>

#include <vkattn_ref/number_formats.hpp>

#include "runners/write_kv_cache_runner.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

using tool::WriteKvCacheCase;

WriteKvCacheCase small_case(DType cache_dtype, KvLayout layout, DType input, DType slots, uint64_t seed) {
  WriteKvCacheCase c;
  c.num_tokens = 29;
  c.padding_tokens = 4;
  c.cache = {.num_blocks = 9, .block_size = 16, .num_kv_heads = 2, .head_size = 64, .dtype = cache_dtype,
             .layout = layout, .k_scale = 0.037f, .v_scale = 0.011f};
  c.input_dtype = input;
  c.slot_dtype = slots;
  c.seed = seed;
  c.timing_repetitions = 0;
  return c;
}

struct Combo {
  DType cache;
  KvLayout layout;
  DType input;
  DType slots;
};

class WriteKvCacheCombos : public VkTest, public ::testing::WithParamInterface<Combo> {};

TEST_P(WriteKvCacheCombos, MatchesReference) {
  const Combo& p = GetParam();
  auto r = tool::run_write_kv_cache(ctx(), small_case(p.cache, p.layout, p.input, p.slots, 7));
  EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure;
}

std::vector<Combo> all_combos() {
  std::vector<Combo> v;
  for (DType cache : {DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2})
    for (KvLayout l : {KvLayout::nhd, KvLayout::hnd, KvLayout::split})
      for (DType in : {DType::f16, DType::bf16, DType::f32})
        v.push_back({cache, l, in, (v.size() % 2) ? DType::i32 : DType::i64});
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllDtypesAndLayouts, WriteKvCacheCombos, ::testing::ValuesIn(all_combos()),
                         [](const auto& info) {
                           const Combo& c = info.param;
                           return std::string(dtype_name(c.cache)) + "_" + std::string(layout_name(c.layout)) + "_from_" +
                                  std::string(dtype_name(c.input)) + "_" + std::string(dtype_name(c.slots));
                         });

class WriteKvCache : public VkTest {};

// vkattn run spins the GPU up through this hook (timings otherwise come from
// a slow-clock state on some GPUs): it runs once, after the checks, only when
// the op is timed.
TEST_F(WriteKvCache, RunnerCallsBeforeTimingOnlyWhenTiming) {
  if (ctx().capabilities().timestamp_period_ns <= 0) GTEST_SKIP() << "no timestamp queries";
  WriteKvCacheCase c = small_case(DType::f16, KvLayout::nhd, DType::f16, DType::i32, 11);
  int calls = 0;
  c.before_timing = [&calls] { ++calls; };
  EXPECT_TRUE(tool::run_write_kv_cache(ctx(), c).pass);
  EXPECT_EQ(calls, 0);   // timing_repetitions = 0
  c.timing_repetitions = 2;
  auto r = tool::run_write_kv_cache(ctx(), c);
  EXPECT_TRUE(r.pass);
  EXPECT_EQ(calls, 1);
  EXPECT_GT(r.gpu_us, 0.0);
}

TEST_F(WriteKvCache, BlockSizeThatIsNotAPowerOfTwo) {
  for (KvLayout l : {KvLayout::nhd, KvLayout::split}) {
    auto c = small_case(DType::f16, l, DType::f32, DType::i64, 11);
    c.cache.block_size = 48;
    c.cache.head_size = 80;
    c.cache.num_kv_heads = 3;
    auto r = tool::run_write_kv_cache(ctx(), c);
    EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure;
  }
}

TEST_F(WriteKvCache, StridedAndUnalignedInputs) {
  // Row padding and a view offset that break 16-byte alignment: element-wise loads.
  for (DType in : {DType::f16, DType::f32}) {
    auto c = small_case(DType::fp8_e5m2, KvLayout::split, in, DType::i64, 17);
    c.row_padding = 3;
    c.view_offset = 5;
    auto r = tool::run_write_kv_cache(ctx(), c);
    EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure;
    c.row_padding = 8;   // aligned again, but not contiguous: vector loads with a stride
    c.view_offset = 16;
    c.cache.dtype = DType::bf16;
    r = tool::run_write_kv_cache(ctx(), c);
    EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure;
  }
}

TEST_F(WriteKvCache, SaturatesOutOfRangeValues) {
  // Inputs far beyond fp8 range after scaling: must clamp to +-max finite, never inf or NaN.
  for (DType d : {DType::fp8_e4m3, DType::fp8_e5m2, DType::f16}) {
    auto c = small_case(d, KvLayout::hnd, DType::f32, DType::i64, 3);
    c.amplitude = 1e6;
    auto r = tool::run_write_kv_cache(ctx(), c);
    EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure;
  }
}

// Inputs of the cache's own dtype are stored as they are: every f16 / bf16
// bit pattern of the inputs (NaNs with payloads, infinities, -0, subnormals)
// comes back unchanged, in NHD and split (whose V stores element by element).
// (Converted, infinities saturated to the largest finite value and NaNs
// became the canonical NaN.)
TEST_F(WriteKvCache, SameDtypeInputsAreStoredBitForBit) {
  const uint32_t H = 2, D = 64, n = 32, bs = 16;
  for (DType d : {DType::f16, DType::bf16})
    for (KvLayout layout : {KvLayout::nhd, KvLayout::split}) {
      KvCacheConfig cfg{.num_blocks = 4, .block_size = bs, .num_kv_heads = H, .head_size = D, .dtype = d, .layout = layout};
      PagedKvCache cache(ctx(), cfg);
      // 4096 patterns: the top byte (sign and exponent's high bits) walks all
      // 256 values, the low byte a few, so every exponent class shows up.
      std::vector<uint16_t> k(n * H * D), v(k.size());
      for (size_t i = 0; i < k.size(); ++i) {
        k[i] = static_cast<uint16_t>(((i % 256) << 8) | ((i / 256) * 17 % 256));
        v[i] = static_cast<uint16_t>(k[i] ^ 0x8001u);
      }
      std::vector<int64_t> slots(n);
      for (uint32_t t = 0; t < n; ++t) slots[t] = (t * 7 + 3) % (cfg.num_blocks * bs);   // distinct
      Buffer kb(ctx(), k.size() * 2), vb(ctx(), v.size() * 2), sb(ctx(), n * 8);
      kb.upload(k.data(), k.size() * 2);
      vb.upload(v.data(), v.size() * 2);
      sb.upload(slots.data(), n * 8);
      write_kv_cache(ctx(), cache, TensorView::contiguous(kb, d, {n, H, D}), TensorView::contiguous(vb, d, {n, H, D}),
                     TensorView::contiguous(sb, DType::i64, {n}));
      const auto got_k = cache.read_blocks(KvPart::key, 0, cfg.num_blocks);
      const auto got_v = cache.read_blocks(KvPart::value, 0, cfg.num_blocks);
      size_t wrong = 0;
      for (uint32_t t = 0; t < n; ++t)
        for (uint32_t h = 0; h < H; ++h)
          for (uint32_t e = 0; e < D; ++e) {
            const uint64_t b = uint64_t(slots[t]) / bs, s = uint64_t(slots[t]) % bs;
            const uint64_t at_k = b * cache.block_bytes() / 2 + cache.element_in_block(KvPart::key, uint32_t(s), h, e);
            const uint64_t at_v = b * cache.block_bytes() / 2 + cache.element_in_block(KvPart::value, uint32_t(s), h, e);
            uint16_t gk, gv;
            std::memcpy(&gk, &got_k[at_k * 2], 2);
            std::memcpy(&gv, &got_v[at_v * 2], 2);
            const size_t i = (size_t(t) * H + h) * D + e;
            if ((gk != k[i] || gv != v[i]) && wrong++ < 3)
              ADD_FAILURE() << dtype_name(d) << " " << layout_name(layout) << " token " << t << " head " << h << " dim " << e
                            << ": stored " << std::hex << gk << "/" << gv << ", input " << k[i] << "/" << v[i] << std::dec;
          }
      EXPECT_EQ(wrong, 0u) << dtype_name(d) << " " << layout_name(layout);
    }
}

// The encoders (number_formats.glsl) against the reference's, bit for bit,
// from f32 inputs into an fp8, f16 or bf16 cache: every f16 value (so every
// fp8 subnormal, normal, rounding class and saturation, and every f16 value
// as itself), every tie between adjacent values of the format and the f32
// values just either side of it (bf16's subnormal ties are f32 denormals),
// f32 subnormals, infinities and NaNs (any NaN code for a NaN).
TEST_F(WriteKvCache, EncodingMatchesTheReferenceAtEveryTie) {
  for (DType d : {DType::fp8_e4m3, DType::fp8_e5m2, DType::f16, DType::bf16}) {
    const ref::Format format = d == DType::fp8_e4m3 ? ref::Format::e4m3
                               : d == DType::fp8_e5m2 ? ref::Format::e5m2
                               : d == DType::f16      ? ref::Format::f16
                                                      : ref::Format::bf16;
    const uint32_t width = d == DType::f16 || d == DType::bf16 ? 16 : 8, sign_bit = 1u << (width - 1);
    auto is_nan = [&](uint32_t code) { return std::isnan(ref::decode(format, code)); };
    std::vector<float> x;
    for (uint32_t h = 0; h < 65536; ++h) x.push_back(static_cast<float>(ref::f16_to_double(static_cast<uint16_t>(h))));
    for (uint32_t code = 0; code + 1 < sign_bit; ++code) {   // positive codes and the next one up
      const double lo = ref::decode(format, code), hi = ref::decode(format, code + 1);
      if (!std::isfinite(lo) || !std::isfinite(hi)) continue;
      const float tie = static_cast<float>((lo + hi) / 2);   // exact: these formats' ties fit an f32
      for (float t : {tie, std::nextafter(tie, 0.0f), std::nextafter(tie, INFINITY)}) {
        x.push_back(t);
        x.push_back(-t);
      }
    }
    // Past the largest finite value: its tie with the next power of two, and beyond.
    const double top = ref::max_finite(format), past = top + ref::ulp_at(format, top) / 2;
    for (float t : {static_cast<float>(past), std::nextafter(static_cast<float>(past), 0.0f), static_cast<float>(2 * top)}) {
      x.push_back(t);
      x.push_back(-t);
    }
    for (float t : {1e-45f, 1e-40f, 1.17549421e-38f, 1e30f, 3.4028235e38f, INFINITY, -INFINITY, NAN, -NAN, 0.0f, -0.0f})
      x.push_back(t);
    const uint32_t D = 128, bs = 16, n = static_cast<uint32_t>((x.size() + D - 1) / D);
    x.resize(size_t(n) * D, 0.5f);
    std::vector<float> v(x.size());
    for (size_t i = 0; i < x.size(); ++i) v[i] = x[x.size() - 1 - i];   // V reversed: each value through both paths
    KvCacheConfig cfg{.num_blocks = (n + bs - 1) / bs, .block_size = bs, .num_kv_heads = 1, .head_size = D, .dtype = d,
                      .layout = KvLayout::nhd};
    PagedKvCache cache(ctx(), cfg);
    std::vector<int64_t> slots(n);
    for (uint32_t t = 0; t < n; ++t) slots[t] = t;
    Buffer kb(ctx(), x.size() * 4), vb(ctx(), v.size() * 4), sb(ctx(), n * 8);
    kb.upload(x.data(), x.size() * 4);
    vb.upload(v.data(), v.size() * 4);
    sb.upload(slots.data(), n * 8);
    write_kv_cache(ctx(), cache, TensorView::contiguous(kb, DType::f32, {n, 1, D}), TensorView::contiguous(vb, DType::f32, {n, 1, D}),
                   TensorView::contiguous(sb, DType::i64, {n}));
    const auto got_k = cache.read_blocks(KvPart::key, 0, cfg.num_blocks);
    const auto got_v = cache.read_blocks(KvPart::value, 0, cfg.num_blocks);
    const uint32_t esize = width / 8;
    auto code_at = [&](const std::vector<uint8_t>& bytes, uint64_t element) {
      uint32_t c = 0;
      std::memcpy(&c, &bytes[element * esize], esize);
      return c;
    };
    size_t wrong = 0;
    for (uint32_t t = 0; t < n; ++t)
      for (uint32_t e = 0; e < D; ++e) {
        const size_t i = size_t(t) * D + e;
        const uint64_t at_k = uint64_t(t / bs) * cache.block_bytes() / esize + cache.element_in_block(KvPart::key, t % bs, 0, e);
        const uint64_t at_v = uint64_t(t / bs) * cache.block_bytes() / esize + cache.element_in_block(KvPart::value, t % bs, 0, e);
        const uint32_t got_kc = code_at(got_k, at_k), got_vc = code_at(got_v, at_v);
        const uint32_t want_k = ref::encode(format, x[i]), want_v = ref::encode(format, v[i]);
        // A NaN's sign after arithmetic (the fp8 kernel's x * inv_scale) is
        // unspecified: the H200 returns the positive canonical NaN.
        auto same = [&](uint32_t got, uint32_t want) { return got == want || (is_nan(got) && is_nan(want)); };
        if ((!same(got_kc, want_k) || !same(got_vc, want_v)) && wrong++ < 5)
          ADD_FAILURE() << dtype_name(d) << ": " << x[i] << " / " << v[i] << " stored as 0x" << std::hex << got_kc << " / 0x"
                        << got_vc << ", the reference's 0x" << want_k << " / 0x" << want_v << std::dec;
      }
    EXPECT_EQ(wrong, 0u) << dtype_name(d) << ", " << x.size() << " values";
  }
}

TEST_F(WriteKvCache, EveryTokenPaddingWritesNothing) {
  auto c = small_case(DType::bf16, KvLayout::nhd, DType::bf16, DType::i32, 5);
  c.num_tokens = 6;
  c.padding_tokens = 200;   // more than the tokens: every one of the 6 gets slot -1
  auto r = tool::run_write_kv_cache(ctx(), c);
  EXPECT_TRUE(r.pass) << r.failure;
}

TEST(WriteKvCacheChunks, CacheSpansSeveralAllocations) {
  // Small chunks force block addressing across allocations on any device.
  auto opts = test_options();
  opts.max_chunk_bytes = 3 * 16 * 2 * 64 * 2 + 100;   // 3 blocks per chunk
  Context ctx(opts);
  auto c = small_case(DType::f16, KvLayout::split, DType::f16, DType::i64, 9);
  c.cache.num_blocks = 10;
  tool::WriteKvCacheCase cc = c;
  PagedKvCache probe(ctx, cc.cache);
  EXPECT_EQ(probe.blocks_per_chunk(), 3u);
  EXPECT_EQ(probe.num_chunks(), 4u);
  auto r = tool::run_write_kv_cache(ctx, cc);
  EXPECT_TRUE(r.pass) << r.failure;
  for (const auto& m : ctx.validation_messages()) ADD_FAILURE() << m;
}

TEST_F(WriteKvCache, CacheLargerThanTheStorageBufferRange) {
  // A cache larger than maxStorageBufferRange (128 MiB on lavapipe) must span
  // allocations; tokens are written at both ends so the last chunk is used.
  const auto& caps = ctx().capabilities();
  const uint64_t target = caps.max_storage_buffer_range + (32ull << 20);
  KvCacheConfig cfg{.num_blocks = 0, .block_size = 16, .num_kv_heads = 8, .head_size = 128, .dtype = DType::f16};
  const uint64_t block_bytes = 16ull * 8 * 128 * 2;
  cfg.num_blocks = static_cast<uint32_t>(target / block_bytes);
  PagedKvCache cache(ctx(), cfg);
  ASSERT_GT(cache.num_chunks(), 1u);
  cache.fill(0xA5A5A5A5u);
  const uint32_t n = 2;
  std::vector<int64_t> slots = {3, int64_t(cache.num_slots()) - 1};
  std::vector<float> kv(n * 8 * 128);
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = float(i % 97) * 0.25f - 12.0f;
  Buffer kb(ctx(), kv.size() * 4), sb(ctx(), 16);
  kb.upload(kv.data(), kv.size() * 4);
  sb.upload(slots.data(), 16);
  auto view = TensorView::contiguous(kb, DType::f32, {n, 8, 128});
  write_kv_cache(ctx(), cache, view, view, TensorView::contiguous(sb, DType::i64, {n}));
  auto last = cache.read_blocks(KvPart::value, cfg.num_blocks - 1, 1);
  auto first = cache.read_blocks(KvPart::key, 0, 1);
  for (uint32_t h = 0; h < 8; ++h)
    for (uint32_t d = 0; d < 128; d += 31) {
      uint16_t a, b;
      std::memcpy(&a, &first[((3 * 8 + h) * 128 + d) * 2], 2);
      std::memcpy(&b, &last[((15 * 8 + h) * 128 + d) * 2], 2);
      EXPECT_EQ(a, ref::f16_from_double(kv[(0 * 8 + h) * 128 + d]));
      EXPECT_EQ(b, ref::f16_from_double(kv[(1 * 8 + h) * 128 + d]));
    }
  EXPECT_EQ(first[(2 * 8 * 128) * 2], 0xA5);   // token 2 untouched
}

TEST_F(WriteKvCache, GridFoldsPastTheWorkgroupLimit) {
  // More tokens than maxComputeWorkGroupCount[0] on lavapipe (65535).
  auto c = small_case(DType::fp8_e4m3, KvLayout::nhd, DType::f16, DType::i32, 13);
  c.num_tokens = 70001;
  c.padding_tokens = 100;
  c.cache = {.num_blocks = 4400, .block_size = 16, .num_kv_heads = 1, .head_size = 16, .dtype = DType::fp8_e4m3,
             .k_scale = 0.5f, .v_scale = 0.25f};
  auto r = tool::run_write_kv_cache(ctx(), c);
  EXPECT_TRUE(r.pass) << r.failure;
}

TEST(WriteKvCacheBinding, DescriptorSetsWhenPushDescriptorsAreOff) {
  auto opts = test_options();
  opts.disable_push_descriptors = true;
  Context ctx(opts);
  auto r = tool::run_write_kv_cache(ctx, small_case(DType::bf16, KvLayout::hnd, DType::f32, DType::i64, 21));
  EXPECT_TRUE(r.pass) << r.failure;
  for (const auto& m : ctx.validation_messages()) ADD_FAILURE() << m;
}

// ---- bad input ----

class WriteKvCacheBadInput : public VkTest {
 protected:
  void SetUp() override {
    VkTest::SetUp();
    cache_ = std::make_unique<PagedKvCache>(ctx(), KvCacheConfig{.num_blocks = 4, .block_size = 16, .num_kv_heads = 2, .head_size = 64});
    kb_ = Buffer(ctx(), 3 * 2 * 64 * 2);
    sb_ = Buffer(ctx(), 3 * 8);
    std::vector<uint16_t> ones(3 * 2 * 64, 0x3C00);
    kb_.upload(ones.data(), ones.size() * 2);
  }
  void TearDown() override {
    cache_.reset();
    kb_ = Buffer();
    sb_ = Buffer();
    VkTest::TearDown();
  }
  TensorView kv(std::vector<int64_t> shape, DType t = DType::f16) { return TensorView::contiguous(kb_, t, std::move(shape)); }
  TensorView slots(int64_t n = 3, DType t = DType::i64) { return TensorView::contiguous(sb_, t, {n}); }
  std::unique_ptr<PagedKvCache> cache_;
  Buffer kb_, sb_;
};

TEST_F(WriteKvCacheBadInput, WrongShape) {
  EXPECT_VKATTN_ERROR(write_kv_cache(ctx(), *cache_, kv({3, 2, 32}), kv({3, 2, 64}), slots()), "key has shape [3, 2, 32]",
                      "expected [*, 2, 64]", "head_size");
  EXPECT_VKATTN_ERROR(write_kv_cache(ctx(), *cache_, kv({3, 2, 64}), kv({3, 2, 64}), slots(2)), "slot_mapping has shape [2]",
                      "expected [3]");
}

TEST_F(WriteKvCacheBadInput, DtypeMismatch) {
  EXPECT_VKATTN_ERROR(write_kv_cache(ctx(), *cache_, kv({3, 2, 64}), kv({3, 2, 64}, DType::bf16), slots()),
                      "value has dtype bf16, expected f16");
  EXPECT_VKATTN_ERROR(write_kv_cache(ctx(), *cache_, kv({3, 2, 64}), kv({3, 2, 64}), slots(3, DType::f32)),
                      "slot_mapping has dtype f32, expected i64, i32");
}

TEST_F(WriteKvCacheBadInput, BufferTooSmallForTheView) {
  Buffer small(ctx(), 100);
  auto v = TensorView::contiguous(small, DType::f16, {3, 2, 64});
  EXPECT_VKATTN_ERROR(write_kv_cache(ctx(), *cache_, v, v, slots()), "key", "needs 768 bytes", "holds 100");
}

TEST_F(WriteKvCacheBadInput, SlotBeyondTheCacheIsReportedAndNothingIsWrittenOutOfBounds) {
  cache_->fill(0x11111111u);
  std::vector<int64_t> s = {5, 64, -1};   // 64 = 4 blocks * 16: one past the end
  sb_.upload(s.data(), 24);
  EXPECT_VKATTN_ERROR(write_kv_cache(ctx(), *cache_, kv({3, 2, 64}), kv({3, 2, 64}), slots()), "slot_mapping[1] = 64",
                      "beyond the cache", "64 slots");
  // Token 0 was still written; the context is usable afterwards.
  auto b = cache_->read_blocks(KvPart::key, 0, 1);
  uint16_t h;
  std::memcpy(&h, &b[(5 * 2 * 64) * 2], 2);
  EXPECT_EQ(h, 0x3C00);
  s = {1, 2, 3};
  sb_.upload(s.data(), 24);
  EXPECT_NO_THROW(write_kv_cache(ctx(), *cache_, kv({3, 2, 64}), kv({3, 2, 64}), slots()));
}

TEST_F(WriteKvCacheBadInput, RecordedOpsReportThroughCheckDeviceStatus) {
  std::vector<int64_t> s = {0, 1, int64_t(1) << 40};
  sb_.upload(s.data(), 24);
  ctx().submit_and_wait([&](VkCommandBuffer) {});   // nothing pending
  EXPECT_VKATTN_ERROR(ctx().submit_and_wait([&](VkCommandBuffer cmd) {
                        write_kv_cache(ctx(), *cache_, kv({3, 2, 64}), kv({3, 2, 64}), slots(), cmd);
                      }),
                      "slot_mapping[2] = 1099511627776");
  EXPECT_NO_THROW(ctx().check_device_status());   // cleared once reported
}

TEST_F(WriteKvCacheBadInput, UnsupportedCacheConfigurations) {
  EXPECT_VKATTN_ERROR(PagedKvCache(ctx(), {.num_blocks = 4, .block_size = 16, .num_kv_heads = 2, .head_size = 100}),
                      "head_size = 100", "multiple of 16 from 16 to 256");
  EXPECT_VKATTN_ERROR(PagedKvCache(ctx(), {.num_blocks = 4, .block_size = 0, .num_kv_heads = 2, .head_size = 64}),
                      "block_size = 0");
  EXPECT_VKATTN_ERROR(PagedKvCache(ctx(), {.num_blocks = 4, .block_size = 16, .num_kv_heads = 2, .head_size = 64, .dtype = DType::f32}),
                      "dtype = f32", "f16, bf16, fp8_e4m3 or fp8_e5m2");
  EXPECT_VKATTN_ERROR(PagedKvCache(ctx(), {.num_blocks = 4, .block_size = 16, .num_kv_heads = 2, .head_size = 64,
                                           .dtype = DType::fp8_e4m3, .k_scale = 0.0f}),
                      "k_scale", "finite value > 0");
}

}  // namespace
}  // namespace vkattn::test
