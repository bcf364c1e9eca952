// The float64 paged-attention reference (vkattn_ref/attention_ref.hpp):
// hand-computed cases, layout/dtype/block-table invariance, agreement with a
// dense implementation written independently (full score matrix, log-add
// softmax, K/V read from dense arrays instead of the cache), empty rows,
// fp8 scales, the segmented decomposition, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <vkattn_ref/attention_ref.hpp>
#include <vkattn_ref/random.hpp>

namespace vkattn::ref {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kLn2 = std::log(2.0);

bool fp8(ElemType t) { return t == ElemType::fp8_e4m3 || t == ElemType::fp8_e5m2; }

struct SeqSpec {
  int32_t query_len, seq_len;
};

// A problem plus the dense K/V it was built from: k[s] and v[s] are
// [seq_len, num_kv_heads, head_size] effective values (fp8: stored * scale).
struct Built {
  PagedAttentionProblem p;
  std::vector<std::vector<double>> k, v;
};

struct BuildOptions {
  uint32_t num_q_heads = 1, num_kv_heads = 1, head_size = 8, block_size = 4;
  ElemType dtype = ElemType::f16;
  ElemType round_to_type = ElemType::f16;   // what the K/V values are rounded to before storing
  KvLayoutRef layout = KvLayoutRef::nhd;
  uint64_t value_seed = 1, block_seed = 1;
  uint32_t extra_blocks = 3;
  double k_scale = 1, v_scale = 1, amplitude = 1.5;
};

void store(std::vector<uint8_t>& cache, ElemType t, uint64_t elem, double value) {
  const std::vector<uint8_t> bytes = encode_values(t, {value});
  std::memcpy(&cache[elem * bytes.size()], bytes.data(), bytes.size());
}

// Values come from value_seed alone (not from the layout, dtype or block
// placement), so problems that differ only in those hold the same numbers.
Built build(const std::vector<SeqSpec>& seqs, const BuildOptions& o) {
  Built b;
  PagedAttentionProblem& p = b.p;
  Rng rng(o.value_seed);
  p.num_q_heads = o.num_q_heads;
  p.num_kv_heads = o.num_kv_heads;
  p.head_size = o.head_size;
  p.query_start_loc = {0};
  uint32_t blocks_needed = 0, max_blocks = 1;
  for (const SeqSpec& s : seqs) {
    p.query_start_loc.push_back(p.query_start_loc.back() + s.query_len);
    p.seq_lens.push_back(s.seq_len);
    uint32_t nb = (uint32_t(s.seq_len) + o.block_size - 1) / o.block_size;
    blocks_needed += nb;
    max_blocks = std::max(max_blocks, nb + 1);
  }
  p.num_tokens = uint32_t(p.query_start_loc.back());
  p.q = round_to(ElemType::f16, random_values(rng, uint64_t(p.num_tokens) * o.num_q_heads * o.head_size, 1.0));

  p.cache = {.num_blocks = blocks_needed + o.extra_blocks, .block_size = o.block_size, .num_kv_heads = o.num_kv_heads,
             .head_size = o.head_size, .dtype = o.dtype, .layout = o.layout};
  p.k_scale = o.k_scale;
  p.v_scale = o.v_scale;
  const double ks = fp8(o.dtype) ? o.k_scale : 1.0, vs = fp8(o.dtype) ? o.v_scale : 1.0;
  // Every slot not written below holds NaN: reading one poisons the output.
  const uint64_t elems = uint64_t(p.cache.num_blocks) * p.cache.block_elems();
  p.k_cache = encode_values(o.dtype, std::vector<double>(elems, std::nan("")));
  p.v_cache = p.k_cache;

  Rng block_rng(o.block_seed);
  const std::vector<uint32_t> perm = random_permutation(block_rng, p.cache.num_blocks);
  p.max_blocks_per_seq = max_blocks;
  p.block_table.assign(seqs.size() * max_blocks, -1);   // unused entries: never read
  uint32_t next = 0;
  const uint32_t H = o.num_kv_heads, D = o.head_size;
  for (std::size_t s = 0; s < seqs.size(); ++s) {
    const int32_t L = seqs[s].seq_len;
    for (int32_t blk = 0; blk * int32_t(o.block_size) < L; ++blk) p.block_table[s * max_blocks + blk] = perm[next++];
    std::vector<double> ks_stored = round_to(o.round_to_type, random_values(rng, uint64_t(L) * H * D, o.amplitude));
    std::vector<double> vs_stored = round_to(o.round_to_type, random_values(rng, uint64_t(L) * H * D, o.amplitude));
    ks_stored = round_to(o.dtype, ks_stored);   // what the cache actually holds
    vs_stored = round_to(o.dtype, vs_stored);
    b.k.emplace_back(ks_stored.size());
    b.v.emplace_back(vs_stored.size());
    for (int32_t pos = 0; pos < L; ++pos) {
      const uint32_t block = uint32_t(p.block_table[s * max_blocks + pos / o.block_size]);
      const uint32_t slot = uint32_t(pos) % o.block_size;
      for (uint32_t h = 0; h < H; ++h)
        for (uint32_t d = 0; d < D; ++d) {
          const uint64_t i = (uint64_t(pos) * H + h) * D + d;
          store(p.k_cache, o.dtype, kv_element_index(p.cache, false, block, slot, h, d), ks_stored[i]);
          store(p.v_cache, o.dtype, kv_element_index(p.cache, true, block, slot, h, d), vs_stored[i]);
          b.k.back()[i] = ks_stored[i] * ks;
          b.v.back()[i] = vs_stored[i] * vs;
        }
    }
  }
  p.scale = 1.0 / std::sqrt(double(D));
  return b;
}

double log_add(double a, double b) {
  if (a == -kInf) return b;
  if (b == -kInf) return a;
  return std::max(a, b) + std::log1p(std::exp(-std::fabs(a - b)));
}

// Dense, independent version: score matrix per (sequence, head), then a
// log-add softmax. Reads K/V from the dense arrays, never from the cache.
PagedAttentionResult naive(const Built& b) {
  const PagedAttentionProblem& p = b.p;
  const uint32_t Hq = p.num_q_heads, Hkv = p.num_kv_heads, D = p.head_size;
  PagedAttentionResult r;
  r.out.assign(uint64_t(p.num_tokens) * Hq * D, 0.0);
  r.lse.assign(uint64_t(p.num_tokens) * Hq, -kInf);
  for (std::size_t s = 0; s < p.seq_lens.size(); ++s) {
    const int32_t first = p.query_start_loc[s], ql = p.query_start_loc[s + 1] - first;
    const int32_t L = p.seq_lens[s], ctx = L - ql;
    for (uint32_t h = 0; h < Hq; ++h) {
      const uint32_t kvh = h * Hkv / Hq;
      std::vector<std::vector<double>> S(ql, std::vector<double>(L, -kInf));
      for (int32_t i = 0; i < ql; ++i)
        for (int32_t k = 0; k < L; ++k) {
          const int32_t qpos = ctx + i;
          if (k > qpos) continue;
          if (p.sliding_window > 0 && qpos - k >= p.sliding_window) continue;
          double dot = 0;
          for (uint32_t d = 0; d < D; ++d)
            dot += p.q[((uint64_t(first) + i) * Hq + h) * D + d] * b.k[s][(uint64_t(k) * Hkv + kvh) * D + d];
          double x = dot * p.scale;
          if (p.softcap != 0) x = std::tanh(x / p.softcap) * p.softcap;
          if (!p.alibi_slopes.empty()) x += p.alibi_slopes[h] * (k - ctx);
          if (!p.qq_bias.empty() && k >= ctx && k - ctx < int32_t(p.qq_bias_stride))
            x += p.qq_bias[uint64_t(i) * p.qq_bias_stride + (k - ctx)];
          S[i][k] = x;
        }
      for (int32_t i = 0; i < ql; ++i) {
        double lse = p.sinks.empty() ? -kInf : p.sinks[h];
        for (int32_t k = 0; k < L; ++k) lse = log_add(lse, S[i][k]);
        const uint64_t row = (uint64_t(first) + i) * Hq + h;
        r.lse[row] = lse;
        if (lse == -kInf) continue;
        for (int32_t k = 0; k < L; ++k) {
          if (S[i][k] == -kInf) continue;
          const double w = std::exp(S[i][k] - lse);
          for (uint32_t d = 0; d < D; ++d) r.out[row * D + d] += w * b.v[s][(uint64_t(k) * Hkv + kvh) * D + d];
        }
      }
    }
  }
  return r;
}

void expect_near(const PagedAttentionResult& got, const PagedAttentionResult& want, double tol, const std::string& what) {
  ASSERT_EQ(got.out.size(), want.out.size()) << what;
  ASSERT_EQ(got.lse.size(), want.lse.size()) << what;
  for (std::size_t i = 0; i < want.out.size(); ++i)
    ASSERT_NEAR(got.out[i], want.out[i], tol * (1 + std::fabs(want.out[i]))) << what << " out[" << i << "]";
  for (std::size_t i = 0; i < want.lse.size(); ++i) {
    if (want.lse[i] == -kInf) {
      ASSERT_EQ(got.lse[i], -kInf) << what << " lse[" << i << "]";
    } else {
      ASSERT_NEAR(got.lse[i], want.lse[i], tol * (1 + std::fabs(want.lse[i]))) << what << " lse[" << i << "]";
    }
  }
}

void expect_identical(const PagedAttentionResult& got, const PagedAttentionResult& want, const std::string& what) {
  ASSERT_EQ(got.out.size(), want.out.size()) << what;
  for (std::size_t i = 0; i < want.out.size(); ++i) ASSERT_EQ(got.out[i], want.out[i]) << what << " out[" << i << "]";
  for (std::size_t i = 0; i < want.lse.size(); ++i) ASSERT_EQ(got.lse[i], want.lse[i]) << what << " lse[" << i << "]";
}

// ---- Hand-computed cases ----------------------------------------------------

// 1 sequence, 1 head, head_size 2, keys (1,0), (0,1), (1,1), q = (1,2): the
// dot products are 1, 2, 3; with scale ln 2 the weights are 2:4:8.
Built hand_decode(ElemType dtype = ElemType::f16, KvLayoutRef layout = KvLayoutRef::nhd) {
  BuildOptions o;
  o.head_size = 2;
  o.block_size = 2;
  o.dtype = dtype;
  o.layout = layout;
  Built b = build({{1, 3}}, o);
  b.p.q = {1, 2};
  const double K[3][2] = {{1, 0}, {0, 1}, {1, 1}}, V[3][2] = {{14, 0}, {0, 7}, {7, 14}};
  for (int pos = 0; pos < 3; ++pos)
    for (int d = 0; d < 2; ++d) {
      const uint32_t block = uint32_t(b.p.block_table[pos / 2]);
      store(b.p.k_cache, dtype, kv_element_index(b.p.cache, false, block, pos % 2, 0, d), K[pos][d]);
      store(b.p.v_cache, dtype, kv_element_index(b.p.cache, true, block, pos % 2, 0, d), V[pos][d]);
    }
  b.p.scale = kLn2;
  return b;
}

TEST(AttentionRef, HandComputedDecode) {
  Built b = hand_decode();
  auto r = paged_attention(b.p);
  ASSERT_EQ(r.out.size(), 2u);
  EXPECT_NEAR(r.out[0], 6.0, 1e-13);   // (2*14 + 8*7) / 14
  EXPECT_NEAR(r.out[1], 10.0, 1e-13);  // (4*7 + 8*14) / 14
  EXPECT_NEAR(r.lse[0], std::log(14.0), 1e-13);

  b.p.sinks = {kLn2};                  // one more weight of 2 in the denominator
  r = paged_attention(b.p);
  EXPECT_NEAR(r.out[0], 84.0 / 16, 1e-13);
  EXPECT_NEAR(r.out[1], 140.0 / 16, 1e-13);
  EXPECT_NEAR(r.lse[0], std::log(16.0), 1e-13);
}

TEST(AttentionRef, HandComputedAlibiSoftcapWindow) {
  Built b = hand_decode();
  // ALiBi slope ln2 at q_pos 2: bias ln2 * (k - 2) -> logits ln2 * (-1, 1, 3), weights 0.5:2:8.
  b.p.alibi_slopes = {kLn2};
  auto r = paged_attention(b.p);
  EXPECT_NEAR(r.out[0], 63.0 / 10.5, 1e-13);
  EXPECT_NEAR(r.out[1], 126.0 / 10.5, 1e-13);
  EXPECT_NEAR(r.lse[0], std::log(10.5), 1e-13);

  // Softcap acts on the scaled dot product, before ALiBi.
  b.p.softcap = 1.5;
  double w[3], sum = 0;
  for (int k = 0; k < 3; ++k) {
    w[k] = std::exp(1.5 * std::tanh(kLn2 * (k + 1) / 1.5) + kLn2 * (k - 2));
    sum += w[k];
  }
  r = paged_attention(b.p);
  EXPECT_NEAR(r.out[0], (w[0] * 14 + w[2] * 7) / sum, 1e-13);
  EXPECT_NEAR(r.out[1], (w[1] * 7 + w[2] * 14) / sum, 1e-13);
  EXPECT_NEAR(r.lse[0], std::log(sum), 1e-13);

  // Window 2 at q_pos 2 keeps keys 1 and 2 (weights 4:8).
  b.p.alibi_slopes.clear();
  b.p.softcap = 0;
  b.p.sliding_window = 2;
  r = paged_attention(b.p);
  EXPECT_NEAR(r.out[0], 56.0 / 12, 1e-13);
  EXPECT_NEAR(r.out[1], 140.0 / 12, 1e-13);
  b.p.sliding_window = 1;   // only the token itself
  r = paged_attention(b.p);
  EXPECT_NEAR(r.out[0], 7.0, 1e-13);
  EXPECT_NEAR(r.out[1], 14.0, 1e-13);
  EXPECT_NEAR(r.lse[0], 3 * kLn2, 1e-13);
}

// seq_len 4, 2 new tokens (ctx 2), q = 0 so only qq_bias shapes the weights;
// V[k] = (k + 1, 10 (k + 1)).
Built hand_prefill() {
  BuildOptions o;
  o.head_size = 2;
  o.block_size = 3;
  Built b = build({{2, 4}}, o);
  b.p.q = {0, 0, 0, 0};
  for (int pos = 0; pos < 4; ++pos) {
    const uint32_t block = uint32_t(b.p.block_table[pos / 3]);
    for (int d = 0; d < 2; ++d) {
      store(b.p.k_cache, ElemType::f16, kv_element_index(b.p.cache, false, block, pos % 3, 0, d), 0.5);
      store(b.p.v_cache, ElemType::f16, kv_element_index(b.p.cache, true, block, pos % 3, 0, d), (pos + 1) * (d ? 10 : 1));
    }
  }
  return b;
}

TEST(AttentionRef, HandComputedCausalAndQqBias) {
  Built b = hand_prefill();
  // No bias: token 0 (q_pos 2) averages keys 0..2, token 1 keys 0..3.
  auto r = paged_attention(b.p);
  EXPECT_NEAR(r.out[0], 2.0, 1e-13);
  EXPECT_NEAR(r.out[1], 20.0, 1e-13);
  EXPECT_NEAR(r.out[2], 2.5, 1e-13);
  EXPECT_NEAR(r.lse[0], std::log(3.0), 1e-13);
  EXPECT_NEAR(r.lse[1], std::log(4.0), 1e-13);

  // bias[query i][new key j]: key 2 is new key 0, key 3 new key 1.
  b.p.qq_bias = {std::log(4.0), 100.0,   // row 0: [0][1] is a future key, masked
                 kLn2, std::log(3.0)};
  b.p.qq_bias_stride = 2;
  r = paged_attention(b.p);
  EXPECT_NEAR(r.out[0], (1 + 2 + 4 * 3) / 6.0, 1e-13);           // weights 1:1:4
  EXPECT_NEAR(r.out[2], (1 + 2 + 2 * 3 + 3 * 4) / 7.0, 1e-13);   // weights 1:1:2:3
  EXPECT_NEAR(r.lse[1], std::log(7.0), 1e-13);

  // Stride 1: only new key 0 has a bias column; key 3 gets none (seed 001 masks
  // key_rel_pos >= qq_bias_stride_0).
  b.p.qq_bias = {std::log(4.0), kLn2};
  b.p.qq_bias_stride = 1;
  r = paged_attention(b.p);
  EXPECT_NEAR(r.out[2], (1 + 2 + 2 * 3 + 4) / 5.0, 1e-13);       // weights 1:1:2:1

  // A -inf bias masks: token 0 then sees only keys 0 and 1.
  b.p.qq_bias = {-kInf, -kInf};
  r = paged_attention(b.p);
  EXPECT_NEAR(r.out[0], 1.5, 1e-13);
  EXPECT_NEAR(r.lse[0], kLn2, 1e-13);
}

TEST(AttentionRef, GqaHeadMapping) {
  BuildOptions o;
  o.num_q_heads = 6;
  o.num_kv_heads = 2;
  o.head_size = 4;
  Built b = build({{2, 5}}, o);
  // V = -3 in kv head 0 and 5 in kv head 1: q heads 0-2 must see -3, 3-5 see 5.
  for (uint32_t blk = 0; blk < b.p.cache.num_blocks; ++blk)
    for (uint32_t t = 0; t < o.block_size; ++t)
      for (uint32_t d = 0; d < 4; ++d) {
        store(b.p.v_cache, o.dtype, kv_element_index(b.p.cache, true, blk, t, 0, d), -3);
        store(b.p.v_cache, o.dtype, kv_element_index(b.p.cache, true, blk, t, 1, d), 5);
      }
  auto r = paged_attention(b.p);
  for (uint32_t tok = 0; tok < 2; ++tok)
    for (uint32_t h = 0; h < 6; ++h)
      for (uint32_t d = 0; d < 4; ++d) EXPECT_NEAR(r.out[(tok * 6 + h) * 4 + d], h < 3 ? -3.0 : 5.0, 1e-13);
}

// ---- Invariance ---------------------------------------------------------------

TEST(AttentionRef, LayoutsDtypesAndBlockPlacementGiveIdenticalOutput) {
  const std::vector<SeqSpec> seqs = {{3, 9}, {1, 17}, {4, 4}, {0, 5}, {2, 33}};
  BuildOptions o;
  o.num_q_heads = 4;
  o.num_kv_heads = 2;
  o.head_size = 16;
  o.block_size = 5;
  o.value_seed = 42;
  auto with_features = [](Built b) {
    b.p.sliding_window = 7;
    b.p.alibi_slopes = {0.25, -0.125, 0.5, 0.0625};
    b.p.softcap = 4;
    b.p.sinks = {0.3, -1, 2, -kInf};
    b.p.qq_bias.assign(4 * 4, 0.0);
    for (std::size_t i = 0; i < b.p.qq_bias.size(); ++i) b.p.qq_bias[i] = 0.1 * double(i % 7) - 0.3;
    b.p.qq_bias_stride = 4;
    return b;
  };
  const Built base = with_features(build(seqs, o));
  const auto want = paged_attention(base.p);
  for (KvLayoutRef layout : {KvLayoutRef::nhd, KvLayoutRef::hnd, KvLayoutRef::split})
    for (uint64_t block_seed : {1, 2, 3}) {
      BuildOptions v = o;
      v.layout = layout;
      v.block_seed = block_seed;
      const std::string what = "layout " + std::to_string(int(layout)) + " block_seed " + std::to_string(block_seed);
      const Built b = with_features(build(seqs, v));
      expect_identical(paged_attention(b.p), want, what);
      // The same f16-rounded values in an f32 cache (which holds them exactly).
      v.dtype = ElemType::f32;
      expect_identical(paged_attention(with_features(build(seqs, v)).p), want, what + " f32");
    }
  // Sanity: a different block placement without the matching cache contents differs.
  Built moved = base;
  std::swap(moved.p.block_table[0], moved.p.block_table[1]);
  EXPECT_NE(paged_attention(moved.p).out, want.out);
}

// ---- Against the dense implementation -----------------------------------------

TEST(AttentionRef, AgreesWithDenseOnRandomProblems) {
  Rng rng(2024);
  const ElemType dtypes[] = {ElemType::f16, ElemType::bf16, ElemType::f32, ElemType::fp8_e4m3, ElemType::fp8_e5m2};
  const uint32_t heads[][2] = {{4, 2}, {6, 3}, {8, 1}, {2, 2}, {3, 1}};
  for (int iter = 0; iter < 30; ++iter) {
    BuildOptions o;
    o.num_q_heads = heads[iter % 5][0];
    o.num_kv_heads = heads[iter % 5][1];
    o.head_size = std::vector<uint32_t>{16, 32, 48}[rng.below(3)];
    o.block_size = std::vector<uint32_t>{1, 3, 8, 16}[rng.below(4)];
    o.dtype = dtypes[iter % 5];
    o.round_to_type = o.dtype == ElemType::f32 ? ElemType::f32 : ElemType::f16;
    o.layout = KvLayoutRef(rng.below(3));
    o.value_seed = 100 + iter;
    o.block_seed = 7 + iter;
    o.k_scale = rng.uniform(0.2, 2.0);
    o.v_scale = rng.uniform(0.2, 2.0);
    o.amplitude = fp8(o.dtype) ? 3.0 : 1.5;
    std::vector<SeqSpec> seqs;
    const uint32_t n = 1 + rng.below(4);
    int32_t max_ql = 0;
    for (uint32_t s = 0; s < n; ++s) {
      const uint32_t kind = rng.below(5);
      int32_t ql = kind == 0 ? 1 : int32_t(rng.below(9));
      int32_t L = ql + int32_t(rng.below(40));
      if (kind == 4) L = 0;                 // padding sequence
      if (kind == 3) L = ql;                // pure prefill
      seqs.push_back({ql, L});
      max_ql = std::max(max_ql, ql);
    }
    Built b = build(seqs, o);
    PagedAttentionProblem& p = b.p;
    p.scale = rng.uniform(0.5, 3.0) / std::sqrt(double(o.head_size));
    if (rng.below(2)) p.sliding_window = 1 + int32_t(rng.below(20));
    if (rng.below(2)) p.alibi_slopes = random_values(rng, o.num_q_heads, 0.5);
    if (rng.below(2)) p.softcap = rng.uniform(2.0, 30.0);
    if (rng.below(2)) {
      p.sinks = random_values(rng, o.num_q_heads, 3.0);
      if (rng.below(2)) p.sinks[0] = -kInf;
    }
    if (rng.below(2) && max_ql > 0) {
      p.qq_bias_stride = uint32_t(max_ql) + rng.below(3) - (max_ql > 1 ? 1 : 0);
      p.qq_bias = random_values(rng, uint64_t(max_ql) * p.qq_bias_stride, 2.0);
      for (double& x : p.qq_bias)
        if (rng.below(8) == 0) x = -kInf;
    }
    const std::string what = "iteration " + std::to_string(iter);
    const auto got = paged_attention(p);
    for (double x : got.out) ASSERT_FALSE(std::isnan(x)) << what;
    expect_near(got, naive(b), 1e-12, what);
  }
}

// ---- Empty rows, fp8 ----------------------------------------------------------

TEST(AttentionRef, LengthZeroSequenceGivesZeros) {
  BuildOptions o;
  o.num_q_heads = 2;
  o.head_size = 8;
  Built b = build({{1, 6}, {2, 0}, {3, 3}}, o);
  auto r = paged_attention(b.p);
  for (uint32_t tok = 1; tok < 3; ++tok)
    for (uint32_t h = 0; h < 2; ++h) {
      EXPECT_EQ(r.lse[tok * 2 + h], -kInf);
      for (uint32_t d = 0; d < 8; ++d) EXPECT_EQ(r.out[(tok * 2 + h) * 8 + d], 0.0);
    }
  for (uint32_t tok : {0u, 3u, 5u}) EXPECT_TRUE(std::isfinite(r.lse[tok * 2]));
  expect_near(r, naive(b), 1e-12, "with padding sequence");

  // With sinks the empty rows still output 0, and lse is the sink itself.
  b.p.sinks = {0.75, -kInf};
  r = paged_attention(b.p);
  for (uint32_t tok = 1; tok < 3; ++tok) {
    EXPECT_EQ(r.lse[tok * 2], 0.75);
    EXPECT_EQ(r.lse[tok * 2 + 1], -kInf);
    for (uint32_t d = 0; d < 16; ++d) EXPECT_EQ(r.out[tok * 16 + d], 0.0);
  }
  expect_near(r, naive(b), 1e-12, "with padding sequence and sinks");

  // A row whose keys are all masked by qq_bias = -inf is empty too.
  b.p.sinks.clear();
  b.p.qq_bias.assign(3 * 3, -kInf);
  b.p.qq_bias_stride = 3;
  r = paged_attention(b.p);
  for (uint32_t h = 0; h < 2; ++h) {   // token 3 = first token of sequence 2: only key 0, a new token
    EXPECT_EQ(r.lse[3 * 2 + h], -kInf);
    for (uint32_t d = 0; d < 8; ++d) EXPECT_EQ(r.out[(3 * 2 + h) * 8 + d], 0.0);
  }
}

TEST(AttentionRef, Fp8CachesDecodeWithScale) {
  for (ElemType t : {ElemType::fp8_e4m3, ElemType::fp8_e5m2, ElemType::f16}) {
    BuildOptions o;
    o.head_size = 16;   // split layout needs head_size % 16 == 0 for fp8
    o.block_size = 2;
    o.dtype = t;
    o.layout = KvLayoutRef::split;
    Built b = build({{1, 1}}, o);
    b.p.q.assign(16, 0.0);
    b.p.q[0] = 1;
    b.p.q[1] = 1;
    b.p.scale = 1;
    b.p.k_scale = 0.37;
    b.p.v_scale = 1.7;
    const uint32_t block = uint32_t(b.p.block_table[0]);
    for (uint32_t d = 0; d < 16; ++d) {
      store(b.p.k_cache, t, kv_element_index(b.p.cache, false, block, 0, 0, d), d == 0 ? 1.5 : d == 1 ? -2.0 : 0.0);
      store(b.p.v_cache, t, kv_element_index(b.p.cache, true, block, 0, 0, d), 0.25 * (d + 1));
    }
    const double ks = fp8(t) ? 0.37 : 1.0, vs = fp8(t) ? 1.7 : 1.0;   // scales apply to fp8 only
    auto r = paged_attention(b.p);
    EXPECT_NEAR(r.lse[0], -0.5 * ks, 1e-15) << int(t);   // one key: lse is its logit
    for (uint32_t d = 0; d < 16; ++d)   // (e5m2 rounds 2.25 etc.: compare with the stored value)
      EXPECT_NEAR(r.out[d], round_to(t, {0.25 * (d + 1)})[0] * vs, 1e-14) << int(t);
  }
}

// ---- Segmented decomposition --------------------------------------------------

TEST(AttentionRef, SegmentsPartitionTheKeysAndCombineToTheResult) {
  for (int64_t L : {0, 1, 5, 16, 17, 100})
    for (uint32_t n : {1u, 2u, 3u, 7u, 16u})
      for (uint32_t tile : {1u, 4u, 16u}) {
        int64_t expect_begin = 0;
        for (uint32_t j = 0; j < n; ++j) {
          KeyRange kr = segment_key_range(L, n, tile, j);
          ASSERT_EQ(kr.begin, expect_begin);
          ASSERT_LE(kr.begin, kr.end);
          if (kr.end < L) {
            ASSERT_EQ(kr.end % tile, 0);   // segments end on tile boundaries
          }
          expect_begin = kr.end;
        }
        ASSERT_EQ(expect_begin, L);
      }
  BuildOptions o;
  o.num_q_heads = 4;
  o.num_kv_heads = 2;
  o.head_size = 16;
  o.block_size = 8;
  o.value_seed = 9;
  Built b = build({{1, 40}, {5, 23}, {2, 0}, {3, 3}, {1, 70}}, o);
  b.p.sinks = {1.0, -0.5, -kInf, 3.0};
  b.p.sliding_window = 12;   // leaves whole segments without visible keys
  b.p.alibi_slopes = {0.1, 0.2, 0.3, 0.4};
  const auto want = paged_attention(b.p);
  for (uint32_t n : {1u, 2u, 4u, 9u})
    for (uint32_t tile : {1u, 4u, 16u}) {
      auto segs = paged_attention_segments(b.p, n, tile);
      ASSERT_EQ(segs.size(), n);
      expect_near(combine_segments(segs), want, 1e-13, "segments " + std::to_string(n) + " tile " + std::to_string(tile));
      // The sink lives in segment 0 only: later segments of an empty row are empty.
      for (uint32_t j = 1; j < n; ++j)
        for (uint32_t h = 0; h < 4; ++h) ASSERT_EQ(segs[j].sum[6 * 4 + h], 0.0);
    }
}

// A problem large enough that paged_attention splits its tokens among threads
// (attention_ref.cpp's for_token_ranges, where the CPU has more than one
// core): every token's rows, empty sequences between them included, match
// the one-thread computation of the segments' form.
TEST(AttentionRef, LargeProblemsSplitAmongThreadsGiveTheSameRows) {
  BuildOptions o;
  o.num_q_heads = 8;
  o.num_kv_heads = 2;
  o.head_size = 64;
  o.block_size = 16;
  o.value_seed = 31;
  std::vector<SeqSpec> seqs;
  for (int32_t s = 0; s < 40; ++s) seqs.push_back({s % 7 == 3 ? 0 : 1 + s % 4, 1500 + 40 * s});   // 1.0e8 key-dims
  Built b = build(seqs, o);
  b.p.sinks = {1.0, -0.5, 0.25, 3.0, -1.0, 0.0, 2.0, -2.0};
  const auto want = combine_segments(paged_attention_segments(b.p, 1, 16));
  expect_near(paged_attention(b.p), want, 1e-13, "threaded");
}

// ---- Bad input ----------------------------------------------------------------

TEST(AttentionRef, InvalidInputThrows) {
  BuildOptions o;
  o.num_q_heads = 4;
  o.num_kv_heads = 2;
  o.head_size = 8;
  const Built good = build({{2, 5}, {1, 9}}, o);
  EXPECT_NO_THROW(paged_attention(good.p));
  auto bad = [&](auto mutate, const char* what) {
    PagedAttentionProblem p = good.p;
    mutate(p);
    EXPECT_THROW(paged_attention(p), std::invalid_argument) << what;
  };
  bad([](auto& p) { p.num_kv_heads = 3; p.cache.num_kv_heads = 3; }, "heads not a multiple");
  bad([](auto& p) { p.num_kv_heads = 0; }, "zero kv heads");
  bad([](auto& p) { p.q.pop_back(); }, "q size");
  bad([](auto& p) { p.cache.head_size = 16; }, "cache head size");
  bad([](auto& p) { p.k_cache.pop_back(); }, "k cache size");
  bad([](auto& p) { p.v_cache.push_back(0); }, "v cache size");
  bad([](auto& p) { p.cache.block_size = 0; }, "block size 0");
  bad([](auto& p) { p.query_start_loc.pop_back(); }, "query_start_loc size");
  bad([](auto& p) { p.query_start_loc[0] = 1; }, "query_start_loc start");
  bad([](auto& p) { p.query_start_loc[1] = 4; }, "query_start_loc decreasing");
  bad([](auto& p) { p.num_tokens = 2; p.q.resize(2 * 4 * 8); }, "query_start_loc end");
  bad([](auto& p) { p.seq_lens[0] = 1; }, "seq_len < query_len");
  bad([](auto& p) { p.seq_lens[0] = -1; }, "negative seq_len");
  bad([](auto& p) { p.seq_lens[1] = 1000; }, "too many blocks");
  bad([](auto& p) { p.block_table.pop_back(); }, "block_table size");
  bad([](auto& p) { p.block_table[0] = -1; }, "used block negative");
  bad([](auto& p) { p.block_table[0] = int32_t(p.cache.num_blocks); }, "used block out of range");
  bad([](auto& p) { p.sliding_window = -1; }, "window");
  bad([](auto& p) { p.softcap = -1; }, "softcap");
  bad([](auto& p) { p.scale = std::nan(""); }, "scale");
  bad([](auto& p) { p.alibi_slopes = {1, 2}; }, "alibi size");
  bad([](auto& p) { p.sinks = {1, 2, 3}; }, "sinks size");
  bad([](auto& p) { p.sinks = {1, 2, 3, std::nan("")}; }, "sinks NaN");
  bad([](auto& p) { p.qq_bias = {1, 2, 3, 4}; p.qq_bias_stride = 0; }, "qq stride 0");
  bad([](auto& p) { p.qq_bias = {1, 2, 3}; p.qq_bias_stride = 2; }, "qq partial row");
  bad([](auto& p) { p.qq_bias = {1, 2}; p.qq_bias_stride = 2; }, "qq too few rows");
  bad([](auto& p) { p.qq_bias = {1, 2, kInf, 4}; p.qq_bias_stride = 2; }, "qq +inf");
  bad([](auto& p) { p.cache.layout = KvLayoutRef::split; p.head_size = p.cache.head_size = 4;
                    p.q.resize(p.num_tokens * 4 * 4); }, "split needs head_size % x");
  // Unused block-table entries are never read: garbage there is fine.
  PagedAttentionProblem p = good.p;
  p.block_table.back() = -7;
  EXPECT_NO_THROW(paged_attention(p));
  EXPECT_THROW(paged_attention_segments(good.p, 0, 16), std::invalid_argument);
}

}  // namespace
}  // namespace vkattn::ref
