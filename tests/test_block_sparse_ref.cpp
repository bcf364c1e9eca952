// The float64 block-sparse reference and its host block-mask builder
// (vkattn_ref/block_sparse_ref.hpp), FlexAttention's semantics (seed 004),
// before any kernel uses them: for every built-in kind of mask the issue
// names, the block-sparse attention over the mask build_block_mask makes
// equals the same attention with the predicate asked for every pair; full
// blocks skip the mask, listed blocks count as listed, empty rows give 0 and
// -inf; bad masks are refused by name. Host only.
#include <gtest/gtest.h>
#include <vkattn_ref/block_sparse_ref.hpp>
#include <vkattn_ref/random.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace vkattn::ref {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// B=2 (K/V for both, or broadcast), Hq 4 / Hkv 2 (or 5 / 1), Dqk 24 and Dv
// 16, q_len 150 and kv_len 190: neither a multiple of the blocks.
BlockSparseProblem problem(uint64_t seed, uint32_t q_heads = 4, uint32_t kv_heads = 2, uint32_t kv_batch = 2) {
  BlockSparseProblem p;
  p.batch = 2;
  p.q_heads = q_heads;
  p.kv_batch = kv_batch;
  p.kv_heads = kv_heads;
  p.q_len = 150;
  p.kv_len = 190;
  p.qk_head_size = 24;
  p.v_head_size = 16;
  Rng rng(seed);
  p.q = random_values(rng, uint64_t(p.batch) * q_heads * p.q_len * p.qk_head_size, 1.0);
  p.k = random_values(rng, uint64_t(kv_batch) * kv_heads * p.kv_len * p.qk_head_size, 1.0);
  p.v = random_values(rng, uint64_t(kv_batch) * kv_heads * p.kv_len * p.v_head_size, 1.0);
  p.scale = 1.0 / std::sqrt(24.0);
  return p;
}

void expect_equal(const BlockSparseResult& a, const BlockSparseResult& b, const std::string& what) {
  ASSERT_EQ(a.out.size(), b.out.size()) << what;
  for (size_t i = 0; i < a.out.size(); ++i) ASSERT_NEAR(a.out[i], b.out[i], 1e-12) << what << ", out " << i;
  for (size_t i = 0; i < a.lse.size(); ++i) {
    if (std::isinf(b.lse[i])) ASSERT_EQ(a.lse[i], b.lse[i]) << what << ", lse " << i;
    else ASSERT_NEAR(a.lse[i], b.lse[i], 1e-12) << what << ", lse " << i;
    ASSERT_EQ(std::isinf(a.row_max[i]), std::isinf(b.row_max[i])) << what << ", row_max " << i;
  }
}

struct Mod {
  std::string name;
  MaskMod mask;
};

std::vector<Mod> mods() {
  const int64_t offset = 190 - 150;   // causal with q_len != kv_len: the last query sees every key
  // Documents: token n of a batch belongs to document doc[n] (boundaries differ per batch).
  auto doc = [](uint32_t b, int64_t n) { return (n * 7 + b * 13) / 61; };
  return {
      {"causal", [=](uint32_t, uint32_t, int64_t q, int64_t n) { return n <= q + offset; }},
      {"sliding_window_37", [=](uint32_t, uint32_t, int64_t q, int64_t n) { return n <= q + offset && q + offset - n < 37; }},
      {"document", [=](uint32_t b, uint32_t, int64_t q, int64_t n) { return doc(b, q + offset) == doc(b, n) && n <= q + offset; }},
      {"prefix_lm_50", [=](uint32_t, uint32_t, int64_t q, int64_t n) { return n < 50 || n <= q + offset; }},
      {"per_head_stripes", [](uint32_t, uint32_t h, int64_t q, int64_t n) { return (q + n + h) % 3 != 0; }},
      {"random_blocks_25pct", [](uint32_t b, uint32_t h, int64_t q, int64_t n) {
         const uint64_t x = (uint64_t(b) * 131 + h * 31 + uint64_t(q / 32) * 7 + uint64_t(n / 16) * 1009) * 2654435761u;
         return (x >> 13) % 4 == 0;
       }},
  };
}

TEST(BlockSparseReference, BlockMaskOfAModEqualsTheModOnEveryPair) {
  uint64_t seed = 1;
  for (const Mod& m : mods())
    for (uint32_t kv_batch : {2u, 1u})
      for (bool separate_full : {true, false}) {
        BlockSparseProblem p = problem(seed++, kv_batch == 1 ? 5 : 4, kv_batch == 1 ? 1 : 2, kv_batch);
        p.mask_mod = m.mask;
        // The mask for every (b, h): sz = batch, sh = q_heads (the mods use both).
        p.mask = build_block_mask(m.mask, p.batch, p.q_heads, p.q_len, p.kv_len, 32, 16, separate_full);
        const std::string what = m.name + (kv_batch == 1 ? ", K/V broadcast, GQA 5" : "") +
                                 (separate_full ? "" : ", partial blocks only");
        expect_equal(block_sparse_attention(p), dense_masked_attention(p), what);
      }
}

TEST(BlockSparseReference, ScoreModAppliesToPartialAndFullBlocks) {
  BlockSparseProblem p = problem(11);
  p.mask_mod = mods()[0].mask;
  p.score_mod = [](double s, uint32_t, uint32_t h, int64_t q, int64_t n) {
    return 3.0 * std::tanh(s / 3.0) - 0.01 * (h + 1) * double(q + 40 - n);   // softcap, then ALiBi
  };
  p.mask = build_block_mask(p.mask_mod, 1, 1, p.q_len, p.kv_len, 32, 16);
  ASSERT_GT(p.mask.full_kv_num_blocks[3], 0);
  expect_equal(block_sparse_attention(p), dense_masked_attention(p), "causal with softcap and ALiBi");
}

TEST(BlockSparseReference, FullBlocksSkipTheMaskAndListedBlocksCountAsListed) {
  BlockSparseProblem p = problem(12);
  const MaskMod everything = [](uint32_t, uint32_t, int64_t, int64_t) { return true; };
  p.mask = build_block_mask(everything, 1, 1, p.q_len, p.kv_len, 32, 16);
  for (int32_t c : p.mask.kv_num_blocks) ASSERT_EQ(c, 0);   // every block full
  // A mask_mod that rejects everything is never asked for full blocks.
  p.mask_mod = [](uint32_t, uint32_t, int64_t, int64_t) { return false; };
  BlockSparseProblem all = p;
  all.mask_mod = everything;
  expect_equal(block_sparse_attention(p), dense_masked_attention(all), "full blocks only");
  // As partial blocks instead, the same rejecting mask_mod leaves every row empty.
  p.mask = build_block_mask(everything, 1, 1, p.q_len, p.kv_len, 32, 16, /*separate_full=*/false);
  const auto none = block_sparse_attention(p);
  for (double o : none.out) ASSERT_EQ(o, 0.0);
  for (size_t i = 0; i < none.lse.size(); ++i) {
    ASSERT_EQ(none.lse[i], -kInf);
    ASSERT_EQ(none.row_max[i], -kInf);
  }
  // q block 0 lists block 0 twice, in place of its last block (keys
  // 176-189): row 0's keys 0-15 weigh 2, 16-175 weigh 1, the rest nothing.
  p.mask = build_block_mask(everything, 1, 1, p.q_len, p.kv_len, 32, 16, false);
  p.mask_mod = everything;
  const auto once = block_sparse_attention(p);
  const uint32_t last = uint32_t(p.mask.kv_num_blocks[0]) - 1;
  ASSERT_EQ(p.mask.kv_indices[last], int32_t(last));
  p.mask.kv_indices[last] = 0;
  const auto twice = block_sparse_attention(p);
  double sum = 0;
  for (int64_t n = 0; n < 176; ++n) {
    double dot = 0;
    for (uint32_t d = 0; d < p.qk_head_size; ++d) dot += p.q[d] * p.k[n * p.qk_head_size + d];
    sum += (n < 16 ? 2.0 : 1.0) * std::exp(p.scale * dot);
  }
  EXPECT_NEAR(twice.lse[0], std::log(sum), 1e-12);
  EXPECT_EQ(twice.lse[40], once.lse[40]);   // q block 1's rows: unchanged
}

TEST(BlockSparseReference, AHandComputedRow) {
  // One query, two keys: out = softmax(scale * q.k) . v.
  BlockSparseProblem p;
  p.q_len = 1;
  p.kv_len = 2;
  p.qk_head_size = p.v_head_size = 1;
  p.q = {2.0};
  p.k = {1.0, -1.0};
  p.v = {3.0, 5.0};
  p.scale = 0.5;
  p.mask = build_block_mask([](uint32_t, uint32_t, int64_t, int64_t) { return true; }, 1, 1, 1, 2, 16, 16);
  const auto r = block_sparse_attention(p);
  const double w0 = std::exp(1.0), w1 = std::exp(-1.0);
  EXPECT_NEAR(r.out[0], (3 * w0 + 5 * w1) / (w0 + w1), 1e-15);
  EXPECT_NEAR(r.lse[0], std::log(w0 + w1), 1e-15);
  EXPECT_EQ(r.row_max[0], 1.0);
}

TEST(BlockSparseReference, BadMasksAreRefusedByName) {
  BlockSparseProblem p = problem(13);
  p.mask_mod = mods()[0].mask;
  p.mask = build_block_mask(p.mask_mod, 1, 1, p.q_len, p.kv_len, 32, 16);
  auto refused = [&](BlockSparseProblem bad, const std::string& fragment) {
    try {
      block_sparse_attention(bad);
      ADD_FAILURE() << "accepted; expected an error naming " << fragment;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  auto bad = p;
  bad.mask.kv_indices[0] = int32_t(p.mask.kv_blocks);   // past kv_len
  bad.mask.kv_num_blocks[0] = std::max(bad.mask.kv_num_blocks[0], 1);
  refused(bad, "kv_indices[0, 0]");
  bad = p;
  bad.mask.full_kv_num_blocks[2] = int32_t(p.mask.kv_blocks) + 1;
  refused(bad, "full_kv_num_blocks[2]");
  bad = p;
  bad.mask.q_blocks = 2;   // q_len 150 needs 5 blocks of 32
  refused(bad, "q blocks");
  bad = p;
  bad.k.pop_back();
  refused(bad, "k has");
  bad = p;
  bad.kv_batch = 3;
  refused(bad, "kv_batch");
}

}  // namespace
}  // namespace vkattn::ref
