// prefix_prefill: a paged-attention plan of two segments (the cached context,
// then the new tokens from their K/V views), recorded by paged_attention's
// own recording (paged_attention_plan.hpp), and the checks of what it adds.
#include <vkattn/context.hpp>
#include <vkattn/ops.hpp>
#include <vkattn/prefix_prefill.hpp>

#include "../context_impl.hpp"
#include "../op_support.hpp"
#include "schedule/paged_attention_schedule.hpp"

#include <algorithm>
#include <string_view>
#include <cstdint>
#include "paged_attention_plan.hpp"
#include "write_kv_cache_record.hpp"

namespace vkattn {

using namespace detail;

namespace {

constexpr std::string_view kOp = "prefix_prefill";

[[noreturn]] void fail(const std::string& what) { throw Error("prefix_prefill: " + what); }

// Runs f, whose checks are paged_attention's (the plan, the views, the
// device's reports), so that its errors name the op the caller called.
template <class F>
decltype(auto) as_prefix_prefill(F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    constexpr std::string_view from = "paged_attention: ";
    const std::string_view what = e.what();
    if (!what.starts_with(from)) throw;
    // Its options are PrefixPrefillOptions.
    std::string text(what.substr(from.size()));
    for (std::size_t at; (at = text.find("PagedAttentionPlanOptions::")) != std::string::npos;)
      text.replace(at, 25, "PrefixPrefillOptions");
    throw Error("prefix_prefill: " + text, e.vk_result());
  }
}

// The layer variants prefix_prefill has: paged_attention's but qq_bias.
void check_variants(std::span<const PagedAttentionVariant> variants) {
  for (const auto& v : variants)
    if (v.qq_bias) fail("a variant asks for qq_bias, which prefix_prefill does not support");
}

// The paged-attention plan a PrefixPrefillPlan is (its errors named as prefix_prefill's).
template <class Batch>
PagedAttentionPlan make_plan(Context& ctx, const KvCacheConfig& cache, uint32_t num_q_heads, DType q_dtype,
                             const Batch& batch, const PagedAttentionPlanOptions& options) {
  return as_prefix_prefill([&] { return PagedAttentionPlan(ctx, cache, num_q_heads, q_dtype, batch, options); });
}

// The paged-attention options of a plan for num_tokens tokens: always 2
// segments (the cached context, the new tokens). Their workspace must fit
// one binding, checked here so that the error can say how many tokens do;
// the engine's own capacity is checked once the lengths are
// (check_workspace_option), against what the plan then needs.
PagedAttentionPlanOptions attention_options(const Context& ctx, const KvCacheConfig& cache, uint32_t num_q_heads,
                                            uint64_t num_tokens, const PrefixPrefillOptions& o) {
  const uint64_t need = prefix_prefill_workspace_bytes(num_tokens, num_q_heads, cache.head_size);
  const uint64_t bindable = max_workspace_bytes(ctx.capabilities().max_storage_buffer_range);
  if (need > bindable) {
    const uint64_t counters = split_workspace_bytes(num_tokens, num_q_heads, cache.head_size, 0);   // the arrival counters alone
    const uint64_t per_token = partial_result_bytes(1, num_q_heads, cache.head_size, 2);
    fail(std::to_string(num_tokens) + " tokens of " + std::to_string(num_q_heads) + " q heads x " +
         std::to_string(cache.head_size) + " need " + std::to_string(need) +
         " bytes of workspace (the arrival counters and two segments' partial results), more than one call can bind: " +
         std::to_string(bindable) + " bytes (the kernels' 2 GiB and the device's maxStorageBufferRange); at most " +
         std::to_string(bindable > counters ? (bindable - counters) / per_token : 0) + " tokens per call");
  }
  PagedAttentionPlanOptions a;
  a.split = SplitKv::on;
  a.num_segments = 2;
  a.workspace_bytes = UINT64_MAX;   // within one binding (above); the engine's capacity: check_workspace_option
  a.prefill = o.prefill;
  return a;
}

// The engine's workspace capacity against what the plan needs.
void check_workspace_option(const PagedAttentionPlan& plan, const PrefixPrefillOptions& o) {
  if (o.workspace_bytes && plan.workspace_bytes() > o.workspace_bytes)
    fail(std::to_string(plan.num_tokens()) + " tokens need " + std::to_string(plan.workspace_bytes()) +
         " bytes of workspace (prefix_prefill_workspace_bytes: the arrival counters and two segments' partial results), "
         "more than options.workspace_bytes = " + std::to_string(o.workspace_bytes) +
         "; pass a larger workspace (or 0: what the plan needs)");
}

// A paged-attention plan's data as prefix prefill runs it: the new tokens from
// their views, and the prefill kernel's items in two passes (the context's
// keys on the paged op's module, then the new tokens').
void mark_prefix_prefill(PagedAttentionPlanData& p) {
  p.suffix = true;
  p.schedule.merge_last = false;   // its two segments are its two key sources, merged by the reduce
  prefix_prefill_passes(p.schedule);
}

}  // namespace

uint64_t prefix_prefill_workspace_bytes(uint64_t num_tokens, uint32_t num_q_heads, uint32_t head_size) {
  return split_workspace_bytes(num_tokens, num_q_heads, head_size, 2);
}

PrefixPrefillPlan::PrefixPrefillPlan(Context& ctx, const KvCacheConfig& cache, uint32_t num_q_heads, DType q_dtype,
                                     const PagedAttentionLengths& lengths, const PrefixPrefillOptions& options)
    : plan_(make_plan(ctx, cache, num_q_heads, q_dtype, lengths,
                      attention_options(ctx, cache, num_q_heads,
                                        lengths.query_start_loc.empty() ? 0 : uint64_t(std::max(lengths.query_start_loc.back(), 0)),
                                        options))) {
  check_workspace_option(plan_, options);
  mark_prefix_prefill(plan_.mutable_data());
}

PrefixPrefillPlan::PrefixPrefillPlan(Context& ctx, const KvCacheConfig& cache, uint32_t num_q_heads, DType q_dtype,
                                     const PagedAttentionLimits& limits, const PrefixPrefillOptions& options)
    : plan_(make_plan(ctx, cache, num_q_heads, q_dtype, limits,
                      attention_options(ctx, cache, num_q_heads, limits.max_num_tokens, options))) {
  check_workspace_option(plan_, options);
  mark_prefix_prefill(plan_.mutable_data());
}

void PrefixPrefillPlan::prepare(Context& ctx, std::span<const PagedAttentionVariant> variants) const {
  check_variants(variants);
  as_prefix_prefill([&] { plan_.prepare(ctx, variants); });
}

void prepare_prefix_prefill(Context& ctx, const KvCacheConfig& cache, uint32_t num_q_heads, DType q_dtype,
                            std::span<const PagedAttentionVariant> variants) {
  check_variants(variants);
  as_prefix_prefill([&] { prepare_attention_pipelines(ctx, cache, num_q_heads, q_dtype, variants, true); });
}

PagedAttentionArgs PrefixPrefillArgs::attention_args() const {
  PagedAttentionArgs a;
  a.q = q;
  a.out = out;
  a.lse = lse;
  a.batch = batch;
  a.params = params;
  a.workspace = workspace;
  return a;
}

PrefixPrefillArgs PrefixPrefillArgs::from(const PagedAttentionArgs& attention, TensorView key, TensorView value) {
  PrefixPrefillArgs a;
  a.q = attention.q;
  a.key = std::move(key);
  a.value = std::move(value);
  a.out = attention.out;
  a.lse = attention.lse;
  a.batch = attention.batch;
  a.params = attention.params;
  a.workspace = attention.workspace;
  return a;
}

void prefix_prefill(Context& ctx, const PrefixPrefillPlan& plan, PagedKvCache& cache, const PrefixPrefillArgs& a,
                    VkCommandBuffer cmd) {
  const auto& p = plan.attention().data();
  const int64_t T = p.num_tokens, Hkv = p.cache.num_kv_heads, D = p.cache.head_size;
  if (a.params.qq_bias) fail("params.qq_bias is given, but prefix_prefill does not support qq_bias");
  check_view(kOp, "key", a.key, {p.q_dtype}, {T, Hkv, D}, {"num_tokens", "num_kv_heads", "head_size"});
  check_view(kOp, "value", a.value, {p.q_dtype}, {T, Hkv, D}, {"num_tokens", "num_kv_heads", "head_size"});
  check_strides(kOp, "key", a.key);
  check_strides(kOp, "value", a.value);
  for (auto [name, v] : {std::pair{"key", &a.key}, std::pair{"value", &a.value}})
    if (v->stride(1) >= (1 << 16))
      fail(std::string(name) + " stride 1 (between heads) = " + std::to_string(v->stride(1)) +
           " elements is not supported: expected below 65536 (a token-major layout [tokens, heads, head_size])");
  std::optional<CheckedWrite> write;   // the fused write, checked before anything is recorded
  if (a.slot_mapping) write = check_write_kv_cache(ctx, cache, a.key, a.value, *a.slot_mapping, kOp);
  const NamedView outputs[] = {{&a.out, "out"}, {a.lse ? &*a.lse : nullptr, "lse"},
                               {a.workspace ? &*a.workspace : nullptr, "workspace"}};
  const NamedView news[] = {{&a.key, "key"}, {&a.value, "value"}, {a.slot_mapping ? &*a.slot_mapping : nullptr, "slot_mapping"}};
  check_apart(kOp, outputs, news);
  // With the fused write the cache is an output too: the attention's inputs
  // must lie apart from it (record_paged_attention checks them).
  const SuffixKv suffix{&a.key, &a.value, a.skip_decode, a.slot_mapping.has_value()};
  as_prefix_prefill([&] { record_paged_attention(ctx, plan.attention(), cache, a, &suffix, cmd); });
  // The fused write: write_kv_cache's kernel, beside the attention (no
  // barrier: it writes the new tokens' slots, the attention reads the
  // context's).
  if (write) record_write_kv_cache(ctx, cache, a.key, a.value, *a.slot_mapping, *write, cmd, ReportingOp::prefix_prefill);
}

void prefix_prefill(Context& ctx, const PrefixPrefillPlan& plan, PagedKvCache& cache, const PrefixPrefillArgs& args) {
  PagedAttentionArgs shape;   // what run_paged_attention_now looks at: the workspace
  shape.workspace = args.workspace;
  // The device's reports too (they are paged_attention's kernels').
  as_prefix_prefill([&] {
    run_paged_attention_now(ctx, plan.attention(), shape, [&](const PagedAttentionArgs& a, VkCommandBuffer cmd) {
      PrefixPrefillArgs with = args;
      with.workspace = a.workspace;
      prefix_prefill(ctx, plan, cache, with, cmd);
    });
  });
}

}  // namespace vkattn
