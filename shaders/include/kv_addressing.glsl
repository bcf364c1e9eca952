// Where an element of the paged KV cache lives. One implementation for every
// kernel that reads or writes the cache; the host mirror is
// PagedKvCache::element_in_block (src/kv_cache.cpp).
//
// The cache is split into chunks (one allocation each, never larger than the
// device allows), each holding blocks_per_chunk whole blocks. A table of
// uint64 chunk addresses (K chunks first, then V chunks) is reached through a
// buffer device address.
#ifndef VKATTN_KV_ADDRESSING_GLSL
#define VKATTN_KV_ADDRESSING_GLSL
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#include "abi/common.h"

layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer VkaChunkTable { uint64_t address[]; };

// Index of element (token t, head h, dim d) inside a block of the given layout,
// as the sum of a part of the slot and head and a part of the dims, so that a
// kernel can locate a key's slot once and add each piece's dims to it.
// x: elements per 16 bytes (the split layout's innermost K dimension).
uint vka_kv_slot_in_block(uint layout_id, bool is_value, uint t, uint h, uint block_size, uint num_heads,
                          uint head_size, uint x) {
  if (layout_id == KV_LAYOUT_NHD) return (t * num_heads + h) * head_size;
  if (layout_id == KV_LAYOUT_HND) return (h * block_size + t) * head_size;
  // KV_LAYOUT_SPLIT: K [head][head_size / x][block_size][x], V [head][head_size][block_size]
  if (is_value) return h * head_size * block_size + t;
  return (h * (head_size / x) * block_size + t) * x;
}
uint vka_kv_dims_in_block(uint layout_id, bool is_value, uint d, uint block_size, uint x) {
  if (layout_id == KV_LAYOUT_NHD || layout_id == KV_LAYOUT_HND) return d;
  if (is_value) return d * block_size;
  return (d / x) * block_size * x + d % x;
}
uint vka_kv_element_in_block(uint layout_id, bool is_value, uint t, uint h, uint d,
                             uint block_size, uint num_heads, uint head_size, uint x) {
  return vka_kv_slot_in_block(layout_id, is_value, t, h, block_size, num_heads, head_size, x) +
         vka_kv_dims_in_block(layout_id, is_value, d, block_size, x);
}

// Chunk holding `block`, and the block's byte offset inside it.
void vka_kv_locate_block(uint block, uint blocks_per_chunk, uint64_t block_bytes, out uint chunk, out uint64_t offset) {
  chunk = block / blocks_per_chunk;
  offset = uint64_t(block - chunk * blocks_per_chunk) * block_bytes;
}

// Device address of the first byte of `block` in the K (is_value false) or V cache.
uint64_t vka_kv_block_address(uint64_t chunk_table, uint num_k_chunks, uint blocks_per_chunk,
                              uint64_t block_bytes, bool is_value, uint block) {
  uint chunk;
  uint64_t offset;
  vka_kv_locate_block(block, blocks_per_chunk, block_bytes, chunk, offset);
  return VkaChunkTable(chunk_table).address[(is_value ? num_k_chunks : 0u) + chunk] + offset;
}
#endif
