// Where an element of the paged KV cache lives. One implementation for every
// kernel that reads or writes the cache; an element's index in its block is
// abi/kv_element_index.h's, which the host's PagedKvCache::element_in_block
// calls too.
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

#include "abi/kv_element_index.h"
#include "abi/kv_chunk_division.h"

// Chunk holding `block` (< 2^31), and the block's byte offset inside it;
// chunk_magic is vka_kv_chunk_magic(blocks_per_chunk), the host's.
void vka_kv_locate_block(uint block, uint blocks_per_chunk, uint chunk_magic, uint64_t block_bytes, out uint chunk,
                         out uint64_t offset) {
  chunk = vka_kv_chunk_of(block, blocks_per_chunk, chunk_magic);
  offset = uint64_t(block - chunk * blocks_per_chunk) * block_bytes;
}

// Device address of the first byte of `block` in the K (is_value false) or V cache.
uint64_t vka_kv_block_address(uint64_t chunk_table, uint num_k_chunks, uint blocks_per_chunk, uint chunk_magic,
                              uint64_t block_bytes, bool is_value, uint block) {
  uint chunk;
  uint64_t offset;
  vka_kv_locate_block(block, blocks_per_chunk, chunk_magic, block_bytes, chunk, offset);
  return VkaChunkTable(chunk_table).address[(is_value ? num_k_chunks : 0u) + chunk] + offset;
}
#endif
