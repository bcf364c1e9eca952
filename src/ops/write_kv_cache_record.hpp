// Internal: write_kv_cache's recording, for write_kv_cache itself and for
// prefix_prefill's fused cache write, whose device-side reports (a slot beyond
// the cache) must name the op the caller called.
#pragma once
#include <vkattn/kv_cache.hpp>
#include <vkattn/tensor.hpp>

#include <string_view>

#include "../reporting_op.hpp"

namespace vkattn {
class Context;
namespace detail {

// Throws, naming `op`, whatever record_write_kv_cache would refuse: so that
// prefix_prefill can check its fused write before it records anything.
void check_write_kv_cache(Context& ctx, const PagedKvCache& cache, const TensorView& key, const TensorView& value,
                          const TensorView& slot_mapping, std::string_view op);

void record_write_kv_cache(Context& ctx, PagedKvCache& cache, const TensorView& key, const TensorView& value,
                           const TensorView& slot_mapping, VkCommandBuffer cmd, ReportingOp op);

}  // namespace detail
}  // namespace vkattn
