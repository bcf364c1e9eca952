// `vkattn run block-sparse` (and the tests): random q, K, V and a block mask
// built on the host from the case's mask mods (ref::build_block_mask, as
// FlexAttention's create_block_mask), run through block_sparse_attention into
// NaN-poisoned outputs with guard bytes past them, and every output (LSE and
// row max too) checked against the float64 reference over the same lists.
#pragma once
#include <vkattn/block_sparse.hpp>
#include <vkattn/context.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runners/op_runner.hpp"

namespace vkattn::tool {

struct BlockSparseCase {
  uint32_t batch = 2, q_heads = 4, kv_heads = 2, head_size = 64;
  uint32_t v_head_size = 0;   // V's and out's: 0 = head_size
  uint32_t kv_batch = 0;   // 0: batch; 1: K/V broadcast over the batch
  uint32_t q_len = 200, kv_len = 200;
  uint32_t q_block = 64, kv_block = 64;
  // Mask mods, comma-separated, all of which must admit a pair:
  //   causal, window:N, document:N (N documents of random lengths),
  //   prefix:N (prefix-LM: causal or kv < N; combines with nothing else),
  //   random:DENSITY (a random share of the blocks, each full or partial
  //   with no mask mod; combines with nothing else), full (every block full).
  std::string mask = "causal";
  // Score mods, comma-separated: softcap:C, alibi, relbias, bias.
  std::string score;
  uint32_t mask_batch = 1, mask_heads = 1;   // the mask's Sz and Sh (random masks differ per (z, h))
  bool separate_full = true;                 // full blocks in their own lists (else all partial)
  std::optional<int32_t> q_offset;           // default Lkv - Lq
  DType dtype = DType::f16, out_dtype = DType::f16;
  bool lse = false, row_max = false;
  uint32_t token_padding = 0;                // elements between q/K/V/out token rows (strided views)
  std::string padded_views = "qkvo";         // the views token_padding applies to: q, k, v, o(ut)
  float scale = 0;                           // 0: 1 / sqrt(head_size)
  // K/V from a paged cache of this layout (BlockSparseArgs::paged_kv), "" for
  // the k and v views: blocks of paged_kv_block_size tokens, each batch's in
  // shuffled order, block-table rows one column longer than they need (a row
  // stride apart), the blocks in paged_kv_chunks chunks (the kernels hold the
  // first 8 chunks' bases in shared memory and read the others' from memory).
  std::string paged_kv;   // "", "nhd", "hnd" or "split"
  uint32_t paged_kv_block_size = 16;
  uint32_t paged_kv_chunks = 3;
  // The paged cache's dtype: q's (unset) or fp8_e4m3 / fp8_e5m2, whose K/V
  // are the fp8 values times these scales (the reference takes them so).
  std::optional<DType> paged_kv_dtype;
  float k_scale = 0.5f, v_scale = 0.25f;
  // A registered variant's mods (custom_mods), its C++ twins for the
  // reference (custom_mask ANDed with the built-in mask, custom_score after the
  // built-in score mods) and its buffers' 32-bit words, bound by name.
  std::string custom_mods;
  std::function<bool(uint32_t b, uint32_t h, int64_t q_idx, int64_t kv_idx)> custom_mask;
  std::function<double(double score, uint32_t b, uint32_t h, int64_t q_idx, int64_t kv_idx)> custom_score;
  std::vector<std::pair<std::string, std::vector<uint32_t>>> custom_buffers;
  uint64_t seed = 1;
  uint32_t timing_repetitions = 20;
  std::function<void()> before_timing;
};

struct BlockSparseOutputs {
  std::vector<double> out, lse, row_max, ref_out, ref_lse, ref_row_max;
  double density = 0;   // counted (q, kv) pairs / (Lq * Lkv), over every (b, h)
};

// The tolerance (the .cpp says why):
//   out: |got - ref| <= row_atol * max|ref row| + rtol * |ref|;
//   lse, row max: |got - ref| <= lse_atol + 2^-20 |ref|;
//   rows with no counted key: out exactly 0, lse and row max -inf.
struct BlockSparseTolerance {
  double row_atol = 0, rtol = 0, lse_atol = 0;
};
BlockSparseTolerance block_sparse_tolerance(const BlockSparseCase& c);

// The case's mods and block mask as the library takes them, for callers that
// run the op themselves (the bench): mods and values' scalar fields only.
BlockSparseMods block_sparse_mods(const BlockSparseCase& c);

// A case on the device for timing alone: q, K and V filled with a constant
// pattern (the time does not depend on the values), the block mask built on
// the host as run_block_sparse builds it.
class BlockSparseTimed {
 public:
  BlockSparseTimed(Context& ctx, const BlockSparseCase& c);
  ~BlockSparseTimed();
  void record(VkCommandBuffer cmd) const;
  double flops() const;     // 4 * head_size per counted (q, kv) pair
  double density() const;   // counted pairs / (B * Hq * Lq * Lkv)
  const BlockSparseArgs& args() const;
  // Records build_block_mask of the case's mask (cases whose mask comes from
  // mods) into lists of its own; false for random and full masks.
  bool record_mask_build(VkCommandBuffer cmd) const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// Throws vkattn::Error for a malformed mask or score string.
RunResult run_block_sparse(Context& ctx, const BlockSparseCase& c, BlockSparseOutputs* outputs = nullptr);

}  // namespace vkattn::tool
