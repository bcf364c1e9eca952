// Every fp8 code, as the attention kernels decode it: one sequence of one key
// whose V row (head size 256) holds all 256 codes, so that the output, with
// P = 1 and the sum 1, is each decoded value itself, exactly (NaN codes NaN,
// e5m2's infinities infinite). Every path the device runs, f16 and bf16
// queries (the matrix kernel's f16 and bf16 modules), and both V layouts the
// loads differ for (contiguous dims, and split, whose dims lie apart); and
// at head size 128, half the codes at a time, where the matrix paths build
// the K and V matrices in registers (paged_attention_subgroup.comp,
// REGISTER_MATRICES, on a device whose matrix element order allows it).
// The same codes through the prefill kernel (paged_prefill.comp), and fp8
// keys' scores there, subnormal to largest, with large scales (Fp8Keys),
// from paged_attention and from prefix_prefill (whose specialization stages
// bf16 q's e4m3 keys in a form of its own).
#include <cmath>
#include <cstring>

#include <vkattn_ref/number_formats.hpp>

#include "device_batch.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

struct Fp8DecodeCase {
  const char* name;
  DType cache;
  DType q;
  KvLayout layout;
  uint32_t head_size = 256;
  uint32_t first_code = 0;   // V's dim d holds code first_code + d
};
void PrintTo(const Fp8DecodeCase& c, std::ostream* os) { *os << c.name; }

class Fp8Decode : public VkTest, public ::testing::WithParamInterface<Fp8DecodeCase> {};

TEST_P(Fp8Decode, EveryCodeReadsAsTheReferenceDecodesIt) {
  const Fp8DecodeCase& p = GetParam();
  const uint32_t D = p.head_size;
  KvCacheConfig cfg{.num_blocks = 2, .block_size = 16, .num_kv_heads = 1, .head_size = D, .dtype = p.cache, .layout = p.layout};
  PagedKvCache cache(ctx(), cfg);
  cache.fill(p.cache == DType::fp8_e4m3 ? 0x28282828u : 0x34343434u);   // 0.25: K, and V outside key 0
  auto v = cache.read_blocks(KvPart::value, 1, 1);
  for (uint32_t d = 0; d < D; ++d) v[cache.element_in_block(KvPart::value, 0, 0, d)] = static_cast<uint8_t>(p.first_code + d);
  cache.write_blocks(KvPart::value, 1, v);

  DeviceBatch batch(ctx(), {0, 1}, {1}, {1}, 1);
  PagedAttentionPlan plan(ctx(), cfg, 1, p.q, batch.lengths());
  Buffer q(ctx(), D * 2), out(ctx(), D * 4);
  q.fill(p.q == DType::bf16 ? 0x3F803F80u : 0x3C003C00u);   // 1.0
  out.fill(0xFFFFFFFFu);
  PagedAttentionArgs a;
  a.q = TensorView::contiguous(q, p.q, {1, 1, D});
  a.out = TensorView::contiguous(out, DType::f32, {1, 1, D});
  a.batch = batch.view();
  a.params.scale = 0.0625f;
  paged_attention(ctx(), plan, cache, a);
  const auto o = out.download_as<float>(D);
  const ref::Format f = p.cache == DType::fp8_e4m3 ? ref::Format::e4m3 : ref::Format::e5m2;
  for (uint32_t d = 0; d < D; ++d) {
    const uint32_t code = p.first_code + d;
    const double want = ref::decode(f, code);
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(o[d])) << "code 0x" << std::hex << code << " gave " << o[d] << ", expected NaN";
    else
      EXPECT_EQ(double(o[d]), want) << "code 0x" << std::hex << code << " (path " << path_name(plan.path()) << ")";
  }
}

// One sequence of kRows new tokens over the cache's first blocks (block
// size 16), one head, every element of q the 16-bit word q_bits, routed to
// the prefill kernel where the device has it: the f32 output and the path.
constexpr uint32_t kRows = 64;
struct PrefillRun {
  std::vector<float> out;
  Path path;
};
PrefillRun run_on_prefill_kernel(Context& ctx, const PagedKvCache& cache, const KvCacheConfig& cfg, DType q_dtype,
                                 uint32_t q_bits, float scale, int32_t window) {
  const uint32_t D = cfg.head_size, L = kRows;
  DeviceBatch batch(ctx, {0, int32_t(L)}, {int32_t(L)}, {0, 1, 2, 3}, L / 16);
  PagedAttentionPlanOptions opt;
  opt.prefill = PrefillKernel::on;
  PagedAttentionPlan plan(ctx, cfg, 1, q_dtype, batch.lengths(), opt);
  if (plan.path() != Path::scalar) EXPECT_TRUE(plan.routes_prefill());
  Buffer q(ctx, L * D * 2), out(ctx, L * D * 4);
  q.fill(q_bits | (q_bits << 16));
  out.fill(0xFFFFFFFFu);
  PagedAttentionArgs a;
  a.q = TensorView::contiguous(q, q_dtype, {L, 1, D});
  a.out = TensorView::contiguous(out, DType::f32, {L, 1, D});
  a.batch = batch.view();
  a.params.scale = scale;
  a.params.sliding_window = window;
  paged_attention(ctx, plan, cache, a);
  return {out.download_as<float>(L * D), plan.path()};
}

// The same through prefix_prefill: kRows new tokens over a context of the
// cache's first kRows keys (each token sees all of them), q's elements as
// given, every element of the new tokens' K the 16-bit word k_bits and of
// their V v_bits. Its fp8 cache keys and the new tokens are items of their
// own, so this reaches the prefix-prefill specialization of the prefill
// kernel's staging. The plan's path is known before run.
struct PrefixOnPrefillKernel {
  PrefixOnPrefillKernel(Context& c, const KvCacheConfig& cfg, DType q_dtype, const std::vector<uint16_t>& q_elems,
                        uint32_t k_bits, uint32_t v_bits, float scale)
      : ctx(c),
        batch(c, {0, int32_t(kRows)}, {int32_t(2 * kRows)}, {0, 1, 2, 3}, kRows / 16),
        plan(c, cfg, 1, q_dtype, batch.lengths(), PrefixPrefillOptions{.prefill = PrefillKernel::on}),
        q(c, q_elems.size() * 2), key(c, q_elems.size() * 2), value(c, q_elems.size() * 2), out(c, q_elems.size() * 4) {
    const uint32_t D = cfg.head_size, L = kRows;
    if (plan.attention().path() != Path::scalar) EXPECT_TRUE(plan.attention().routes_prefill());
    q.upload(q_elems.data(), q_elems.size() * 2);
    key.fill(k_bits | (k_bits << 16));
    value.fill(v_bits | (v_bits << 16));
    out.fill(0xFFFFFFFFu);
    args.q = TensorView::contiguous(q, q_dtype, {L, 1, D});
    args.key = TensorView::contiguous(key, q_dtype, {L, 1, D});
    args.value = TensorView::contiguous(value, q_dtype, {L, 1, D});
    args.out = TensorView::contiguous(out, DType::f32, {L, 1, D});
    args.batch = batch.view();
    args.params.scale = scale;
  }
  Path path() const { return plan.attention().path(); }
  std::vector<float> run(PagedKvCache& cache) {
    prefix_prefill(ctx, plan, cache, args);
    return out.download_as<float>(out.size() / 4);
  }
  Context& ctx;
  DeviceBatch batch;
  PrefixPrefillPlan plan;
  Buffer q, key, value, out;
  PrefixPrefillArgs args;
};
PrefillRun run_prefix_prefill_on_prefill_kernel(Context& ctx, PagedKvCache& cache, const KvCacheConfig& cfg, DType q_dtype,
                                                uint32_t q_bits, uint32_t k_bits, float scale) {
  PrefixOnPrefillKernel run(ctx, cfg, q_dtype, std::vector<uint16_t>(size_t(kRows) * cfg.head_size, uint16_t(q_bits)), k_bits, 0u, scale);
  return {run.run(cache), run.path()};
}

// The same codes on the prefill kernel (where the plan routes 64 query
// tokens to it: the matrix paths), each row seeing only its own key (a
// window of 1), every key's V row the codes: each output is each decoded
// value times v_scale, exactly. The caches' scales 1 and 1024: the matrix
// kernels stage fp8 values scaled by a power of two and undo it beside
// v_scale and k_scale, so a factor past f32's range, or a staged value too
// small for the matrices (flushed), would show here. Two forms of prefix
// prefill's e4m3 staging as bf16 * 2^-120 failed it on coopmat2: one whose
// products went subnormal, and one that took P as exp(x + 64 ln 2), whose
// outputs came out one f32 step low at scales of 1024 (DEVELOPERS.md, "bf16
// q over e4m3 in one step").
TEST_P(Fp8Decode, EveryCodeReadsAsTheReferenceDecodesItOnThePrefillKernel) {
  const Fp8DecodeCase& p = GetParam();
  const uint32_t D = p.head_size, L = kRows, bs = 16;
  for (float kv_scale : {1.0f, 1024.0f}) {
    KvCacheConfig cfg{.num_blocks = L / bs, .block_size = bs, .num_kv_heads = 1, .head_size = D, .dtype = p.cache,
                      .layout = p.layout, .k_scale = kv_scale, .v_scale = kv_scale};
    PagedKvCache cache(ctx(), cfg);
    cache.fill(p.cache == DType::fp8_e4m3 ? 0x28282828u : 0x34343434u);   // K 0.25
    for (uint32_t b = 0; b < L / bs; ++b) {
      auto v = cache.read_blocks(KvPart::value, b, 1);
      for (uint32_t t = 0; t < bs; ++t)
        for (uint32_t d = 0; d < D; ++d) v[cache.element_in_block(KvPart::value, t, 0, d)] = static_cast<uint8_t>(p.first_code + d);
      cache.write_blocks(KvPart::value, b, v);
    }
    const uint32_t one = p.q == DType::bf16 ? 0x3F80u : 0x3C00u, minus_1024 = p.q == DType::bf16 ? 0xC480u : 0xE400u;
    for (const bool prefix : {false, true}) {
      // prefix_prefill: every token sees the 64 cached keys, whose P are
      // equal (l = 64, exact), and its new tokens' keys of -1024, whose P
      // are 0.
      const auto [o, path] = prefix ? run_prefix_prefill_on_prefill_kernel(ctx(), cache, cfg, p.q, one, minus_1024, 0.0625f)
                                    : run_on_prefill_kernel(ctx(), cache, cfg, p.q, one, 0.0625f, 1);
      const ref::Format f = p.cache == DType::fp8_e4m3 ? ref::Format::e4m3 : ref::Format::e5m2;
      int bad = 0;
      for (uint32_t r = 0; r < L && bad < 8; ++r)
        for (uint32_t d = 0; d < D && bad < 8; ++d) {
          const uint32_t code = p.first_code + d;
          const double want = ref::decode(f, code) * kv_scale;
          const bool ok = std::isnan(want) ? std::isnan(o[r * D + d]) : double(o[r * D + d]) == want;
          if (!ok) ++bad;
          EXPECT_TRUE(ok) << (prefix ? "prefix_prefill" : "paged_attention") << ", row " << r << ", code 0x" << std::hex << code
                          << std::dec << " gave " << o[r * D + d] << ", expected " << want << " (scales " << kv_scale << ", path "
                          << path_name(path) << ")";
        }
    }
  }
}

// Small and large keys' scores on the prefill kernel: key 0's K row holds
// one code in every dim and its V 1.0, the other keys' K and V are 0, so row
// i (keys 0..i) outputs e^s / (e^s + i) with s = scale * k_scale * q * D *
// the code's value, set to +-2. Codes subnormal and normal; scale * k_scale
// 2048 and 2^23, with q small, so that a kernel folding a large staging
// factor into scale * k_scale must keep it in f32's range. Scores dropped
// as tiny (a subnormal flushed) would give 1 / (1 + i).
struct Fp8KeyCase {
  const char* name;
  DType cache;
  DType q;
  uint32_t code;
  float k_scale = 1;
  float q_value = 1;   // a power of two
};
void PrintTo(const Fp8KeyCase& c, std::ostream* os) { *os << c.name; }
class Fp8Keys : public VkTest, public ::testing::WithParamInterface<Fp8KeyCase> {};

TEST_P(Fp8Keys, ScoresOfSmallAndLargeKeysOnThePrefillKernel) {
  const Fp8KeyCase& p = GetParam();
  const uint32_t D = 128, L = kRows, bs = 16;
  KvCacheConfig cfg{.num_blocks = L / bs, .block_size = bs, .num_kv_heads = 1, .head_size = D, .dtype = p.cache, .k_scale = p.k_scale};
  PagedKvCache cache(ctx(), cfg);
  cache.fill(0u);
  auto k = cache.read_blocks(KvPart::key, 0, 1), v = cache.read_blocks(KvPart::value, 0, 1);
  for (uint32_t d = 0; d < D; ++d) {
    k[cache.element_in_block(KvPart::key, 0, 0, d)] = static_cast<uint8_t>(p.code);
    v[cache.element_in_block(KvPart::value, 0, 0, d)] = p.cache == DType::fp8_e4m3 ? 0x38 : 0x3C;   // 1.0
  }
  cache.write_blocks(KvPart::key, 0, k);
  cache.write_blocks(KvPart::value, 0, v);
  const ref::Format f = p.cache == DType::fp8_e4m3 ? ref::Format::e4m3 : ref::Format::e5m2;
  const double dot = double(p.q_value) * D * ref::decode(f, p.code) * p.k_scale;   // the score without the scale
  const float scale = float(2.0 / std::fabs(dot));
  const double s = scale * dot;

  const uint32_t qb = p.q == DType::bf16 ? ref::encode(ref::Format::bf16, p.q_value) : ref::encode(ref::Format::f16, p.q_value);
  for (const bool prefix : {false, true}) {
    // prefix_prefill: row i also sees the other 63 cached keys and i + 1 new
    // tokens' keys of 0 (V 0).
    const auto [o, path] = prefix ? run_prefix_prefill_on_prefill_kernel(ctx(), cache, cfg, p.q, qb, 0u, scale)
                                  : run_on_prefill_kernel(ctx(), cache, cfg, p.q, qb, scale, 0);
    const char* op = prefix ? "prefix_prefill" : "paged_attention";
    for (uint32_t r = 0; r < L; ++r) {
      const double want = std::exp(s) / (std::exp(s) + r + (prefix ? L : 0));
      // P is rounded to the matrices' element type (bf16: 2^-9 relative).
      ASSERT_NEAR(o[r * D], want, 0.01 * want) << op << ", row " << r << " (score " << s << ", path " << path_name(path) << ")";
      for (uint32_t d = 1; d < D; ++d) ASSERT_EQ(o[r * D + d], o[r * D]) << op << ", row " << r << ", dim " << d;
    }
  }
}

// bf16 q over an e4m3 cache in prefix_prefill: a q element of 2^100 is
// computed on every path, the row's scores large but finite. (Until the
// prefill kernel ran prefix prefill in two passes, its coopmat2 module staged
// q 2^32 larger there and reported such an element.)
TEST_F(VkTest, PrefixPrefillBf16QOf2To100OverE4m3IsComputed) {
  const uint32_t D = 128, L = kRows, bs = 16, bad_token = 37;
  KvCacheConfig cfg{.num_blocks = L / bs, .block_size = bs, .num_kv_heads = 1, .head_size = D, .dtype = DType::fp8_e4m3};
  PagedKvCache cache(ctx(), cfg);
  cache.fill(0x28282828u);   // 0.25
  std::vector<uint16_t> qv(L * D, 0x3F80);   // 1.0
  qv[bad_token * D + 3] = 0x7180;            // 2^100
  PrefixOnPrefillKernel run(ctx(), cfg, DType::bf16, qv, 0x3E80u, 0x3F80u, 0.0625f);   // new K 0.25, V 1.0
  const auto o = run.run(cache);
  for (uint32_t d = 0; d < D; ++d) ASSERT_TRUE(std::isfinite(o[bad_token * D + d])) << "dim " << d << " (path " << path_name(run.path()) << ")";
}

INSTANTIATE_TEST_SUITE_P(Codes, Fp8Keys,
                         ::testing::Values(Fp8KeyCase{"e4m3_min_subnormal_q_bf16", DType::fp8_e4m3, DType::bf16, 0x01},
                                           Fp8KeyCase{"e4m3_max_subnormal_q_bf16", DType::fp8_e4m3, DType::bf16, 0x07},
                                           Fp8KeyCase{"e4m3_negative_subnormal_q_bf16", DType::fp8_e4m3, DType::bf16, 0x83},
                                           Fp8KeyCase{"e4m3_min_normal_q_bf16", DType::fp8_e4m3, DType::bf16, 0x08},
                                           Fp8KeyCase{"e4m3_max_q_bf16", DType::fp8_e4m3, DType::bf16, 0x7E},
                                           Fp8KeyCase{"e4m3_subnormal_large_scales_q_bf16", DType::fp8_e4m3, DType::bf16, 0x01, 64.0f, 0.00390625f},
                                           Fp8KeyCase{"e4m3_subnormal_huge_scales_q_bf16", DType::fp8_e4m3, DType::bf16, 0x01, 4096.0f, 0x1p-20f},
                                           Fp8KeyCase{"e4m3_min_subnormal_q_f16", DType::fp8_e4m3, DType::f16, 0x01},
                                           Fp8KeyCase{"e5m2_min_subnormal_q_bf16", DType::fp8_e5m2, DType::bf16, 0x01},
                                           Fp8KeyCase{"e5m2_min_subnormal_q_f16", DType::fp8_e5m2, DType::f16, 0x01}),
                         [](const auto& info) { return std::string(info.param.name); });

INSTANTIATE_TEST_SUITE_P(Codes, Fp8Decode,
                         ::testing::Values(Fp8DecodeCase{"e4m3_q_f16", DType::fp8_e4m3, DType::f16, KvLayout::nhd},
                                           Fp8DecodeCase{"e5m2_q_f16", DType::fp8_e5m2, DType::f16, KvLayout::nhd},
                                           Fp8DecodeCase{"e4m3_q_bf16", DType::fp8_e4m3, DType::bf16, KvLayout::nhd},
                                           Fp8DecodeCase{"e5m2_q_bf16", DType::fp8_e5m2, DType::bf16, KvLayout::nhd},
                                           Fp8DecodeCase{"e4m3_q_f16_split", DType::fp8_e4m3, DType::f16, KvLayout::split},
                                           Fp8DecodeCase{"e5m2_q_f16_split", DType::fp8_e5m2, DType::f16, KvLayout::split},
                                           Fp8DecodeCase{"e4m3_q_f16_d128_low", DType::fp8_e4m3, DType::f16, KvLayout::nhd, 128, 0},
                                           Fp8DecodeCase{"e4m3_q_f16_d128_high", DType::fp8_e4m3, DType::f16, KvLayout::nhd, 128, 128},
                                           Fp8DecodeCase{"e5m2_q_f16_d128_low", DType::fp8_e5m2, DType::f16, KvLayout::nhd, 128, 0},
                                           Fp8DecodeCase{"e5m2_q_f16_d128_high", DType::fp8_e5m2, DType::f16, KvLayout::nhd, 128, 128},
                                           Fp8DecodeCase{"e4m3_q_bf16_d128_low", DType::fp8_e4m3, DType::bf16, KvLayout::nhd, 128, 0},
                                           Fp8DecodeCase{"e4m3_q_bf16_d128_high", DType::fp8_e4m3, DType::bf16, KvLayout::nhd, 128, 128},
                                           Fp8DecodeCase{"e5m2_q_bf16_d128_low", DType::fp8_e5m2, DType::bf16, KvLayout::nhd, 128, 0},
                                           Fp8DecodeCase{"e5m2_q_bf16_d128_high", DType::fp8_e5m2, DType::bf16, KvLayout::nhd, 128, 128}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace vkattn::test
