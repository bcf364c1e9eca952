// Internal: what a PagedAttentionPlan holds (tests reach the metadata through it).
#pragma once
#include <vkattn/paged_attention.hpp>

#include <vector>

namespace vkattn::detail {

struct PagedAttentionPlanData {
  Context* ctx = nullptr;
  KvCacheConfig cache;
  uint32_t num_q_heads = 0, num_tokens = 0, num_seqs = 0, num_segments = 1, num_items = 0;
  uint32_t bm = 16, bn = 32, workgroup = 128;
  DType q_dtype = DType::f16;
  Path path = Path::scalar;
  bool split = false;
  PagedAttentionOptions options;
  Buffer meta;      // abi::PagedAttentionMeta, then the arrays it points to
  Buffer scratch;   // split-KV partial results
  Buffer dummy;     // bound where an optional view is absent
};

// Segments of an automatically split plan (1: no split), from the key counts
// of the work items before any split: split when they give fewer than 2
// workgroups per multiprocessor, and on the matrix paths when fewer than 5
// even ones; the rule per kernel is explained where it is defined.
uint32_t automatic_segments(Path path, uint32_t multiprocessors, const std::vector<int64_t>& item_keys);

// Subgroups per workgroup of the matrix kernel (at most max_subgroups, which
// its shared memory allows: 8, 4 or 2), from the work items' key counts (after
// any split): the most for at most one item per multiprocessor, 2 for many
// even items, else 4.
uint32_t matrix_subgroups(uint32_t max_subgroups, uint32_t multiprocessors, const std::vector<int64_t>& item_keys);

}  // namespace vkattn::detail
