// The paged-attention runner's case for a shape, as the attention tests
// build them: no timing, everything else the runner's defaults.
#pragma once
#include "runners/paged_attention_runner.hpp"

namespace vkattn::test {

inline tool::PagedAttentionCase attention_case(const std::vector<std::pair<uint32_t, uint32_t>>& seqs, uint32_t hq,
                                               uint32_t hkv, uint32_t d, uint32_t bs, DType cache, KvLayout layout,
                                               uint64_t seed) {
  tool::PagedAttentionCase c;
  c.seqs = seqs;
  c.num_q_heads = hq;
  c.num_kv_heads = hkv;
  c.head_size = d;
  c.block_size = bs;
  c.cache_dtype = cache;
  c.layout = layout;
  c.seed = seed;
  c.timing_repetitions = 0;
  return c;
}

}  // namespace vkattn::test
