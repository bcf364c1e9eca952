// Index of an element of the paged KV cache inside its block, for every
// layout: one formula, compiled into the kernels (kv_addressing.glsl) and
// called by the host (PagedKvCache::element_in_block). Written in the subset
// of C++ and GLSL the two share: `uint` is uint32_t on the host, the
// kernels' 32-bit arithmetic, which a block's elements fit (a block lies in
// one chunk, one allocation of at most 4 GiB).
#ifndef VKATTN_ABI_KV_ELEMENT_INDEX_H
#define VKATTN_ABI_KV_ELEMENT_INDEX_H
#include "common.h"

#ifdef __cplusplus
namespace vkattn::abi {
using uint = uint32_t;
#define VKA_FUNC inline
#else
#define VKA_FUNC
#endif

// Index of element (token t, head h, dim d) inside a block of the given layout,
// as the sum of a part of the slot and head and a part of the dims, so that a
// kernel can locate a key's slot once and add each piece's dims to it.
// x: elements per 16 bytes (the split layout's innermost K dimension).
VKA_FUNC uint vka_kv_slot_in_block(uint layout_id, bool is_value, uint t, uint h, uint block_size,
                                   uint num_heads, uint head_size, uint x) {
  if (layout_id == KV_LAYOUT_NHD) return (t * num_heads + h) * head_size;
  if (layout_id == KV_LAYOUT_HND) return (h * block_size + t) * head_size;
  // KV_LAYOUT_SPLIT: K [head][head_size / x][block_size][x], V [head][head_size][block_size]
  if (is_value) return h * head_size * block_size + t;
  return (h * (head_size / x) * block_size + t) * x;
}
VKA_FUNC uint vka_kv_dims_in_block(uint layout_id, bool is_value, uint d, uint block_size, uint x) {
  if (layout_id == KV_LAYOUT_NHD || layout_id == KV_LAYOUT_HND) return d;
  if (is_value) return d * block_size;
  return (d / x) * block_size * x + d % x;
}
VKA_FUNC uint vka_kv_element_in_block(uint layout_id, bool is_value, uint t, uint h, uint d,
                                      uint block_size, uint num_heads, uint head_size, uint x) {
  return vka_kv_slot_in_block(layout_id, is_value, t, h, block_size, num_heads, head_size, x) +
         vka_kv_dims_in_block(layout_id, is_value, d, block_size, x);
}

#ifdef __cplusplus
}  // namespace vkattn::abi
#endif
#endif
