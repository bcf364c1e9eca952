// Internal: write_kv_cache's recording, for write_kv_cache itself and for
// prefix_prefill's fused cache write, whose device-side reports (a slot beyond
// the cache) must name the op the caller called.
#pragma once
#include <vkattn/kv_cache.hpp>
#include <vkattn/tensor.hpp>

#include "../reporting_op.hpp"

namespace vkattn {
class Context;
namespace detail {

void record_write_kv_cache(Context& ctx, PagedKvCache& cache, const TensorView& key, const TensorView& value,
                           const TensorView& slot_mapping, VkCommandBuffer cmd, ReportingOp op);

}  // namespace detail
}  // namespace vkattn
