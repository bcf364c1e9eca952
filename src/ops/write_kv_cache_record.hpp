// Internal: write_kv_cache's recording, for write_kv_cache itself and for
// prefix_prefill's fused cache write, whose device-side reports (a slot beyond
// the cache) must name the op the caller called.
#pragma once
#include <vkattn/kv_cache.hpp>
#include <vkattn/tensor.hpp>

#include <string_view>

#include "../dispatch.hpp"
#include "../reporting_op.hpp"

namespace vkattn {
class Context;
namespace detail {

// The write's views, checked and bound.
struct CheckedWrite {
  BoundView key, value, slot_mapping;
};

// Throws, naming `op`, whatever the write cannot take; else its views bound.
// A separate step so that prefix_prefill checks its fused write before it
// records anything.
CheckedWrite check_write_kv_cache(Context& ctx, const PagedKvCache& cache, const TensorView& key, const TensorView& value,
                                  const TensorView& slot_mapping, std::string_view op);

// Records the write that check_write_kv_cache accepted (`checked`).
void record_write_kv_cache(Context& ctx, PagedKvCache& cache, const TensorView& key, const TensorView& value,
                           const TensorView& slot_mapping, const CheckedWrite& checked, VkCommandBuffer cmd, ReportingOp op);

}  // namespace detail
}  // namespace vkattn
