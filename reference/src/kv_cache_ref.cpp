#include "vkattn_ref/kv_cache_ref.hpp"

namespace vkattn::ref {

uint64_t kv_element_index(const KvGeometry& g, bool is_value, uint32_t block, uint32_t t, uint32_t h, uint32_t d) {
  const uint64_t BS = g.block_size, H = g.num_kv_heads, D = g.head_size;
  const uint64_t base = uint64_t(block) * g.block_elems();
  switch (g.layout) {
    case KvLayoutRef::nhd:   // [blocks, block_size, heads, head_size]
      return base + (t * H + h) * D + d;
    case KvLayoutRef::hnd:   // [blocks, heads, block_size, head_size]
      return base + (h * BS + t) * D + d;
    case KvLayoutRef::split:
      if (is_value)          // [blocks, heads, head_size, block_size]
        return base + (h * D + d) * BS + t;
      {                      // [blocks, heads, head_size / x, block_size, x]
        const uint64_t x = 16 / elem_size(g.dtype);
        const uint64_t outer = d / x, inner = d % x;
        return base + ((h * (D / x) + outer) * BS + t) * x + inner;
      }
  }
  return 0;
}

std::vector<ExpectedElement> expected_kv_writes(const KvGeometry& g, const std::vector<double>& key,
                                                const std::vector<double>& value, const std::vector<int64_t>& slots,
                                                double k_scale, double v_scale) {
  const bool fp8 = g.dtype == ElemType::fp8_e4m3 || g.dtype == ElemType::fp8_e5m2;
  const double ks = fp8 ? k_scale : 1.0, vs = fp8 ? v_scale : 1.0;
  const uint64_t es = elem_size(g.dtype);
  const int64_t num_slots = int64_t(g.num_blocks) * g.block_size;
  std::vector<ExpectedElement> out;
  const uint32_t H = g.num_kv_heads, D = g.head_size;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] < 0 || slots[i] >= num_slots) continue;
    uint32_t block = static_cast<uint32_t>(slots[i] / g.block_size);
    uint32_t t = static_cast<uint32_t>(slots[i] % g.block_size);
    for (uint32_t h = 0; h < H; ++h)
      for (uint32_t d = 0; d < D; ++d) {
        std::size_t src = (i * H + h) * D + d;
        out.push_back({kv_element_index(g, false, block, t, h, d) * es, false, key[src] / ks});
        out.push_back({kv_element_index(g, true, block, t, h, d) * es, true, value[src] / vs});
      }
  }
  return out;
}

}  // namespace vkattn::ref
