// Block-sparse attention with FlexAttention's contract (reference kernel 004,
// PyTorch's flex_attention forward): a block mask lists, for each q block of
// each (batch, head), the kv blocks to visit, partial ones (the mask mod
// decides per pair) and full ones (every pair counts); score mods change the
// scores of both.
//
// Semantics, for batch b, q head h (kv head h / (Hq / Hkv), K/V batch b, or 0
// when K/V have batch 1) and query q_idx:
//   the mask row is (b % Sz, h % Sh, q_idx / q_block_size);
//   key kv_idx < Lkv of a listed partial block counts when the mask mods
//   admit (b, h, q_idx, kv_idx); every key < Lkv of a listed full block counts;
//   score = scale * q.k, then the score mods;
//   out = softmax over the counted keys (a block listed twice counts twice)
//   times V; lse = log(sum exp(score)) and row_max = the largest score, in
//   natural log. A row with no counted key gives out 0, lse and row_max -inf.
//
// Built-in mods, combinable (BlockSparseMods): causal, sliding window,
// prefix-LM and document masks; softcap, ALiBi, a relative-position bias
// table and an additive bias buffer. q_pos = q_idx + q_offset is the
// query's position among the keys (q_offset defaults to Lkv - Lq: the
// queries are the sequence's last positions).
//
// Kernels: the paged-attention kernels' core with a block-list tile walk
// (shaders/include/block_sparse_io.glsl): the prefill kernel on the matrix
// paths (subgroups of 32; head sizes up to 256 but 144, 176, 208 and 240),
// the scalar kernel elsewhere
// and for V head sizes that differ from q.k's (Dqk != Dv, e.g. 192 and 128).
//
// Lifetimes and threads: nothing here owns device objects; the views (and a
// paged cache) are read when the recorded work runs. Calls on one Context may come from
// several threads (pipelines are created under the Context's lock); the
// recorded form owes the barriers ops.hpp states.
#pragma once
#include <vkattn/block_sparse_custom_buffers.hpp>
#include <vkattn/context.hpp>
#include <vkattn/kv_cache.hpp>
#include <vkattn/tensor.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace vkattn {

// FlexAttention's BlockMask, on the device (i32, contiguous).
struct BlockMask {
  TensorView kv_num_blocks;                       // [Sz, Sh, q_blocks], q_blocks = ceil(Lq / q_block_size)
  TensorView kv_indices;                          // [Sz, Sh, q_blocks, kv_blocks]
  std::optional<TensorView> full_kv_num_blocks;   // as kv_num_blocks, or none
  std::optional<TensorView> full_kv_indices;      // as kv_indices, or none (both or neither)
  // Multiples of 16 up to 32768 (the kernels take tiles that divide them:
  // multiples of 128 get the matrix paths' largest).
  uint32_t q_block_size = 128, kv_block_size = 128;
};

// Built-in mask mods (bits).
enum BlockSparseMask : uint32_t {
  kMaskCausal = 1,     // kv_idx <= q_pos
  kMaskWindow = 2,     // q_pos - kv_idx < window (one-sided: with causal, the window before q)
  kMaskPrefix = 4,     // kv_idx < prefix_len (prefix-LM: any of causal | prefix)
  kMaskDocument = 8,   // document_ids[q_pos] == document_ids[kv_idx]
};
// Built-in score mods (bits), applied in this order.
enum BlockSparseScore : uint32_t {
  kScoreSoftcap = 1,   // softcap * tanh(score / softcap)
  kScoreAlibi = 2,     // + alibi_slopes[h] * (kv_idx - q_pos)
  kScoreRelBias = 4,   // + rel_bias[h][kv_idx - q_idx + Lq - 1]
  kScoreBias = 8,      // + bias[h][q_idx][kv_idx]
};

// Which mods a layer uses: part of its pipeline (prepare them all before the
// first step). A pair of a partial block counts when every mask of `all`
// admits it (if `all` has any) or some mask of `any` does; with both empty,
// every pair of a partial block counts (the block mask alone decides).
struct BlockSparseMods {
  uint32_t all = 0;     // BlockSparseMask bits
  uint32_t any = 0;     // BlockSparseMask bits
  uint32_t score = 0;   // BlockSparseScore bits
};

// The mods' values: each is required exactly when its mod is on (a scalar
// of a mod that is off must stay 0, a view absent).
struct BlockSparseModValues {
  int32_t window = 0;                       // kMaskWindow, >= 1
  int32_t prefix_len = 0;                   // kMaskPrefix, >= 0
  float softcap = 0;                        // kScoreSoftcap, > 0
  std::optional<TensorView> alibi_slopes;   // kScoreAlibi: [Hq] f32
  std::optional<TensorView> document_ids;   // kMaskDocument: [Lkv] i32
  std::optional<TensorView> rel_bias;       // kScoreRelBias: [Hq, Lq + Lkv - 1] f32
  std::optional<TensorView> bias;           // kScoreBias: [Hq, Lq, Lkv] f32
};

// K and V from the paged KV cache rather than from k and v: batch b's keys
// are the first kv_len tokens of block-table row b's blocks, as the paged
// ops read a sequence (FlexAttention over a paged sequence; a mask with Sz =
// B gives each sequence its own). The cache holds q's dtype, or fp8 (e4m3,
// e5m2: its values times its k_scale / v_scale), in any layout; Hkv and the
// head size are its. Runs on the kernel K/V views take (the prefill kernel
// on the matrix paths), which reads the cache as paged attention does.
// A block-table entry outside the cache is reported through the Context's
// status (block 0 is read instead).
struct BlockSparsePagedKv {
  const PagedKvCache* cache = nullptr;   // read when the recorded work runs
  TensorView block_table;                // [B, columns] i32, last dim contiguous, columns >= ceil(kv_len / block_size)
  int64_t kv_len = 0;                    // Lkv
};

struct BlockSparseArgs {
  TensorView q;     // [B, Hq, Lq, Dqk] f16 or bf16, last dim contiguous, any other strides
  TensorView k;     // [Bkv, Hkv, Lkv, Dqk], q's dtype; Bkv = B or 1 (broadcast); empty with paged_kv
  TensorView v;     // [Bkv, Hkv, Lkv, Dv], q's dtype; empty with paged_kv
  TensorView out;   // [B, Hq, Lq, Dv] f16, bf16 or f32
  std::optional<TensorView> lse;       // [B, Hq, Lq] f32, contiguous
  std::optional<TensorView> row_max;   // [B, Hq, Lq] f32, contiguous
  BlockMask mask;
  BlockSparseMods mods;
  BlockSparseModValues values;
  float scale = 0;                     // 0: 1 / sqrt(Dqk)
  // Default Lkv - Lq. The kernels compute q_idx + q_offset and its distance
  // to every key in 32 bits: q_offset + Lq - 1 <= 2^31 - 1 and
  // q_offset - (Lkv - 1) > -2^31, else an Error.
  std::optional<int32_t> q_offset;
  // A registered variant's mods (block_sparse_variant.hpp), by name, applied
  // after the built-in ones; "" for none. Its buffers by the names it was
  // compiled with, each view contiguous, of the dtype and at least the extent
  // the variant declares (BlockSparseVariantBuffer), starting on a
  // storage-buffer offset alignment. Both are held in place
  // (block_sparse_custom_buffers.hpp): made every step, they allocate nothing.
  VariantName custom_mods;
  BlockSparseCustomBuffers custom_buffers;
  std::optional<BlockSparsePagedKv> paged_kv;   // K/V from the paged cache (k and v left empty)
};

// What a layer's pipeline depends on, for prepare.
struct BlockSparseVariant {
  DType q_dtype = DType::f16, out_dtype = DType::f16;
  uint32_t num_q_heads = 0, num_kv_heads = 0, head_size = 0;
  uint32_t v_head_size = 0;   // V's and out's, when it differs from q.k's head_size (0: the same)
  // The masks' block sizes: a run whose mask has other sizes needs another
  // pipeline (kv_block_size is compiled into the kernel), created at its
  // first run unless prepared.
  uint32_t q_block_size = 128, kv_block_size = 128;
  BlockSparseMods mods;
  bool lse = false, row_max = false;
  VariantName custom_mods;   // as BlockSparseArgs::custom_mods
  // K/V from the paged cache (BlockSparseArgs::paged_kv): its block size,
  // layout and dtype (part of the pipeline); 0: from the k and v views.
  uint32_t paged_kv_block_size = 0;
  KvLayout paged_kv_layout = KvLayout::nhd;
  std::optional<DType> paged_kv_dtype;   // the cache's: q's (unset) or fp8_e4m3 / fp8_e5m2
};

// The path a variant runs on (the context's, or scalar where the prefill
// kernel cannot take it: Dqk != Dv, head sizes 144, 176, 208 and 240,
// subgroups not of 32, no bf16 matrices for bf16, block sizes no tile of
// it divides).
Path block_sparse_attention_path(const Context& ctx, const BlockSparseVariant& variant);

// Creates the pipelines these variants need (before the first step): on
// the matrix paths three per variant over K/V views and two over the paged
// cache, one for each form of the views' loads a run may take (chosen per
// run from Lkv and the views' alignment); one on the scalar path.
// Throws vkattn::Error for a variant the kernels cannot run.
void prepare_block_sparse_attention(Context& ctx, std::span<const BlockSparseVariant> variants);

// Records the attention into `cmd` (no submission, no allocation once
// prepared). Throws vkattn::Error (what was wrong, what was expected) for bad
// arguments before recording anything. Block lists are read on the device:
// a count above kv_blocks or an index outside the keys is kept in bounds and
// reported through the Context's status (Context::check_device_status).
void block_sparse_attention(Context& ctx, const BlockSparseArgs& args, VkCommandBuffer cmd);
// Runs it on the Context's queue and waits.
void block_sparse_attention(Context& ctx, const BlockSparseArgs& args);

// FlexAttention's create_block_mask on the device: a kernel evaluates the
// mask mods (the same functions the attention applies) over every (q, kv)
// pair of each block inside the lengths, for each mask row (z < Sz, h < Sh,
// q block; b = z and h = h for the mods), and writes the lists: blocks where
// every pair counts as full (when full lists are given; else as partial),
// blocks where some pair counts as partial, indices increasing. List entries
// past the counts are left as they were. The recorded form owes the barriers
// ops.hpp states between it and the attention that reads the mask.
struct BlockMaskBuild {
  BlockSparseMods mods;          // its mask mods (all, any); score must be 0
  BlockSparseModValues values;   // window, prefix_len, document_ids, as the mods need
  int64_t q_len = 0, kv_len = 0;
  std::optional<int32_t> q_offset;   // default kv_len - q_len; bounded as BlockSparseArgs::q_offset
  VariantName custom_mods;           // as BlockSparseArgs: the variant's mask mod applies too
  BlockSparseCustomBuffers custom_buffers;
  // Written: kv_num_blocks [Sz, Sh, ceil(Lq / q_block_size)] and kv_indices
  // [.., kv_blocks >= ceil(Lkv / kv_block_size)], and the full lists when given.
  BlockMask mask;
};
void build_block_mask(Context& ctx, const BlockMaskBuild& build, VkCommandBuffer cmd);
void build_block_mask(Context& ctx, const BlockMaskBuild& build);
// Creates the builder's pipelines for these mask mods (score bits ignored)
// and custom mods ("" for none).
void prepare_build_block_mask(Context& ctx, std::span<const BlockSparseMods> mods, const VariantName& custom_mods = {});

}  // namespace vkattn
