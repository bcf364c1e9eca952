// Float64 reference of the paged KV cache: where each element lives in each
// layout (written from vLLM's layout definitions, independently of the
// library's own addressing code) and what write_kv_cache must store.
#pragma once
#include <cstdint>
#include <vector>

#include "tensor_data.hpp"

namespace vkattn::ref {

enum class KvLayoutRef { nhd, hnd, split };

struct KvGeometry {
  uint32_t num_blocks = 0, block_size = 0, num_kv_heads = 0, head_size = 0;
  ElemType dtype = ElemType::f16;
  KvLayoutRef layout = KvLayoutRef::nhd;
  uint64_t block_elems() const { return uint64_t(block_size) * num_kv_heads * head_size; }
};

// Index of element (block, token t, head h, dim d) in the whole K (is_value
// false) or V cache, counting elements from the start of block 0.
uint64_t kv_element_index(const KvGeometry& g, bool is_value, uint32_t block, uint32_t t, uint32_t h, uint32_t d);

// One expected cache element.
struct ExpectedElement {
  uint64_t byte_offset;   // in the whole K or V cache
  bool is_value;
  double exact;           // value / scale, before rounding to the cache dtype
};

// Everything write_kv_cache must store: key and value are [n, H, D] (values as
// the kernel reads them), slots[n] (negative = skipped; slots beyond the cache
// are skipped too: the kernel reports them instead).
std::vector<ExpectedElement> expected_kv_writes(const KvGeometry& g, const std::vector<double>& key,
                                                const std::vector<double>& value, const std::vector<int64_t>& slots,
                                                double k_scale, double v_scale);

}  // namespace vkattn::ref
