#version 460
// Where each lane's elements of a subgroup-scope 16 x 16 f16 (or bf16) A matrix,
// and of an f32 accumulator, lie (abi/matrix_element_order.h): each matrix is
// loaded from a table whose element (r, c) is r * 16 + c, and every lane
// writes what its elements hold.
// One subgroup of 32; the Context runs it once, where the device's subgroups
// are 32 wide.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#include "abi/matrix_element_order.h"
// PA_MATRIX_BF16: the same for a bf16 matrix (the bf16 decode modules'), with
// their element type and its packing (matrix_element_type.glsl).
#include "matrix_element_type.glsl"

layout(local_size_x = 32) in;
layout(set = 0, binding = 1, std430) writeonly buffer Out { uint words[]; };

// The tables in 16-byte elements, as the kernels' (tests/test_shared_matrix_alignment.cpp):
// table holds ELEM pairs (rows of 16 ELEMs: 2 uvec4s), table32 floats (rows: 4 vec4s).
shared uvec4 table[32];
shared vec4 table32[64];

void main() {
  const uint lane = gl_LocalInvocationIndex;
  for (uint w = lane; w < 128u; w += 32u) VKA_SHARED_WORD(table, w) = elem_pair_bits(float(2u * w), float(2u * w + 1u));
  for (uint i = lane; i < 256u; i += 32u) VKA_SHARED_WORD(table32, i) = float(i);
  barrier();
  coopmat<ELEM, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> m;
  coopMatLoad(m, table, 0u, 2u, gl_CooperativeMatrixLayoutRowMajor);
  const uint n = uint(m.length());
  if (lane == 0u) words[0] = n;
  for (uint i = 0u; i < n && i < MEO_ELEMENTS; ++i) words[1u + lane * MEO_ELEMENTS + i] = uint(float(m[i]));
  // An f32 accumulator (the prefill kernel's S), after A's words.
  coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc;
  coopMatLoad(acc, table32, 0u, 4u, gl_CooperativeMatrixLayoutRowMajor);
  const uint na = uint(acc.length());
  if (lane == 0u) words[MEO_ACC_WORDS] = na;
  for (uint i = 0u; i < na && i < MEO_ELEMENTS; ++i) words[MEO_ACC_WORDS + 1u + lane * MEO_ELEMENTS + i] = uint(acc[i]);
}
