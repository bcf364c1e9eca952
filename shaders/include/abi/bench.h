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

#ifdef __cplusplus
namespace vkattn::abi {
#endif
#ifdef VKATTN_BENCH_COPY
VKA_SPEC_STRUCT(BenchCopySpec, BENCH_COPY_SPEC)
VKA_PUSH_STRUCT(BenchCopyPush, BENCH_COPY_PUSH)
#endif
#ifdef VKATTN_BENCH_MATMUL
VKA_SPEC_STRUCT(BenchMatmulSpec, BENCH_MATMUL_SPEC)
VKA_PUSH_STRUCT(BenchMatmulPush, BENCH_MATMUL_PUSH)
#endif
#ifdef __cplusplus
}
#endif
#endif
