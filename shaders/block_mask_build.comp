#version 460
// FlexAttention's create_block_mask on the device: for each mask row (z, h,
// q block), the mask mods of block_sparse_mods.glsl (the very functions the
// attention kernels apply) over every (q, kv) pair of each kv block inside
// the lengths; a block where every pair counts is listed as full (when the
// full lists are asked for), one where some pair counts as partial, the rest
// not at all. Indices in increasing order; list entries past the counts are
// left as they were.
//
// A block that the built-in mods answer for as a whole (bs_mask_range: every
// pair counts, or none does) has no pair tested. One workgroup per mask row;
// its invocations share each other block's pairs and vote. Takes
// block-sparse attention's spec constants (BS_MASK_ALL/ANY, the workgroup
// size in PA_WORKGROUP_SIZE), push constants (lengths, block sizes, the
// mods' values) and binding numbers, with the lists written.
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

// The document mod's answer for a block's keys [k0, k1) (bs_builtin_range's
// docs: whether every pair's two ids are equal, whether no pair's are),
// known where the block's rows are all of document `id` (rows_one). Its
// reads are the keys' ids, where the pairs' tests would be their product.
// Each subgroup answers alone (no barrier, no shared memory): the blocks'
// walk is a chain, one round trip per block.
bvec2 block_documents(bool rows_one, int id, int k0, int k1) {
  if (!rows_one) return bvec2(false);
  bool same = true, other = true;
  for (int k = k0 + int(gl_SubgroupInvocationID); k < k1; k += int(gl_SubgroupSize)) {
    const bool s = bs_document_id(k) == id;
    same = same && s;
    other = other && !s;
  }
  return bvec2(subgroupAll(same), subgroupAll(other));
}

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
  // Whether the rows are all of one document (block_documents).
  const int row_id = bs_document_id(q0 + pc.q_offset);
  bool rows_one = true;
  if (BS_DOCUMENTS) {
    for (int q = q0 + int(gl_SubgroupInvocationID); q < q1; q += int(gl_SubgroupSize))
      rows_one = rows_one && bs_document_id(q + pc.q_offset) == row_id;
    rows_one = subgroupAll(rows_one);
  }
  for (uint j = 0; j < blocks; ++j) {
    const int k0 = int(j * kv_block), k1 = min(int(pc.kv_len), k0 + int(kv_block));
    const uint cols = uint(k1 - k0), pairs = uint(max(q1 - q0, 0)) * cols;
    // Where the mods answer for the whole block at once, no pair is tested,
    // and no barrier is waited on. The ids are read only where the other
    // mods leave the block open. (Every invocation takes the same branches:
    // they depend on the block alone.)
    bvec2 whole = pairs > 0u ? bs_mask_range(q0, q1 - 1, k0, k1 - 1, bvec2(false)) : bvec2(false);
    if (BS_DOCUMENTS && pairs > 0u && !whole.x && !whole.y)
      whole = bs_mask_range(q0, q1 - 1, k0, k1 - 1, block_documents(rows_one, row_id, k0, k1));
    bool is_full = whole.x, is_partial = whole.x;   // (a full block lists as partial without the full lists)
    if (pairs > 0u && !whole.x && !whole.y) {
      if (gl_LocalInvocationIndex == 0u) some_pair = some_pair_not = 0u;
      barrier();
      // Four pairs a step, so that their reads (document ids, a variant's
      // buffers) are in flight together: the steps are a dependent chain. A
      // step's pairs past the block test the last pair again, which changes
      // neither vote.
      bool any = false, all = true;
      for (uint i = gl_LocalInvocationIndex; i < pairs; i += 4u * PA_WORKGROUP_SIZE) {
        [[unroll]] for (uint u = 0u; u < 4u; ++u) {
          const uint p = min(i + u * PA_WORKGROUP_SIZE, pairs - 1u);
          const bool m = BS_MASK_READING_DOCUMENTS(z, h, q0 + int(p / cols), k0 + int(p % cols));
          any = any || m;
          all = all && m;
        }
      }
      if (subgroupAny(any) && subgroupElect()) atomicOr(some_pair, 1u);
      if (subgroupAny(!all) && subgroupElect()) atomicOr(some_pair_not, 1u);
      barrier();
      is_full = some_pair_not == 0u;
      is_partial = some_pair != 0u;
      barrier();   // every invocation has read the votes before the next block clears them
    }
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
