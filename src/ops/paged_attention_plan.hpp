// Internal: what a PagedAttentionPlan holds.
#pragma once
#include <vkattn/paged_attention.hpp>

#include "schedule/paged_attention_schedule.hpp"

namespace vkattn::detail {

struct PagedAttentionPlanData {
  uint64_t context_id = 0;
  KvCacheConfig cache;
  uint32_t num_q_heads = 0, num_seqs = 0, num_tokens = 0, max_query_len = 0;
  DType q_dtype = DType::f16;
  Path path = Path::scalar;
  bool replay = false;
  Schedule schedule;
};

}  // namespace vkattn::detail
