// The contract between host and shaders, written once and included by both
// C++ (src/) and GLSL (shaders/). Each kernel's header lists its specialization
// constants and push constants as X-macros; the macros below expand a list
// into a C++ struct on the host and into declarations in GLSL, so the two can
// never disagree on order, type or offset.
//
// Push-constant fields use scalar types only (uint32_t, int32_t, float,
// uint64_t): std430 and C++ align scalars identically, so the struct layout is
// the block layout. Put 64-bit fields first to avoid padding surprises.
#ifndef VKATTN_ABI_COMMON_H
#define VKATTN_ABI_COMMON_H

#ifdef __cplusplus
#include <cstdint>
#define VKA_CONST(name, value) inline constexpr uint32_t name = value;
#define VKA_SPEC_FIELD(id, name, def) uint32_t name = def;
#define VKA_PUSH_FIELD(type, name) type name;
// struct NAME { uint32_t A = def; ... }: field i is constant_id i.
#define VKA_SPEC_STRUCT(NAME, LIST) struct NAME { LIST(VKA_SPEC_FIELD) };
#define VKA_PUSH_STRUCT(NAME, LIST) \
  struct NAME { LIST(VKA_PUSH_FIELD) }; \
  static_assert(sizeof(NAME) <= 128, #NAME " must fit the 128 bytes of push constants every device offers");
#else
#define VKA_CONST(name, value) const uint name = value;
#define VKA_SPEC_DECL(id, name, def) layout(constant_id = id) const uint name = def;
#define VKA_PUSH_FIELD(type, name) type name;
#define VKA_SPEC_STRUCT(NAME, LIST) LIST(VKA_SPEC_DECL)
#define VKA_PUSH_STRUCT(NAME, LIST) layout(push_constant, std430) uniform NAME { LIST(VKA_PUSH_FIELD) } pc;
#endif

#ifdef __cplusplus
namespace vkattn::abi {
#endif

// Element types, as stored in buffers.
VKA_CONST(DTYPE_F16, 0)
VKA_CONST(DTYPE_BF16, 1)
VKA_CONST(DTYPE_F32, 2)
VKA_CONST(DTYPE_FP8_E4M3, 3)
VKA_CONST(DTYPE_FP8_E5M2, 4)
VKA_CONST(DTYPE_I32, 5)
VKA_CONST(DTYPE_I64, 6)

// Paged KV-cache layouts (see kv_addressing.glsl for the element order).
VKA_CONST(KV_LAYOUT_NHD, 0)    // [blocks, block_size, heads, head_size]
VKA_CONST(KV_LAYOUT_HND, 1)    // [blocks, heads, block_size, head_size]
VKA_CONST(KV_LAYOUT_SPLIT, 2)  // vLLM: K [blocks, heads, head_size/x, block_size, x], V [blocks, heads, head_size, block_size]

// A cache's chunks at most (K and V each): PagedKvCache refuses more.
VKA_CONST(KV_MAX_CHUNKS, 64)
// Where, in bytes from the start of a cache's chunk table, a region of zeros
// one block of one head long starts (after the largest table: K and V
// entries of 8 bytes for KV_MAX_CHUNKS chunks each). The prefill kernel
// points the keys a tile holds outside its item there, so that its loads
// need no test for them and read finite values (kv_source.glsl). A macro,
// not a VKA_CONST, so that the modules that do not use it stay as they were.
#define KV_CHUNK_TABLE_ZEROS_OFFSET 1024u
// The zeros' length in bytes: one block of one head.
#define KV_CHUNK_TABLE_ZEROS_BYTES(BLOCK_SIZE, HEAD_SIZE, ESIZE) ((BLOCK_SIZE) * (HEAD_SIZE) * (ESIZE))
// Where the cache's k_scale and v_scale (two f32) follow the zeros, whose
// length in bytes is ZEROS_BYTES (KV_CHUNK_TABLE_ZEROS_BYTES): for the kernels
// whose push constants have no room for them (block-sparse attention over
// an fp8 cache).
#define KV_CHUNK_TABLE_SCALES_OFFSET(ZEROS_BYTES) (KV_CHUNK_TABLE_ZEROS_OFFSET + ((ZEROS_BYTES) + 15u) / 16u * 16u)

// Error codes a kernel records in the context's status buffer (status.glsl).
// Word 0 holds the code of the first error; words 1..3 its details.
VKA_CONST(STATUS_OK, 0)
VKA_CONST(STATUS_SLOT_OUT_OF_RANGE, 1)   // details: token index, slot (low, high word)
VKA_CONST(STATUS_BLOCK_OUT_OF_RANGE, 2)  // details: sequence, block-table column, entry
VKA_CONST(STATUS_SUBGROUP_SIZE, 3)       // details: the subgroup size the kernel got, the one it was built for
VKA_CONST(STATUS_QUERY_START_LOC, 4)     // details: sequence, query_start_loc[s], query_start_loc[s + 1]
VKA_CONST(STATUS_SEQ_LEN, 5)             // details: sequence, seq_len, query_len
VKA_CONST(STATUS_SEQ_LEN_TABLE, 6)       // details: sequence, seq_len, the table's capacity (blocks * block_size)
VKA_CONST(STATUS_QUERY_LEN_PLAN, 7)      // details: sequence, query_len, the plan's max_query_len
VKA_CONST(STATUS_PARAMETER, 8)           // details: which (0 alibi_slopes, 1 sinks), the head, the value's bits
VKA_CONST(STATUS_BLOCK_MASK_INDEX, 9)   // block_sparse_attention; details: mask row, list entry (| 2^31 in the full list), index
VKA_CONST(STATUS_BLOCK_MASK_COUNT, 10)  // block_sparse_attention; details: mask row (| 2^31 for the full list's count), the lists' capacity, count
VKA_CONST(STATUS_SPLIT_COUNTER, 11)       // paged_attention; details: work item, its arrival counter before this arrival, segments
// A status slot's words: [0] the code (STATUS_OK while empty), [1..3] its
// details, [STATUS_CLAIM] the claim. A kernel claims the slot, writes the
// details, then publishes the code; the host reads the code, then the
// details, clears words 0..3 and releases the claim last, so that no kernel
// writes details while a report is read or cleared (status.glsl).
VKA_CONST(STATUS_CLAIM, 4)
VKA_CONST(STATUS_WORDS, 5)

#ifdef __cplusplus
}  // namespace vkattn::abi
#endif
#endif
