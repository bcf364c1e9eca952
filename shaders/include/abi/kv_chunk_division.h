// Which chunk of the paged KV cache holds a block: block / blocks_per_chunk,
// as a multiply and a shift by a multiplier the host computes once per call.
// A division by a value known only at run time is a long instruction
// sequence on GPUs, and the prefill kernel's key loop locates a block for
// every key (DEVELOPERS.md, "The report through a register, and the chunk
// division by a multiplier"). Written in the subset of C++ and GLSL the two
// share, so that the host's multiplier and the kernels' use of it are one
// formula.
//
// Exact for every block < 2^31 (a cache holds fewer than 2^31 slots,
// PagedKvCache's check) and every blocks_per_chunk >= 1: with l =
// ceil(log2(blocks_per_chunk)) and magic = ceil(2^(31 + l) / blocks_per_chunk)
// (< 2^32), block * magic / 2^(31 + l) exceeds block / blocks_per_chunk by
// less than block / 2^(31 + l) < 1 / blocks_per_chunk, too little to reach
// the next integer.
#ifndef VKATTN_ABI_KV_CHUNK_DIVISION_H
#define VKATTN_ABI_KV_CHUNK_DIVISION_H
#include "common.h"

#ifdef __cplusplus
#include <bit>
namespace vkattn::abi {
using uint = uint32_t;
inline uint vka_kv_chunk_shift(uint blocks_per_chunk) { return 31u + uint(std::bit_width(blocks_per_chunk - 1u)); }
#else
// findMSB(0) is -1: a chunk of one block shifts by 31.
uint vka_kv_chunk_shift(uint blocks_per_chunk) { return uint(31 + findMSB(blocks_per_chunk - 1u) + 1); }
#endif

// block / blocks_per_chunk, for block < 2^31 and magic = vka_kv_chunk_magic(blocks_per_chunk).
#ifdef __cplusplus
inline
#endif
uint vka_kv_chunk_of(uint block, uint blocks_per_chunk, uint magic) {
  return uint((uint64_t(block) * uint64_t(magic)) >> vka_kv_chunk_shift(blocks_per_chunk));
}

#ifdef __cplusplus
// The host's multiplier for blocks_per_chunk (>= 1), in every call's push constants.
inline uint vka_kv_chunk_magic(uint blocks_per_chunk) {
  return uint(((uint64_t(1) << vka_kv_chunk_shift(blocks_per_chunk)) + blocks_per_chunk - 1u) / blocks_per_chunk);
}
}  // namespace vkattn::abi
#endif
#endif
