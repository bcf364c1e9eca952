#version 460
// FlexAttention's create_block_mask on the device: for each mask row (z, h,
// q block), the mask mods of block_sparse_mods.glsl (the very functions the
// attention kernels apply) over every (q, kv) pair of each kv block inside
// the lengths; a block where every pair counts is listed as full (when the
// full lists are asked for), one where some pair counts as partial, the rest
// not at all. Indices in increasing order; list entries past the counts are
// left as they were.
//
// One workgroup per mask row; its invocations share each block's pairs and
// vote. Takes block-sparse attention's spec constants (BS_MASK_ALL/ANY, the
// workgroup size in PA_WORKGROUP_SIZE), push constants (lengths, block sizes,
// the mods' values) and binding numbers, with the lists written.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_EXT_control_flow_attributes : require
#define VKA_OP_BLOCK_SPARSE 1
#include "abi/block_sparse.h"
#include "grid.glsl"
#include "status.glsl"

layout(local_size_x_id = 6) in;

layout(set = 0, binding = BS_BINDING_KV_NUM_BLOCKS, std430) writeonly buffer KvNum { int kv_num_blocks[]; };
layout(set = 0, binding = BS_BINDING_KV_INDICES, std430) writeonly buffer KvIdx { int kv_indices[]; };
layout(set = 0, binding = BS_BINDING_FULL_NUM_BLOCKS, std430) writeonly buffer FullNum { int full_num_blocks[]; };
layout(set = 0, binding = BS_BINDING_FULL_INDICES, std430) writeonly buffer FullIdx { int full_indices[]; };

#define BS_DOCUMENT_IDS_GIVEN 1   // (both read before the mods run: faster here)
#include "block_sparse_mods.glsl"

shared uint some_pair, some_pair_not;   // per block: whether some pair counts / does not

void main() {
  const uint row = vka_linear_workgroup(pc.grid_x);
  if (row >= pc.num_workgroups) return;
  const uint sz = pc.mask_extents & 0xFFFFu, sh = pc.mask_extents >> 16;
  const uint qb = row % pc.q_blocks, zh = row / pc.q_blocks;
  const uint z = zh / sh, h = zh % sh;
  const uint q_block = pc.block_sizes & 0xFFFFu, kv_block = pc.block_sizes >> 16;
  const int q0 = int(qb * q_block), q1 = min(int(pc.q_len), q0 + int(q_block));
  const uint blocks = (pc.kv_len + kv_block - 1u) / kv_block;   // the host keeps the lists this long
  const bool separate = (pc.flags & BS_FLAG_FULL_BLOCKS) != 0u;
  const uint list = row * pc.kv_blocks;
  int partial = 0, full = 0;   // the same in every invocation
  for (uint j = 0; j < blocks; ++j) {
    if (gl_LocalInvocationIndex == 0u) some_pair = some_pair_not = 0u;
    barrier();
    const int k0 = int(j * kv_block), k1 = min(int(pc.kv_len), k0 + int(kv_block));
    const uint cols = uint(k1 - k0), pairs = uint(max(q1 - q0, 0)) * cols;
    bool any = false, all = true;
    for (uint i = gl_LocalInvocationIndex; i < pairs; i += PA_WORKGROUP_SIZE) {
      const bool m = BS_MASK_READING_DOCUMENTS(z, h, q0 + int(i / cols), k0 + int(i % cols));
      any = any || m;
      all = all && m;
    }
    if (subgroupAny(any) && subgroupElect()) atomicOr(some_pair, 1u);
    if (subgroupAny(!all) && subgroupElect()) atomicOr(some_pair_not, 1u);
    barrier();
    const bool is_full = pairs > 0u && some_pair_not == 0u, is_partial = some_pair != 0u;
    barrier();   // every invocation has read the votes before the next block clears them
    if (separate && is_full) {
      if (gl_LocalInvocationIndex == 0u) full_indices[bs_view_offset(BS_BINDING_FULL_INDICES - 1u) + list + uint(full)] = int(j);
      ++full;
    } else if (is_partial) {
      if (gl_LocalInvocationIndex == 0u) kv_indices[bs_view_offset(BS_BINDING_KV_INDICES - 1u) + list + uint(partial)] = int(j);
      ++partial;
    }
  }
  if (gl_LocalInvocationIndex != 0u) return;
  kv_num_blocks[bs_view_offset(BS_BINDING_KV_NUM_BLOCKS - 1u) + row] = partial;
  if (separate) full_num_blocks[bs_view_offset(BS_BINDING_FULL_NUM_BLOCKS - 1u) + row] = full;
}
