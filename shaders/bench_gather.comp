#version 460
// Gather ceiling (vkattn bench gather): random blocks of a footprint of many
// GiB, read as the paged cache's kernels read its blocks, to find what the
// size of the footprint, its allocations and the way a block is addressed
// cost. Each workgroup reads one block of GATHER_BLOCK_VEC4 16-byte words (all
// of its loads in flight at once) and writes the sum of its 32-bit words,
// which the host checks against GATHER_PATTERN. Modes: abi/bench.h.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#define VKATTN_BENCH_GATHER
#include "abi/bench.h"
#include "grid.glsl"
#include "status.glsl"

layout(local_size_x_id = 0) in;
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer ChunkTable { uint64_t base[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Vec4At { uvec4 v; };
layout(set = 0, binding = 1, std430) readonly buffer BlockIds { uint block_id[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Sums { uint block_sum[]; };
#define BOUND_CHUNK(i) layout(set = 0, binding = 3 + i, std430) buffer Bound##i { uvec4 w[]; } bound##i;
BOUND_CHUNK(0) BOUND_CHUNK(1) BOUND_CHUNK(2) BOUND_CHUNK(3) BOUND_CHUNK(4) BOUND_CHUNK(5) BOUND_CHUNK(6) BOUND_CHUNK(7)
BOUND_CHUNK(8) BOUND_CHUNK(9) BOUND_CHUNK(10) BOUND_CHUNK(11) BOUND_CHUNK(12) BOUND_CHUNK(13) BOUND_CHUNK(14) BOUND_CHUNK(15)

const uint PER_INVOCATION = (GATHER_BLOCK_VEC4 + GATHER_WORKGROUP_SIZE - 1u) / GATHER_WORKGROUP_SIZE;
shared uint partial[32];

// Word i of bound chunk c (the same c for the whole workgroup).
uvec4 bound_load(uint c, uint i) {
  switch (c) {
    case 0u: return bound0.w[i];
    case 1u: return bound1.w[i];
    case 2u: return bound2.w[i];
    case 3u: return bound3.w[i];
    case 4u: return bound4.w[i];
    case 5u: return bound5.w[i];
    case 6u: return bound6.w[i];
    case 7u: return bound7.w[i];
    case 8u: return bound8.w[i];
    case 9u: return bound9.w[i];
    case 10u: return bound10.w[i];
    case 11u: return bound11.w[i];
    case 12u: return bound12.w[i];
    case 13u: return bound13.w[i];
    case 14u: return bound14.w[i];
    default: return bound15.w[i];
  }
}

void fill(uint linear) {
  const uint64_t base = ChunkTable(pc.chunk_table).base[pc.fill_chunk];
  [[unroll]] for (uint k = 0; k < 4u; ++k) {
    const uint i = (linear * 4u + k) * GATHER_WORKGROUP_SIZE + gl_LocalInvocationIndex;
    if (i >= pc.fill_vec4) continue;
    uvec4 w;
    [[unroll]] for (uint e = 0; e < 4u; ++e) w[e] = GATHER_PATTERN(pc.fill_chunk, 4u * i + e);
    Vec4At(base + uint64_t(i) * 16ul).v = w;
  }
}

void main() {
  const uint linear = vka_linear_workgroup(pc.grid_x);
  if (pc.mode == GATHER_MODE_FILL) {
    fill(linear);
    return;
  }
  if (linear >= pc.gathers) return;
  if (gl_NumSubgroups > 32u) {   // partial[] holds 32
    if (gl_LocalInvocationIndex == 0u) vka_report(STATUS_SUBGROUP_SIZE, gl_SubgroupSize, GATHER_WORKGROUP_SIZE / 32u, 0u);
    return;
  }
  const uint id = block_id[linear];
  const uint chunk = id / pc.blocks_per_chunk, first = (id % pc.blocks_per_chunk) * GATHER_BLOCK_VEC4;
  uint64_t at = 0ul;
  if (pc.mode == GATHER_MODE_TABLE) at = ChunkTable(pc.chunk_table).base[chunk] + uint64_t(first) * 16ul;
  else if (pc.mode == GATHER_MODE_ADDRESSES) at = ChunkTable(pc.block_addresses).base[linear];
  uvec4 v[PER_INVOCATION];
  [[unroll]] for (uint k = 0; k < PER_INVOCATION; ++k) {
    const uint i = k * GATHER_WORKGROUP_SIZE + gl_LocalInvocationIndex;
    v[k] = uvec4(0);
    if (i >= GATHER_BLOCK_VEC4) continue;
    if (pc.mode == GATHER_MODE_BOUND) v[k] = bound_load(chunk, first + i);
    else v[k] = Vec4At(at + uint64_t(i) * 16ul).v;
  }
  uint sum = 0u;
  [[unroll]] for (uint k = 0; k < PER_INVOCATION; ++k) sum += v[k].x + v[k].y + v[k].z + v[k].w;
  sum = subgroupAdd(sum);
  if (subgroupElect()) partial[gl_SubgroupID] = sum;
  barrier();
  if (gl_LocalInvocationIndex == 0u) {
    uint total = 0u;
    for (uint s = 0; s < gl_NumSubgroups; ++s) total += partial[s];
    block_sum[linear] = total;
  }
}
