#version 460
// Matrix-rate ceiling of each path, with no memory traffic in the loop.
//   coopmat2: workgroup-scope 128x128 accumulator, A 128x16, B 16x128 (NV_cooperative_matrix2)
//   coopmat:  per subgroup, four 16x16 f32 accumulators fed by one 16x16 A and B (KHR)
//   scalar:   f16vec4 FMAs, four independent chains per invocation
// Each matrix path also has a bf16 module (MM_BF16).
// Inputs hold small integers so every result is exact: the host checks
// out = iterations * (A x B) (matrix paths) or +-4 * iterations (scalar chains).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_16bit_storage : require
#define VKATTN_BENCH_MATMUL
#include "abi/bench.h"
#include "grid.glsl"
#include "status.glsl"

layout(local_size_x_id = 0) in;
// MM_BF16: the bf16 rate (matrix paths; the host fills A and B with bf16).
#if MM_BF16
#extension GL_EXT_bfloat16 : require
#define ELEM bfloat16_t
#else
#define ELEM float16_t
#endif
layout(set = 0, binding = 1, std430) readonly buffer A { ELEM a[]; };
layout(set = 0, binding = 2, std430) readonly buffer B { ELEM b[]; };
layout(set = 0, binding = 3, std430) writeonly buffer C { float c[]; };

#if VKATTN_PATH == 2
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
const uint TM = 128, TN = 128, TK = 16;
void main() {
  // All workgroups read the same A (TM x TK) and B (TK x TN) and write their own C tile.
  coopmat<ELEM, gl_ScopeWorkgroup, TM, TK, gl_MatrixUseA> ma;
  coopmat<ELEM, gl_ScopeWorkgroup, TK, TN, gl_MatrixUseB> mb;
  coopMatLoad(ma, a, 0, TK, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(mb, b, 0, TN, gl_CooperativeMatrixLayoutRowMajor);
  coopmat<float, gl_ScopeWorkgroup, TM, TN, gl_MatrixUseAccumulator> acc =
      coopmat<float, gl_ScopeWorkgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);
  for (uint i = 0; i < pc.iterations; ++i) acc = coopMatMulAdd(ma, mb, acc);
  const uint wg = vka_linear_workgroup(pc.grid_x);
  coopMatStore(acc, c, wg * TM * TN, TN, gl_CooperativeMatrixLayoutRowMajor);
}
#elif VKATTN_PATH == 1
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
void main() {
  coopmat<ELEM, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> ma;
  coopmat<ELEM, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> mb;
  coopMatLoad(ma, a, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(mb, b, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
  coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[4];
  [[unroll]] for (uint j = 0; j < 4u; ++j) acc[j] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
  for (uint i = 0; i < pc.iterations; ++i) {
    [[unroll]] for (uint j = 0; j < 4u; ++j) acc[j] = coopMatMulAdd(ma, mb, acc[j]);
  }
  const uint sg = vka_linear_workgroup(pc.grid_x) * gl_NumSubgroups + gl_SubgroupID;
  [[unroll]] for (uint j = 0; j < 4u; ++j) coopMatStore(acc[j], c, (sg * 4u + j) * 256u, 16, gl_CooperativeMatrixLayoutRowMajor);
}
#else
void main() {
  // Four independent f16vec4 chains acc += x * y (x, y read at run time so
  // nothing folds). The host makes x * y = 1 per lane and keeps iterations
  // <= 2048, so every partial sum is an exact f16 integer.
  const uint inv = vka_linear_workgroup(pc.grid_x) * MM_WORKGROUP_SIZE + gl_LocalInvocationIndex;
  const f16vec4 x = f16vec4(a[0], a[1], a[2], a[3]);
  const f16vec4 y = f16vec4(b[0], b[1], b[2], b[3]);
  f16vec4 acc[4] = f16vec4[4](f16vec4(0), f16vec4(0), f16vec4(0), f16vec4(0));
  for (uint i = 0; i < pc.iterations; ++i) {
    acc[0] = fma(x, y, acc[0]);
    acc[1] = fma(x, -y, acc[1]);
    acc[2] = fma(-x, y, acc[2]);
    acc[3] = fma(x, y, acc[3]);
  }
  [[unroll]] for (uint j = 0; j < 4u; ++j)
    c[inv * 4u + j] = float(acc[j].x) + float(acc[j].y) + float(acc[j].z) + float(acc[j].w);
}
#endif
