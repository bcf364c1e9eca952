// Internal: what a PagedAttentionPlan holds.
#pragma once
#include <vkattn/paged_attention.hpp>

#include <functional>

#include "schedule/paged_attention_schedule.hpp"

namespace vkattn::detail {

struct PagedAttentionPlanData {
  uint64_t context_id = 0;
  KvCacheConfig cache;
  uint32_t num_q_heads = 0, num_seqs = 0, num_tokens = 0, max_query_len = 0;
  DType q_dtype = DType::f16;
  Path path = Path::scalar;
  bool replay = false;
  // A PrefixPrefillPlan's: segment 1 reads the new tokens' K/V views
  // (PA_KV_SUFFIX); the schedule always splits into those 2 segments.
  bool suffix = false;
  // fp8 K/V matrices built in registers (PA_REGISTER_MATRICES): where the
  // decode kernel's module has that form and the device's matrix element
  // order is the one it assumes (Capabilities::coopmat_register_order).
  bool register_matrices = false;
  Schedule schedule;
};

// bf16 q with K/V matrices built in registers: the module's registers hold an
// SM to 2 workgroups of 4 (ScheduleProblem::registers_hold_two).
inline bool registers_hold_two(const PagedAttentionPlanData& p) { return p.register_matrices && p.q_dtype == DType::bf16; }

// What prefix_prefill adds to a paged-attention run: the new tokens' K/V.
struct SuffixKv {
  const TensorView* key = nullptr;
  const TensorView* value = nullptr;
  bool skip_decode = false;
  bool writes_cache = false;   // prefix_prefill's fused write: the cache is an output as well
};

// paged_attention's recording, for paged_attention (suffix null) and
// prefix_prefill (a suffix plan and its views, checked by the caller). Args:
// PagedAttentionArgs or PrefixPrefillArgs, read through the fields they share
// (q, out, lse, batch, params, workspace), so that a step copies neither.
template <class Args>
void record_paged_attention(Context& ctx, const PagedAttentionPlan& plan, const PagedKvCache& cache, const Args& args,
                            const SuffixKv* suffix, VkCommandBuffer cmd);

// Submits `record` and waits; a split plan without args.workspace gets the
// Context's own workspace (grown as needed, under the submit lock).
void run_paged_attention_now(Context& ctx, const PagedAttentionPlan& plan, const PagedAttentionArgs& args,
                             const std::function<void(const PagedAttentionArgs&, VkCommandBuffer)>& record);

// prepare_paged_attention for a cache, heads, q dtype and variants, for
// paged_attention's plans or (suffix) prefix_prefill's.
void prepare_attention_pipelines(Context& ctx, const KvCacheConfig& cache, uint32_t num_q_heads, DType q_dtype,
                                 std::span<const PagedAttentionVariant> variants, bool suffix);

}  // namespace vkattn::detail
