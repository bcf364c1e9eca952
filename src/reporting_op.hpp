// Internal: the op a dispatch belongs to, which its device-side reports name
// (dispatch.hpp takes it; the Context keeps a status slot per op for recorded
// work). A prefix_prefill's paged-attention and cache-write dispatches are
// prefix_prefill's.
#pragma once
#include <cstdint>
#include <string_view>

namespace vkattn::detail {

enum class ReportingOp : uint32_t { paged_attention, prefix_prefill, block_sparse_attention, build_block_mask, write_kv_cache, bench };
inline constexpr uint32_t kReportingOps = 6;
std::string_view reporting_op_name(ReportingOp op);

}  // namespace vkattn::detail
