// Paged attention over a PagedKvCache, as vLLM's unified_attention: decode,
// chunked prefill and mixed batches, with split-KV ("segmented") decoding for
// long contexts.
//
// Plan and run, as FlashInfer splits them:
//  - A plan is host work only, O(num_seqs): from the batch's lengths (host
//    copies of what the engine keeps on the GPU) it picks the tile shape,
//    the workgroup size and whether to split the KV range. It allocates
//    nothing, on the device or the host (its data is held in the object),
//    and uploads and submits nothing, so an engine makes one per step.
//  - Running it records dispatches that read the batch from device views the
//    engine owns (query_start_loc, seq_lens, block_table) and the layer's
//    values (scale, window, softcap, sinks, ALiBi slopes, qq_bias) given at
//    run time: one plan serves every layer of a step.
//  - Replay: a plan made for limits (PagedAttentionLimits) rather than one
//    batch serves every batch within them, so a command buffer recorded once
//    can be submitted every step after the engine rewrites its device
//    metadata (what vLLM does with CUDA graphs).
// The kernels check what they read from the device (query_start_loc, seq_lens
// and block-table entries), never read or write outside the views and the
// cache, and report a bad value through Context::check_device_status.
//
// Semantics: sequence s has query_len = query_start_loc[s+1] - query_start_loc[s]
// new tokens (already written to the cache) and seq_len context + new tokens.
// Its token i sits at absolute position ctx + i, ctx = seq_len - query_len,
// and attends to cache positions k <= ctx + i (causal). Then, per query head h
// (kv head h / (num_q_heads / num_kv_heads)):
//   logit = scale * q.k; softcap: c * tanh(logit / c); window W: keep only
//   q_pos - k_pos < W; ALiBi: + slope[h] * (k_pos - ctx); qq_bias: +
//   bias[i, k_pos - ctx] for keys among the new tokens; sinks: one extra logit
//   sink[h] in the softmax denominator. A row that sees no key (a sequence of
//   length 0, or every key masked) gives 0, never NaN; a value a row cannot
//   see never reaches its output.
#pragma once
#include <vkattn/buffer.hpp>
#include <vkattn/capabilities.hpp>
#include <vkattn/dtype.hpp>
#include <vkattn/kv_cache.hpp>
#include <vkattn/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

namespace vkattn {

class Context;

// Host copies of a batch's lengths, for planning (read during the
// constructor only).
struct PagedAttentionLengths {
  std::span<const int32_t> query_start_loc;   // [num_seqs + 1], non-decreasing, starting at 0
  std::span<const int32_t> seq_lens;          // [num_seqs]: context + new tokens; >= query_len, or 0
                                              // for a padding sequence (its rows see no key and give 0)
};

// A replay plan's limits: every batch with num_seqs sequences (padding
// sequences have query_len 0), query_start_loc[num_seqs] <= max_num_tokens,
// query_len <= max_query_len and seq_len <= max_seq_len runs on it.
struct PagedAttentionLimits {
  uint32_t num_seqs = 0;
  uint32_t max_num_tokens = 0;
  uint32_t max_query_len = 0;   // 0: max_num_tokens
  uint32_t max_seq_len = 0;     // sizes split-KV only; longer sequences still run
};

enum class SplitKv {
  automatic,   // split when the batch gives too few workgroups to fill the GPU
  off,
  on,          // always split (num_segments, or a chosen count)
};

// Whether sequences of many query rows run on the prefill kernel
// (paged_prefill.comp: tiles of 128 rows, 64 where its softmax goes through
// shared memory, 32 above head size 128, sharing each K/V tile; matrix paths with subgroups of
// 32, head sizes up to 256 but 144, 176, 208 and 240) rather than on the
// decode kernel's 16-row tiles. Both give the same
// results within the stated tolerances. The plan decides per batch, and a
// mixed batch is still one call.
enum class PrefillKernel {
  // Matrix paths: sequences of at least one prefill tile of rows (query
  // tokens x GQA heads: 128, 32 above head size 128), where they give the
  // prefill kernel a workgroup per multiprocessor or more. On a device
  // without the matrices' element order (Capabilities::coopmat_register_order
  // false) the prefill kernel's softmax goes through shared memory: its tile
  // is 64 rows there, and it routes only from head size 128 (below it that
  // form was not the faster). Scalar: the decode kernel.
  automatic,
  off,
  on,          // sequences of more rows than one token's decode tile, whenever the device has the kernel
};

// The leading bytes of a split run's workspace that must be zero before its
// first split run (PagedAttentionArgs::workspace).
inline constexpr uint64_t kPagedAttentionWorkspaceCounterBytes = 16384;

// The size of the workspace an engine allocates once for split-KV partial
// results, unless it passes its own PagedAttentionPlanOptions::workspace_bytes.
inline constexpr uint64_t kDefaultPagedAttentionWorkspaceBytes = 64ull << 20;

struct PagedAttentionPlanOptions {
  SplitKv split = SplitKv::automatic;
  uint32_t num_segments = 0;   // with SplitKv::on; 0 = chosen from the batch
  // The capacity of the workspace the engine will pass to split runs: the
  // plan never needs more (automatic splits shrink to fit; an explicit
  // num_segments that does not fit is an error).
  uint64_t workspace_bytes = kDefaultPagedAttentionWorkspaceBytes;
  PrefillKernel prefill = PrefillKernel::automatic;
};

// The batch on the device, owned by the engine and read when the work runs.
struct PagedAttentionBatchView {
  TensorView query_start_loc;   // [num_seqs + 1] i32
  TensorView seq_lens;          // [num_seqs] i32
  TensorView block_table;       // [num_seqs, max_blocks_per_seq] i32, entries < num_blocks for every
                                // block a sequence uses (columns past seq_len are never read)
};

// One layer's values, given at run time.
struct PagedAttentionParams {
  float scale = 0;                          // softmax scale, > 0 (usually 1 / sqrt(head_size)); the
                                            // kernels take q * scale and the logits in f32, so a
                                            // scale with which those overflow (3e38 with |q| near 1)
                                            // gives NaN rows
  int32_t sliding_window = 0;               // 0: none
  float softcap = 0;                        // 0: none
  float out_scale = 1.0f;                   // fp8 output: stored = out / out_scale (saturating)
  std::optional<TensorView> alibi_slopes;   // [num_q_heads] f32, finite
  std::optional<TensorView> sinks;          // [num_q_heads] f32, not NaN or +inf
  std::optional<TensorView> qq_bias;        // [rows, columns] f32: bias[i][j] for new token i and new key j
                                            // (pairs outside the view get none)
};

// Which pipeline variants a layer needs: its optional features and output.
struct PagedAttentionVariant {
  bool alibi = false, sinks = false, qq_bias = false, softcap = false, sliding_window = false, lse = false;
  DType out_dtype = DType::f16;
};

struct PagedAttentionArgs {
  TensorView q;                       // [num_tokens, num_q_heads, head_size] f16 or bf16, last dim contiguous
  TensorView out;                     // same shape; f16, bf16, f32, fp8_e4m3 or fp8_e5m2; must not overlap an input
  std::optional<TensorView> lse;      // [num_tokens, num_q_heads] f32: natural-log sum of exponentials of the
                                      // logits (sink included); -inf for a row that sees no key and has no sink
  PagedAttentionBatchView batch;
  PagedAttentionParams params;
  // f32, at least plan.workspace_bytes() bytes, for a recorded run of a split
  // plan. Its first kPagedAttentionWorkspaceCounterBytes hold arrival
  // counters, with which the last segment of each decode work item to finish
  // merges the segments (no reduce dispatch): they must be zero before the
  // workspace's first split run (e.g. vkCmdFillBuffer or Buffer::fill(0) once
  // after allocating it), and split runs leave them zero; nothing else may
  // write them. A run that finds a count of num_segments or more reports it
  // (vkattn::Error from check_device_status) rather than merge; a smaller
  // stale count cannot be told from the run's own arrivals: its item merges
  // too early (wrong results) and the count stays for later runs. So clear
  // them again after anything that may have left them otherwise (a
  // submission that did not complete, a run that reported, memory another
  // use wrote). The synchronous form does that for its own. The rest is overwritten by
  // every split run. Runs recorded one after another on a queue may share one
  // (a split run starts with a barrier for that); runs that may overlap need
  // their own. The synchronous form uses the Context's own when this is empty.
  std::optional<TensorView> workspace;
};

namespace detail { struct PagedAttentionPlanData; }

// Immutable once made; owns no device objects, so it may be destroyed at any
// time (even while work recorded from it is pending) and shared by threads.
// Its data is held in the object (no heap allocation, nor for a copy); a
// plan moved from throws vkattn::Error on use.
class PagedAttentionPlan {
 public:
  // A plan for one batch: num_tokens = query_start_loc[num_seqs]. Checks the
  // lengths (non-decreasing query_start_loc from 0, query_len <= seq_len
  // unless seq_len is 0), the shapes (num_q_heads a multiple of the cache's
  // kv heads, q dtype), the cache's geometry (as PagedKvCache checks it,
  // except num_blocks and the scales) and the options, and throws
  // vkattn::Error naming the field.
  PagedAttentionPlan(Context& ctx, const KvCacheConfig& cache, uint32_t num_q_heads, DType q_dtype,
                     const PagedAttentionLengths& lengths, const PagedAttentionPlanOptions& options = {});
  // A replay plan: num_tokens = limits.max_num_tokens.
  PagedAttentionPlan(Context& ctx, const KvCacheConfig& cache, uint32_t num_q_heads, DType q_dtype,
                     const PagedAttentionLimits& limits, const PagedAttentionPlanOptions& options = {});
  ~PagedAttentionPlan();
  PagedAttentionPlan(const PagedAttentionPlan&);
  PagedAttentionPlan& operator=(const PagedAttentionPlan&);
  PagedAttentionPlan(PagedAttentionPlan&&) noexcept;
  PagedAttentionPlan& operator=(PagedAttentionPlan&&) noexcept;

  // Creates every pipeline running this plan with these layer variants needs.
  void prepare(Context& ctx, std::span<const PagedAttentionVariant> variants) const;

  uint32_t num_tokens() const;    // the views' first dimension
  uint32_t num_seqs() const;
  uint32_t max_query_len() const;
  uint32_t num_q_heads() const;
  uint32_t head_size() const;
  bool split() const;             // whether the KV range is split into segments
  uint32_t num_segments() const;  // 1 when not split
  uint64_t workspace_bytes() const;   // 0 when not split
  uint64_t num_workgroups() const;    // of the attention dispatches (decode and prefill kernels)
  uint32_t workgroup_size() const;    // invocations per workgroup of the decode kernel
  // Whether sequences of many rows (query tokens x GQA heads) run on the
  // prefill kernel (matrix paths): those of prefill_min_rows() rows or more.
  bool routes_prefill() const;
  uint32_t prefill_min_rows() const;  // 0 without
  Path path() const;              // the kernel path it runs on (f16 and bf16 mixed, or bf16 on a device
                                  // without bf16 matrices, run the scalar one)
  // (Throws vkattn::Error on a plan moved from, as every member does.)
  const detail::PagedAttentionPlanData& data() const;

 private:
  friend class PrefixPrefillPlan;   // a paged-attention plan of its own kind (prefix_prefill.hpp)
  detail::PagedAttentionPlanData& make_data();   // constructs the data in place
  detail::PagedAttentionPlanData& mutable_data();   // a PrefixPrefillPlan's marks, while it is made
  void drop_data() noexcept;
  // The data, in place; paged_attention.cpp checks that it fits.
  static constexpr std::size_t kDataBytes = 256, kDataAlign = 16;
  alignas(kDataAlign) unsigned char data_[kDataBytes];
  bool has_data_ = false;
};

// Creates, before the first step, every pipeline that paged_attention may
// need for a model: any batch, any split, these layer variants.
void prepare_paged_attention(Context& ctx, const KvCacheConfig& cache, uint32_t num_q_heads, DType q_dtype,
                             std::span<const PagedAttentionVariant> variants);

// Records the attention into `cmd` (see ops.hpp for the barriers the caller owes).
void paged_attention(Context& ctx, const PagedAttentionPlan& plan, const PagedKvCache& cache,
                     const PagedAttentionArgs& args, VkCommandBuffer cmd);
// Synchronous: records, submits, waits, and throws any device-side error.
void paged_attention(Context& ctx, const PagedAttentionPlan& plan, const PagedKvCache& cache,
                     const PagedAttentionArgs& args);

}  // namespace vkattn
