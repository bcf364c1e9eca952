// Prefix prefill, as vLLM's context_attention_fwd (reference kernel 000):
// new query tokens attend to their sequence's context in the paged cache
// (no mask) and causally to their own K/V, which are still in the
// projection's output tensors, not in the cache. What an engine runs when a
// prompt hits a prefix cache.
//
// Semantics: sequence s has query_len = query_start_loc[s+1] - query_start_loc[s]
// new tokens and seq_len = ctx + query_len (ctx = the cached context). New
// token i (absolute position ctx + i) attends to cache positions [0, ctx)
// and to new tokens j <= i, read from `key` / `value` (exactly as given: an
// fp8 cache's k_scale / v_scale apply to the cached keys only). Scale,
// sliding window (on both parts), softcap, ALiBi (slope * (k_pos - ctx)),
// sinks, the output dtypes and out_scale, and LSE are paged_attention's
// (paged_attention.hpp); qq_bias is not supported. With skip_decode,
// sequences of one new token are left untouched in out and lse (an engine
// runs them on the decode path).
//
// It is paged attention split into two segments, the cached context and the
// new tokens, each a work item of the same kernels, combined by the split-KV
// reduce (FlashInfer's merge of a prefix's and a suffix's attention states),
// so it takes the paged-attention plan/run design whole: a plan is host
// work only, one plan serves every layer, a replay plan (for limits) serves
// every batch within them, and every view is read at run time.
//
// Lifetimes and threads: as PagedAttentionPlan (immutable, owns no device
// objects, may be destroyed while work recorded from it is pending, shared
// by threads). The recorded form owes the barriers ops.hpp states.
#pragma once
#include <vkattn/paged_attention.hpp>

#include <optional>

namespace vkattn {

// The workspace a plan for num_tokens tokens needs (plan.workspace_bytes()):
// the arrival counters (kPagedAttentionWorkspaceCounterBytes, 16 KiB), a
// few bytes that align what follows, and the 2 segments' partial results,
// num_tokens * num_q_heads * (head_size + 2) * 8 bytes (68 MB for 8192
// tokens of 32 heads x 128). One call's must fit one binding: the kernels'
// 2 GiB and the device's maxStorageBufferRange (a plan beyond it is refused,
// saying how many tokens fit).
uint64_t prefix_prefill_workspace_bytes(uint64_t num_tokens, uint32_t num_q_heads, uint32_t head_size);

struct PrefixPrefillOptions {
  PrefillKernel prefill = PrefillKernel::automatic;   // as PagedAttentionPlanOptions::prefill
  // The capacity of the workspace the engine will pass, which the plan's
  // workspace_bytes() must fit (prefix_prefill_workspace_bytes for its
  // tokens, a replay plan's limits' max_num_tokens). 0: no limit but one
  // binding's; allocate what the plan says.
  uint64_t workspace_bytes = 0;
};

class PrefixPrefillPlan {
 public:
  // For one batch: lengths as PagedAttentionLengths (seq_lens = context + new
  // tokens). Throws vkattn::Error naming the field, as PagedAttentionPlan.
  PrefixPrefillPlan(Context& ctx, const KvCacheConfig& cache, uint32_t num_q_heads, DType q_dtype,
                    const PagedAttentionLengths& lengths, const PrefixPrefillOptions& options = {});
  // A replay plan: every batch within the limits (max_seq_len counts context + new tokens).
  PrefixPrefillPlan(Context& ctx, const KvCacheConfig& cache, uint32_t num_q_heads, DType q_dtype,
                    const PagedAttentionLimits& limits, const PrefixPrefillOptions& options = {});

  // Creates every pipeline running this plan with these layer variants needs.
  void prepare(Context& ctx, std::span<const PagedAttentionVariant> variants) const;

  uint32_t num_tokens() const { return plan_.num_tokens(); }
  uint32_t num_seqs() const { return plan_.num_seqs(); }
  uint64_t workspace_bytes() const { return plan_.workspace_bytes(); }
  // The two-segment paged-attention plan it runs (its tiles, workgroups and
  // routing; paged_attention refuses it).
  const PagedAttentionPlan& attention() const { return plan_; }

 private:
  PagedAttentionPlan plan_;
};

struct PrefixPrefillArgs {
  // [num_tokens, num_q_heads, head_size] f16 or bf16, last dim contiguous.
  TensorView q;
  TensorView key;     // [num_tokens, num_kv_heads, head_size], q's dtype, last dim contiguous,
  TensorView value;   // head strides below 2^16 elements (any token stride)
  TensorView out;     // as PagedAttentionArgs::out
  std::optional<TensorView> lse;
  PagedAttentionBatchView batch;   // block_table covers each sequence's context
  PagedAttentionParams params;     // qq_bias must be empty
  // f32, at least plan.workspace_bytes(), for the recorded form (the
  // synchronous form uses the Context's own when empty); as PagedAttentionArgs.
  std::optional<TensorView> workspace;
  bool skip_decode = false;
  // When given ([num_tokens] i32 or i64, as write_kv_cache's), key and value
  // are also written into the cache at these slots, converted to the cache
  // dtype exactly as write_kv_cache does. The slots must not hold any
  // sequence's context (which this call reads).
  std::optional<TensorView> slot_mapping;

  // The fields it shares with PagedAttentionArgs (q, out, lse, batch, params,
  // workspace), and a PrefixPrefillArgs made of them and the new K/V.
  PagedAttentionArgs attention_args() const;
  static PrefixPrefillArgs from(const PagedAttentionArgs& attention, TensorView key, TensorView value);
};

// Records into `cmd` (ops.hpp: the barriers the caller owes; with
// slot_mapping the cache is an output too).
void prefix_prefill(Context& ctx, const PrefixPrefillPlan& plan, PagedKvCache& cache, const PrefixPrefillArgs& args,
                    VkCommandBuffer cmd);
// Synchronous: records, submits, waits, and throws any device-side error.
void prefix_prefill(Context& ctx, const PrefixPrefillPlan& plan, PagedKvCache& cache, const PrefixPrefillArgs& args);

// Creates, before the first step, every pipeline prefix_prefill may need for
// a model: any batch, these layer variants (and, for the fused write,
// prepare_write_kv_cache).
void prepare_prefix_prefill(Context& ctx, const KvCacheConfig& cache, uint32_t num_q_heads, DType q_dtype,
                            std::span<const PagedAttentionVariant> variants);

}  // namespace vkattn
