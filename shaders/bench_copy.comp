#version 460
// Copy ceiling: a device-wide copy of 16-byte words, the fastest plain
// read+write a compute shader does. Bytes counted: read + written.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_control_flow_attributes : require
#define VKATTN_BENCH_COPY
#include "abi/bench.h"
#include "grid.glsl"
#include "status.glsl"

layout(local_size_x_id = 0) in;
layout(set = 0, binding = 1, std430) readonly buffer Src { uvec4 src[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Dst { uvec4 dst[]; };

void main() {
  // Each workgroup copies 4 consecutive chunks of COPY_WORKGROUP_SIZE words:
  // several loads in flight per invocation.
  const uint base = vka_linear_workgroup(pc.grid_x) * COPY_WORKGROUP_SIZE * 4u + gl_LocalInvocationIndex;
  uvec4 v[4];
  [[unroll]] for (uint i = 0; i < 4u; ++i) {
    uint idx = base + i * COPY_WORKGROUP_SIZE;
    if (idx < pc.num_vec4) v[i] = src[idx];
  }
  [[unroll]] for (uint i = 0; i < 4u; ++i) {
    uint idx = base + i * COPY_WORKGROUP_SIZE;
    if (idx < pc.num_vec4) dst[idx] = v[i];
  }
}
