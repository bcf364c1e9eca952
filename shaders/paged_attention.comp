#version 460
// Paged attention, scalar path (any Vulkan 1.3 device): one workgroup per work
// item of the plan (paged_attention_io.glsl), all its rows against each KV
// tile of PA_BN keys.
//
// Per tile: gather K into shared memory (f32), S = Q K^T by FMAs, logits and
// masks, online softmax (one invocation per row), gather V into the same
// shared memory, O = O * alpha + P V with O in shared memory. The loads of the
// next tile are issued into registers before this tile's softmax, so they are
// in flight while it computes. The matrix paths are paged_attention_subgroup.comp.
//
// O lives in shared memory, not in a register array per invocation: with up
// to 16 rows x 256 dims, unrolling the accumulation and the output write once
// per register made lavapipe's compiler (LLVM) take over a minute for one
// pipeline, and this kernel is the path of every device without matrix
// units, the CPU included.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : require

#include "grid.glsl"
#if VKA_OP_BLOCK_SPARSE
// Block-sparse attention: its items, K/V tensors, block lists and mods.
#include "abi/block_sparse.h"
#include "block_sparse_io.glsl"
#else
#include "abi/paged_attention.h"
#include "paged_attention_io.glsl"
#include "paged_attention_tiles.glsl"
#include "split_kv_merge.glsl"
#endif

layout(local_size_x_id = 6) in;

// q.k's head size, and V's (the op module's PA_V_HEAD_SIZE: block-sparse
// attention's may differ; paged attention's is the same).
const uint D = PA_HEAD_SIZE;
const uint DV = PA_V_HEAD_SIZE;
const uint DMAX = PA_SCALAR_KV_DIMS(PA_HEAD_SIZE, PA_V_HEAD_SIZE);
const uint QP = PA_HEAD_SIZE + 1;   // padded row strides (rows fall in different banks): Q's
const uint DP = DMAX + 1;           // and the K or V tile's
const uint BM = PA_BM;
const uint BN = PA_BN;
const uint WG = PA_WORKGROUP_SIZE;

// (Sized by abi/paged_attention.h, whose PA_SCALAR_SHARED_BYTES the host's
// tile choice counts: a new shared array belongs there too, which the test
// SharedMemoryAbi checks.)
shared float Qs[PA_SCALAR_Q_FLOATS(PA_BM, PA_HEAD_SIZE)];                  // q * scale
shared float KVs[PA_SCALAR_KV_FLOATS(PA_BN, PA_HEAD_SIZE, PA_V_HEAD_SIZE)];  // the K tile, then the V tile
shared float Ss[PA_SCALAR_S_FLOATS(PA_BM, PA_BN)];                         // q.k, then logits, then P
shared float Os[PA_SCALAR_O_FLOATS(PA_BM, PA_V_HEAD_SIZE)];                // O, unnormalised; element e belongs to invocation e % WG
shared float row_alpha[PA_BM];
shared float row_m[PA_BM];
shared float row_l[PA_BM];
shared uint64_t key_block[PA_BN];               // address of each key's block in the K cache
shared uint64_t value_block[PA_BN];             // and in the V cache

// Chunks of 8 elements in a K and in a V tile, and per invocation.
const uint CHUNKS = PA_BN * PA_HEAD_SIZE / 8u;
const uint CHUNKS_V = PA_BN * PA_V_HEAD_SIZE / 8u;
const uint CPT = (PA_BN * DMAX / 8u + PA_WORKGROUP_SIZE - 1u) / PA_WORKGROUP_SIZE;
// The prefetch registers have a compile-time size so that loops over them
// unroll in SPIR-V and every element stays in a register (arrays sized by
// specialization constants were kept in memory, which serialised the
// prefetch loads). The plan keeps CPT <= CPT_MAX.
const uint CPT_MAX = 8u;

// Issues every load of a tile at once (its keys' blocks are in key_block /
// value_block); the registers are consumed a phase later.
// `src` (pa_key_source) is a constant where this is called (load_tile).
void load_tile_from(uint src, PaItem it, int k0, out uvec4 kraw[CPT_MAX], out uvec4 vraw[CPT_MAX]) {
  [[unroll]] for (uint i = 0; i < CPT_MAX; ++i) {
    kraw[i] = uvec4(0);
    vraw[i] = uvec4(0);
    const uint c = gl_LocalInvocationIndex + i * WG;
    if (i >= CPT) continue;
    if (c < CHUNKS) {
      const uint j = c / (D / 8u), d = (c % (D / 8u)) * 8u;
      const int k_pos = k0 + int(j);
      if (pa_key_in_item(it, k_pos)) kraw[i] = pa_key_raw8(src, key_block[j], false, k_pos, it.kv_head, d);
    }
    if (c < CHUNKS_V) {
      const uint j = c / (DV / 8u), d = (c % (DV / 8u)) * 8u;
      const int k_pos = k0 + int(j);
      if (pa_key_in_item(it, k_pos)) vraw[i] = pa_key_raw8(src, value_block[j], true, k_pos, it.kv_head, d);
    }
  }
}
void load_tile(uint src, PaItem it, int k0, out uvec4 kraw[CPT_MAX], out uvec4 vraw[CPT_MAX]) {
  if (src == PA_SRC_CACHE) load_tile_from(PA_SRC_CACHE, it, k0, kraw, vraw);
  else if (src == PA_SRC_SUFFIX) load_tile_from(PA_SRC_SUFFIX, it, k0, kraw, vraw);
  else load_tile_from(PA_SRC_SUFFIX_NARROW, it, k0, kraw, vraw);
}

void store_tile(bool suffix, bool is_value, uvec4 raw[CPT_MAX]) {
  const uint dims = is_value ? DV : D;
  [[unroll]] for (uint i = 0; i < CPT_MAX; ++i) {
    const uint c = gl_LocalInvocationIndex + i * WG;
    if (i >= CPT || c >= (is_value ? CHUNKS_V : CHUNKS)) continue;
    const uint j = c / (dims / 8u), d = (c % (dims / 8u)) * 8u;
    float x[8];
    pa_decode_key8(suffix, raw[i], pa_decode_scale(is_value), x);
    [[unroll]] for (uint e = 0; e < 8u; ++e) KVs[j * DP + d + e] = x[e];
  }
}

// Where the keys of the tile starting at k0 live (invocation tid < BN: key
// k0 + tid): pa_key_at, from its block-table entry.
void set_key_blocks(uint tid, PaItem it, int k_pos, int raw) {
  key_block[tid] = pa_key_at(it, false, k_pos, raw);
  value_block[tid] = pa_key_at(it, true, k_pos, raw);
}

void main() {
  const uint item = vka_linear_workgroup(pc.grid_x);
  if (item >= pc.num_workgroups) return;
  const uint tid = gl_LocalInvocationIndex;
  const PaItem it = pa_load_item(item);
  if (!it.valid) return;   // the same for the whole workgroup

  for (uint i = tid; i < BM * D; i += WG) {
    const uint bits = pa_q_bits(it, i / D, i % D);
    Qs[(i / D) * QP + i % D] = (PA_Q_DTYPE == DTYPE_BF16 ? vka_bf16_to_f32(bits) : vka_f16_to_f32(bits)) * pc.scale;
  }
  pa_load_chunk_bases();

  for (uint e = tid; e < BM * DV; e += WG) Os[e] = 0.0;
  float m = VKA_NEG_INF, l = 0.0;   // this invocation's row (tid < BM)

  // Prologue: the first tile's addresses and loads.
  uvec4 kraw[CPT_MAX], vraw[CPT_MAX];
  const int num_tiles = pa_tile_count(it);
  barrier();
  if (num_tiles > 0) {
    const int k = pa_tile_key0(it, 0) + int(tid);
    if (tid < BN && pa_key_in_item(it, k)) set_key_blocks(tid, it, k, pa_raw_block(it.seq, k));
  }
  barrier();
  const bool suffix = pa_suffix_item(it);
  const uint src = pa_key_source(it);
  if (num_tiles > 0) load_tile(src, it, pa_tile_key0(it, 0), kraw, vraw);

  for (int t = 0; t < num_tiles; ++t) {
    const int k0 = pa_tile_key0(it, t);
    const int k1 = t + 1 < num_tiles ? pa_tile_key0(it, t + 1) : 0;   // the next tile
    // The next tile's block-table entry: issued now, used after S.
    int next_block = 0;
    const bool has_next = tid < BN && t + 1 < num_tiles && pa_key_in_item(it, k1 + int(tid));
    if (has_next) next_block = pa_raw_block(it.seq, k1 + int(tid));
    store_tile(suffix, false, kraw);
    barrier();
    for (uint i = tid; i < BM * BN; i += WG) {   // S = Q K^T
      const uint r = i / BN, j = i % BN;
      float s = 0.0;
      for (uint d = 0; d < D; ++d) s += Qs[r * QP + d] * KVs[j * DP + d];
      Ss[i] = s;
    }
    barrier();
    store_tile(suffix, true, vraw);
    if (has_next) set_key_blocks(tid, it, k1 + int(tid), next_block);
    for (uint i = tid; i < BM * BN; i += WG) Ss[i] = pa_item_logit(it, i / BN, k0 + int(i % BN), Ss[i], t);
    barrier();
    if (t + 1 < num_tiles) load_tile(src, it, k1, kraw, vraw);

    // Online softmax, one invocation per row.
    if (tid < BM) {
      float tile_max = VKA_NEG_INF;
      for (uint j = 0; j < BN; ++j) tile_max = max(tile_max, Ss[tid * BN + j]);
      const float alpha = vka_softmax_rescale(m, l, tile_max);
      float sum = 0.0;
      for (uint j = 0; j < BN; ++j) {
        const float p = vka_exp_diff(Ss[tid * BN + j], m);
        Ss[tid * BN + j] = p;
        sum += p;
      }
      l += sum;
      row_alpha[tid] = alpha;
    }
    barrier();

    // O = O * alpha + P V
    for (uint e = tid; e < BM * DV; e += WG) {
      const uint r = e / DV, d = e % DV;
      float acc = Os[e] * row_alpha[r];
      // A key the row cannot see (P = 0) adds nothing, whatever its V:
      // 0 * NaN or 0 * Inf would be NaN.
      for (uint j = 0; j < BN; ++j) {
        const float p = Ss[r * BN + j];
        acc += p == 0.0 ? 0.0 : p * KVs[j * DP + d];
      }
      Os[e] = acc;
    }
    barrier();   // P V is done with the V tile and P before the next tile lands
  }

  if (tid < BM) {
    row_m[tid] = m;
    row_l[tid] = l;
  }
  barrier();
  for (uint e = tid; e < BM * DV; e += WG) pa_write_result(it, e / DV, e % DV, Os[e], row_m[e / DV], row_l[e / DV]);
#if !VKA_OP_BLOCK_SPARSE
  pa_merge_when_last(it, item);
#endif
}
