// write_kv_cache: scatter new tokens' K and V into the paged cache.
#ifndef VKATTN_ABI_WRITE_KV_CACHE_H
#define VKATTN_ABI_WRITE_KV_CACHE_H
#include "common.h"

// Specialization constants: everything that changes code shape.
// WKV_VECTOR_LOADS: the inputs' offsets and strides are multiples of 8
// elements (and 16 bytes), so 8 elements load as whole 16-byte words.
#define WRITE_KV_CACHE_SPEC(X)   \
  X(0, WKV_NUM_KV_HEADS, 1)      \
  X(1, WKV_HEAD_SIZE, 128)       \
  X(2, WKV_BLOCK_SIZE, 16)       \
  X(3, WKV_LAYOUT, 0)            \
  X(4, WKV_CACHE_DTYPE, 0)       \
  X(5, WKV_INPUT_DTYPE, 0)       \
  X(6, WKV_SLOT_DTYPE, 6)        \
  X(7, WKV_WORKGROUP_SIZE, 128)  \
  X(8, WKV_VECTOR_LOADS, 0)

// Elements an invocation takes per step: 16 into an fp8 cache (a 16-byte
// store; two 8-element input loads), 8 otherwise. head_size is a multiple of 16.
#define WKV_PIECE_ELEMENTS(FP8_CACHE) ((FP8_CACHE) ? 16u : 8u)

// Push constants: per-call sizes, offsets (in elements) and strides.
#define WRITE_KV_CACHE_PUSH(X)             \
  X(uint64_t, chunk_table_address)         \
  X(uint32_t, num_tokens)                  \
  X(uint32_t, num_blocks)                  \
  X(uint32_t, blocks_per_chunk)            \
  X(uint32_t, chunk_magic)   /* vka_kv_chunk_magic(blocks_per_chunk) */ \
  X(uint32_t, num_k_chunks)                \
  X(uint32_t, key_offset)                  \
  X(uint32_t, key_token_stride)            \
  X(uint32_t, key_head_stride)             \
  X(uint32_t, value_offset)                \
  X(uint32_t, value_token_stride)          \
  X(uint32_t, value_head_stride)           \
  X(uint32_t, slot_offset)                 \
  X(uint32_t, grid_x)                      \
  X(float, k_inv_scale)                    \
  X(float, v_inv_scale)

#ifdef __cplusplus
namespace vkattn::abi {
#endif
VKA_SPEC_STRUCT(WriteKvCacheSpec, WRITE_KV_CACHE_SPEC)
VKA_PUSH_STRUCT(WriteKvCachePush, WRITE_KV_CACHE_PUSH)
#ifdef __cplusplus
}
#endif
#endif
