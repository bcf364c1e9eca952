// Benchmark kernels that measure the device's ceilings (vkattn bench ceilings).
#ifndef VKATTN_ABI_BENCH_H
#define VKATTN_ABI_BENCH_H
#include "common.h"

#define BENCH_COPY_SPEC(X) X(0, COPY_WORKGROUP_SIZE, 256)
#define BENCH_COPY_PUSH(X)  \
  X(uint32_t, num_vec4)     \
  X(uint32_t, grid_x)

// Matrix peak: every workgroup loads one A and one B tile, then runs
// `iterations` multiply-adds into independent accumulators with no memory
// traffic, and stores the accumulators once.
#define BENCH_MATMUL_SPEC(X) X(0, MM_WORKGROUP_SIZE, 128)
#define BENCH_MATMUL_PUSH(X) \
  X(uint32_t, iterations)     \
  X(uint32_t, grid_x)

// Gather (vkattn bench gather): each workgroup reads one block of
// GATHER_BLOCK_VEC4 16-byte words at a random place of a large footprint split
// into chunks, as the paged cache's kernels read its blocks, and writes the
// sum of the block's 32-bit words. `mode` says how a block is addressed
// (GATHER_MODE_*); GATHER_MODE_FILL instead writes the pattern the sums are
// checked against into chunk `fill_chunk` (gather_pattern in the shader).
#define BENCH_GATHER_SPEC(X)       \
  X(0, GATHER_WORKGROUP_SIZE, 256) \
  X(1, GATHER_BLOCK_VEC4, 2048)
#define BENCH_GATHER_PUSH(X)             \
  X(uint64_t, chunk_table)               \
  X(uint64_t, block_addresses)           \
  X(uint32_t, mode)                      \
  X(uint32_t, blocks_per_chunk)          \
  X(uint32_t, gathers)                   \
  X(uint32_t, grid_x)                    \
  X(uint32_t, fill_chunk)                \
  X(uint32_t, fill_vec4)
#define GATHER_BOUND_CHUNKS 16u   /* chunks GATHER_MODE_BOUND binds, at bindings 3.. */
// The 32-bit word `word` (counted from the chunk's start) of chunk `chunk`,
// as GATHER_MODE_FILL writes it: uint32 arithmetic, wrapping, in GLSL and C++.
#define GATHER_PATTERN(chunk, word) (((word) * 0x9E3779B1u) ^ ((chunk) * 0x85EBCA77u + 0x165667B1u))

#ifdef __cplusplus
namespace vkattn::abi {
#endif
#ifdef VKATTN_BENCH_COPY
VKA_SPEC_STRUCT(BenchCopySpec, BENCH_COPY_SPEC)
VKA_PUSH_STRUCT(BenchCopyPush, BENCH_COPY_PUSH)
#endif
#ifdef VKATTN_BENCH_GATHER
// Block ids (binding 1) -> chunk (id / blocks_per_chunk) and block in chunk:
VKA_CONST(GATHER_MODE_TABLE, 0)       // the chunk's base from a table of device addresses (as the cache's kernels)
VKA_CONST(GATHER_MODE_ADDRESSES, 1)   // each block's device address precomputed (no table lookup)
VKA_CONST(GATHER_MODE_BOUND, 2)       // chunks bound as storage buffers (no device addresses)
VKA_CONST(GATHER_MODE_FILL, 3)        // write the pattern into chunk fill_chunk's first fill_vec4 words
VKA_SPEC_STRUCT(BenchGatherSpec, BENCH_GATHER_SPEC)
VKA_PUSH_STRUCT(BenchGatherPush, BENCH_GATHER_PUSH)
#endif
#ifdef VKATTN_BENCH_MATMUL
VKA_SPEC_STRUCT(BenchMatmulSpec, BENCH_MATMUL_SPEC)
VKA_PUSH_STRUCT(BenchMatmulPush, BENCH_MATMUL_PUSH)
#endif
#ifdef __cplusplus
}
#endif
#endif
