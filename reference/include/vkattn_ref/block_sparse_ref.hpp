// Float64 reference of block-sparse attention with FlexAttention's semantics
// (seed 004, the flex_attention forward template), and a host builder of its
// block masks (create_block_mask from a predicate).
//
// For batch b, query head h (kv head h / (Hq / Hkv), K/V batch b % Bkv) and
// query row m (q block m / q_block_size):
//   the mask's row is (b % sz, h % sh, m / q_block_size);
//   partial blocks: kv_indices[row][0 .. kv_num_blocks[row]) — key n of such
//     a block (n < Lkv) counts when mask_mod(b, h, m, n) is true;
//   full blocks: full_kv_indices[row][0 .. full_kv_num_blocks[row]) — every
//     key n < Lkv of the block counts, mask_mod unasked;
//   score = scale * q.k, then score_mod(score, b, h, m, n) where given (for
//     partial and full blocks alike);
//   out = sum exp(score - lse) v over the counted keys; lse = log(sum exp)
//   (natural log, as flex_attention returns it); row_max = the largest score.
// Blocks are taken as listed: a block listed twice counts twice (the kernel
// does the same). A row with no counted key gives out 0, lse -inf and
// row_max -inf (the seed's l_i = 1 guard).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace vkattn::ref {

using MaskMod = std::function<bool(uint32_t b, uint32_t h, int64_t q_idx, int64_t kv_idx)>;
using ScoreMod = std::function<double(double score, uint32_t b, uint32_t h, int64_t q_idx, int64_t kv_idx)>;

struct BlockMaskRef {
  uint32_t sz = 1, sh = 1;                   // its batch and head extents (broadcast: b % sz, h % sh)
  uint32_t q_blocks = 0, kv_blocks = 0;      // rows per (z, h) and the lists' capacity
  uint32_t q_block_size = 128, kv_block_size = 128;
  std::vector<int32_t> kv_num_blocks;        // [sz, sh, q_blocks]
  std::vector<int32_t> kv_indices;           // [sz, sh, q_blocks, kv_blocks]
  std::vector<int32_t> full_kv_num_blocks;   // as kv_num_blocks, or empty: no full blocks
  std::vector<int32_t> full_kv_indices;      // as kv_indices, or empty

  // The whole mask for (b, h, q_idx, kv_idx) as the lists say, counting a
  // key once per listing: what block_sparse_attention uses.
  uint32_t listings(const MaskMod& mask_mod, uint32_t b, uint32_t h, int64_t q_idx, int64_t kv_idx, int64_t kv_len) const;
};

// create_block_mask: evaluates mask_mod over every (q, kv) pair of each
// (q block, kv block) of each (z < sz, h < sh); blocks where it is true for
// every pair inside the lengths are full (with separate_full; else partial
// too), blocks where it is true somewhere are partial, the rest are left out.
// Indices are listed in increasing order.
BlockMaskRef build_block_mask(const MaskMod& mask_mod, uint32_t sz, uint32_t sh, int64_t q_len, int64_t kv_len,
                              uint32_t q_block_size, uint32_t kv_block_size, bool separate_full = true);

struct BlockSparseProblem {
  uint32_t batch = 1, q_heads = 1, kv_batch = 1, kv_heads = 1;   // kv_batch: batch or 1 (broadcast)
  int64_t q_len = 0, kv_len = 0;
  uint32_t qk_head_size = 0, v_head_size = 0;
  std::vector<double> q;   // [batch, q_heads, q_len, qk_head_size]
  std::vector<double> k;   // [kv_batch, kv_heads, kv_len, qk_head_size]
  std::vector<double> v;   // [kv_batch, kv_heads, kv_len, v_head_size]
  double scale = 1;
  BlockMaskRef mask;
  MaskMod mask_mod;        // empty: every pair of a partial block counts
  ScoreMod score_mod;      // empty: the score as it is
};

struct BlockSparseResult {
  std::vector<double> out;       // [batch, q_heads, q_len, v_head_size]
  std::vector<double> lse;       // [batch, q_heads, q_len], natural log
  std::vector<double> row_max;   // [batch, q_heads, q_len]
};

// Throws std::invalid_argument (naming the field) for inconsistent input: a
// block index outside [0, kv_blocks) or past kv_len, a count above
// kv_blocks, sizes that disagree.
BlockSparseResult block_sparse_attention(const BlockSparseProblem& p);

// The same attention with no blocks: mask_mod asked for every pair (keys
// past kv_len excluded). What block_sparse_attention must equal whenever
// the mask came from build_block_mask of the same mask_mod.
BlockSparseResult dense_masked_attention(const BlockSparseProblem& p);

}  // namespace vkattn::ref
