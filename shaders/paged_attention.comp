#version 460
// Paged attention, one workgroup per work item of the plan: rows
// [row_start, row_start + row_count) of one sequence and kv head, where row
// r = token_in_sequence * GQA + head_in_group (the GQA heads of one kv head
// share each K/V byte read), over key positions [kv_begin, kv_end).
//
// Per KV tile of PA_BN keys: gather K into shared memory (block table ->
// chunk -> element, per layout and dtype), S = Q K^T, logits and masks,
// online softmax, gather V into the same shared memory, O += P V. Without
// split-KV the item then normalises and writes out (and LSE); with it, writes
// its unnormalised O, max and exp-sum for paged_attention_reduce.
//
// The paths differ only in the two products S = Q K^T and P V:
//   scalar   (VKATTN_PATH 0): FMAs over f32 tiles in shared memory;
//   coopmat  (VKATTN_PATH 1): f16 tiles in shared memory, 16x16x16 subgroup
//            matrices (KHR), f32 accumulation;
//   coopmat2 (VKATTN_PATH 2): the same tiles as whole-workgroup matrices
//            (NV_cooperative_matrix2, flexible dimensions).
// bf16 inputs run the scalar module (glslang 15 has no bf16 matrices).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : require
#if VKATTN_PATH >= 1
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#endif
#if VKATTN_PATH == 2
#extension GL_NV_cooperative_matrix2 : require
#endif

#include "abi/paged_attention.h"
#include "attention_logits.glsl"
#include "grid.glsl"
#include "kv_addressing.glsl"
#include "number_formats.glsl"
#include "online_softmax.glsl"
#include "status.glsl"

layout(local_size_x_id = 6) in;

layout(set = 0, binding = 1, std430) readonly buffer Q16 { uint16_t q16[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Out16 { uint16_t out16[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Out32 { float out32[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Out8 { uint8_t out8[]; };
layout(set = 0, binding = 3, std430) writeonly buffer Lse { float lse_out[]; };
layout(set = 0, binding = 4, std430) readonly buffer Meta { PagedAttentionMeta hdr; int words[]; };
layout(set = 0, binding = 4, std430) readonly buffer MetaF { PagedAttentionMeta hdr_f; float fwords[]; };
layout(set = 0, binding = 5, std430) writeonly buffer Scratch { float scratch[]; };

layout(buffer_reference, std430, buffer_reference_align = 2) readonly buffer Kv16 { uint16_t v; };
layout(buffer_reference, std430, buffer_reference_align = 1) readonly buffer Kv8 { uint8_t v; };
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Kv16x8 { uvec4 v; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer Kv8x8 { uvec2 v; };

const uint D = PA_HEAD_SIZE;
const uint DP = PA_HEAD_SIZE + 1;   // padded row stride: rows fall in different banks
const uint BM = PA_BM;
const uint BN = PA_BN;
const uint WG = PA_WORKGROUP_SIZE;
const uint OPT = (PA_BM * PA_HEAD_SIZE) / PA_WORKGROUP_SIZE;   // output elements per invocation
const bool FP8_CACHE = PA_CACHE_DTYPE == DTYPE_FP8_E4M3 || PA_CACHE_DTYPE == DTYPE_FP8_E5M2;
const uint ESIZE = FP8_CACHE ? 1u : 2u;

#if VKATTN_PATH == 0
shared float Qs[PA_BM * (PA_HEAD_SIZE + 1)];    // q * scale, f32
shared float KVs[PA_BN * (PA_HEAD_SIZE + 1)];   // the K tile, then the V tile
#else
shared float16_t Qh[PA_BM * PA_HEAD_SIZE];      // q * scale
shared float16_t KVh[PA_BN * PA_HEAD_SIZE];     // the K tile, then the V tile
shared float16_t Ph[PA_BM * PA_BN];             // P, for P V
shared float Of[PA_BM * PA_HEAD_SIZE];          // this tile's P V
#endif
shared float Ss[PA_BM * PA_BN];                 // q.k, then logits, then P
shared float row_alpha[PA_BM];
shared int row_qpos[PA_BM];
shared uint64_t key_block[PA_BN];               // address of each key's block (K cache; V adds the V table)
shared uint64_t value_block[PA_BN];

float decode_half(uint bits, uint dtype) { return dtype == DTYPE_BF16 ? vka_bf16_to_f32(bits) : vka_f16_to_f32(bits); }


void store_kv_(uint j, uint d, float x);

// Up to 64 K and 64 V chunk bases, read once per workgroup (the cache has at
// most 64 chunks: the plan checks), so a key's address needs no dependent load.
const uint MAX_CHUNKS = 64u;
shared uint64_t chunk_base[2u * 64u];

uint64_t block_address(bool is_value, uint block) {
  const uint64_t bytes = uint64_t(PA_BLOCK_SIZE) * PA_NUM_KV_HEADS * PA_HEAD_SIZE * ESIZE;
  const uint chunk = block / pc.blocks_per_chunk;
  return chunk_base[(is_value ? MAX_CHUNKS : 0u) + chunk] + uint64_t(block - chunk * pc.blocks_per_chunk) * bytes;
}

// Raw bits of eight consecutive head dims (d, ..., d+7; d a multiple of 8) of
// one key: one 16-byte (f16/bf16) or 8-byte (fp8) load where the layout keeps
// them contiguous (every layout but split V, whose dims lie block_size apart).
uvec4 load_raw8(uint64_t block, bool is_value, uint t, uint h, uint d) {
  if (is_value && PA_LAYOUT == KV_LAYOUT_SPLIT) {
    uvec4 w = uvec4(0);
    [[unroll]] for (uint i = 0; i < 8u; ++i) {
      const uint e = vka_kv_element_in_block(PA_LAYOUT, true, t, h, d + i, PA_BLOCK_SIZE, PA_NUM_KV_HEADS, PA_HEAD_SIZE, 16u / ESIZE);
      const uint64_t a = block + uint64_t(e) * ESIZE;
      if (FP8_CACHE) w[i / 4u] |= uint(Kv8(a).v) << (8u * (i % 4u));
      else w[i / 2u] |= uint(Kv16(a).v) << (16u * (i % 2u));
    }
    return w;
  }
  const uint e = vka_kv_element_in_block(PA_LAYOUT, is_value, t, h, d, PA_BLOCK_SIZE, PA_NUM_KV_HEADS, PA_HEAD_SIZE, 16u / ESIZE);
  const uint64_t a = block + uint64_t(e) * ESIZE;
  if (FP8_CACHE) return uvec4(Kv8x8(a).v, 0u, 0u);
  return Kv16x8(a).v;
}

void decode_raw8(uvec4 w, bool is_value, out float x[8]) {
  if (FP8_CACHE) {
    const float sc = is_value ? hdr.v_scale : hdr.k_scale;
    [[unroll]] for (uint i = 0; i < 8u; ++i) {
      const uint b = (w[i / 4u] >> (8u * (i % 4u))) & 0xFFu;
      x[i] = (PA_CACHE_DTYPE == DTYPE_FP8_E4M3 ? vka_e4m3_to_f32(b) : vka_e5m2_to_f32(b)) * sc;
    }
  } else {
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
      if (PA_CACHE_DTYPE == DTYPE_F16) {
        // f16 -> f32 is exact; the hardware conversion is one instruction.
        const vec2 f = unpackHalf2x16(w[i]);
        x[2u * i] = f.x;
        x[2u * i + 1u] = f.y;
      } else {
        x[2u * i] = uintBitsToFloat((w[i] & 0xFFFFu) << 16);   // bf16: the top half of an f32
        x[2u * i + 1u] = uintBitsToFloat(w[i] & 0xFFFF0000u);
      }
    }
  }
}

// Chunks of 8 elements per invocation in a K or V tile.
const uint CHUNKS = PA_BN * PA_HEAD_SIZE / 8u;
const uint CPT = (CHUNKS + PA_WORKGROUP_SIZE - 1u) / PA_WORKGROUP_SIZE;
// Register arrays have compile-time sizes so that loops over them unroll in
// SPIR-V and every element stays in a register (arrays sized by specialization
// constants were kept in memory, which serialised the prefetch loads). The
// plan keeps CPT <= CPT_MAX and OPT <= OPT_MAX.
const uint CPT_MAX = 8u;
const uint OPT_MAX = 64u;

// Issues every load of a tile at once (its keys' blocks are in key_block /
// value_block); the registers are consumed a phase later, so the loads of the
// next tile are in flight while this one computes.
void load_tile(int k0, int kv_end, uint kv_head, out uvec4 kraw[CPT_MAX], out uvec4 vraw[CPT_MAX]) {
  [[unroll]] for (uint i = 0; i < CPT_MAX; ++i) {
    kraw[i] = uvec4(0);
    vraw[i] = uvec4(0);
    const uint c = gl_LocalInvocationIndex + i * WG;
    if (i >= CPT || c >= CHUNKS) continue;
    const uint j = c / (D / 8u), d = (c % (D / 8u)) * 8u;
    const int k_pos = k0 + int(j);
    if (k_pos >= kv_end) continue;
    const uint t = uint(k_pos) % PA_BLOCK_SIZE;
    kraw[i] = load_raw8(key_block[j], false, t, kv_head, d);
    vraw[i] = load_raw8(value_block[j], true, t, kv_head, d);
  }
}

void store_tile(bool is_value, uvec4 raw[CPT_MAX]) {
  [[unroll]] for (uint i = 0; i < CPT_MAX; ++i) {
    const uint c = gl_LocalInvocationIndex + i * WG;
    if (i >= CPT || c >= CHUNKS) continue;
    const uint j = c / (D / 8u), d = (c % (D / 8u)) * 8u;
    float x[8];
    decode_raw8(raw[i], is_value, x);
    [[unroll]] for (uint e = 0; e < 8u; ++e) store_kv_(j, d + e, x[e]);
  }
}

// The plan's block-table entry of key k_pos, as stored. Loaded a phase before
// use (checked_block), so the load is in flight while the tile computes.
int raw_block(uint seq, int k_pos) {
  const uint col = min(uint(k_pos) / PA_BLOCK_SIZE, hdr.max_blocks_per_seq - 1u);
  return words[hdr.block_table_at + seq * hdr.max_blocks_per_seq + col];
}

// The plan checked every entry; this keeps a table corrupted since then inside
// the cache (block 0 stands in) and reports it.
uint checked_block(int b, uint seq, int k_pos) {
  if (b < 0 || uint(b) >= pc.num_blocks) {
    vka_report(STATUS_BLOCK_OUT_OF_RANGE, seq, min(uint(k_pos) / PA_BLOCK_SIZE, hdr.max_blocks_per_seq - 1u), uint(b));
    return 0u;
  }
  return uint(b);
}

uint encode_out(float x) {
  if (PA_OUT_DTYPE == DTYPE_F16) return vka_f32_to_f16(x);
  if (PA_OUT_DTYPE == DTYPE_BF16) return vka_f32_to_bf16(x);
  if (PA_OUT_DTYPE == DTYPE_FP8_E4M3) return vka_f32_to_e4m3(x * hdr.out_inv_scale);
  return vka_f32_to_e5m2(x * hdr.out_inv_scale);
}

void store_q(uint r, uint d, float x) {
#if VKATTN_PATH == 0
  Qs[r * DP + d] = x;
#else
  Qh[r * D + d] = float16_t(x);
#endif
}

void store_kv_(uint j, uint d, float x) {
#if VKATTN_PATH == 0
  KVs[j * DP + d] = x;
#else
  KVh[j * D + d] = float16_t(x);
#endif
}

// Ss = Q K^T for the tile in KVs / KVh (every invocation takes part).
void tile_scores() {
#if VKATTN_PATH == 0
  for (uint i = gl_LocalInvocationIndex; i < BM * BN; i += WG) {
    const uint r = i / BN, j = i % BN;
    float s = 0.0;
    for (uint d = 0; d < D; ++d) s += Qs[r * DP + d] * KVs[j * DP + d];
    Ss[i] = s;
  }
#elif VKATTN_PATH == 1
  // One 16x16 tile of S per subgroup at a time, accumulating over head_size.
  for (uint n = gl_SubgroupID; n < BN / 16u; n += gl_NumSubgroups) {
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc =
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    for (uint k = 0; k < D; k += 16u) {
      coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a;
      coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b;
      coopMatLoad(a, Qh, k, D, gl_CooperativeMatrixLayoutRowMajor);
      coopMatLoad(b, KVh, n * 16u * D + k, D, gl_CooperativeMatrixLayoutColumnMajor);   // K^T
      acc = coopMatMulAdd(a, b, acc);
    }
    coopMatStore(acc, Ss, n * 16u, BN, gl_CooperativeMatrixLayoutRowMajor);
  }
#else
  coopmat<float16_t, gl_ScopeWorkgroup, PA_BM, PA_HEAD_SIZE, gl_MatrixUseA> a;
  coopmat<float16_t, gl_ScopeWorkgroup, PA_HEAD_SIZE, PA_BN, gl_MatrixUseB> b;
  coopMatLoad(a, Qh, 0, D, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(b, KVh, 0, D, gl_CooperativeMatrixLayoutColumnMajor);   // K^T
  coopmat<float, gl_ScopeWorkgroup, PA_BM, PA_BN, gl_MatrixUseAccumulator> acc =
      coopmat<float, gl_ScopeWorkgroup, PA_BM, PA_BN, gl_MatrixUseAccumulator>(0.0);
  acc = coopMatMulAdd(a, b, acc);
  coopMatStore(acc, Ss, 0, BN, gl_CooperativeMatrixLayoutRowMajor);
#endif
}

#if VKATTN_PATH >= 1
// Of = P V for the tile (P in Ph, V in KVh).
void tile_pv() {
#if VKATTN_PATH == 1
  for (uint n = gl_SubgroupID; n < D / 16u; n += gl_NumSubgroups) {
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc =
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    for (uint k = 0; k < BN; k += 16u) {
      coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a;
      coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b;
      coopMatLoad(a, Ph, k, BN, gl_CooperativeMatrixLayoutRowMajor);
      coopMatLoad(b, KVh, k * D + n * 16u, D, gl_CooperativeMatrixLayoutRowMajor);
      acc = coopMatMulAdd(a, b, acc);
    }
    coopMatStore(acc, Of, n * 16u, D, gl_CooperativeMatrixLayoutRowMajor);
  }
#else
  coopmat<float16_t, gl_ScopeWorkgroup, PA_BM, PA_BN, gl_MatrixUseA> a;
  coopmat<float16_t, gl_ScopeWorkgroup, PA_BN, PA_HEAD_SIZE, gl_MatrixUseB> b;
  coopMatLoad(a, Ph, 0, BN, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(b, KVh, 0, D, gl_CooperativeMatrixLayoutRowMajor);
  coopmat<float, gl_ScopeWorkgroup, PA_BM, PA_HEAD_SIZE, gl_MatrixUseAccumulator> acc =
      coopmat<float, gl_ScopeWorkgroup, PA_BM, PA_HEAD_SIZE, gl_MatrixUseAccumulator>(0.0);
  acc = coopMatMulAdd(a, b, acc);
  coopMatStore(acc, Of, 0, D, gl_CooperativeMatrixLayoutRowMajor);
#endif
}
#endif

shared float row_m[PA_BM];
shared float row_l[PA_BM];

void main() {
  const uint item = vka_linear_workgroup(pc.grid_x);
  if (item >= pc.num_items) return;
  const uint tid = gl_LocalInvocationIndex;
  const uint ib = hdr.items_at + item * PA_ITEM_WORDS;
  const uint seq = uint(words[ib + PA_ITEM_SEQ]);
  const uint kv_head = uint(words[ib + PA_ITEM_KV_HEAD]);
  const uint row_start = uint(words[ib + PA_ITEM_ROW_START]);
  const uint row_count = uint(words[ib + PA_ITEM_ROW_COUNT]);
  const int kv_begin = words[ib + PA_ITEM_KV_BEGIN];
  const int kv_end = words[ib + PA_ITEM_KV_END];
  const uint segment = uint(words[ib + PA_ITEM_SEGMENT]);
  const uint token0 = uint(words[hdr.query_start_loc_at + seq]);
  const int query_len = words[hdr.query_start_loc_at + seq + 1u] - int(token0);
  const int ctx = words[hdr.seq_lens_at + seq] - query_len;

  // Rows: absolute query position, or -1 for rows past the item (they see no key).
  if (tid < BM) row_qpos[tid] = tid < row_count ? ctx + int((row_start + tid) / PA_GQA) : -1;
  for (uint i = tid; i < BM * D; i += WG) {
    const uint r = i / D, d = i % D;
    float x = 0.0;
    if (r < row_count) {
      const uint row = row_start + r;
      const uint token = token0 + row / PA_GQA;
      const uint head = kv_head * PA_GQA + row % PA_GQA;
      x = decode_half(uint(q16[pc.q_offset + token * pc.q_token_stride + head * pc.q_head_stride + d]), PA_Q_DTYPE) * hdr.scale;
    }
    store_q(r, d, x);
  }

  for (uint i = tid; i < 2u * min(pc.num_k_chunks, MAX_CHUNKS); i += WG)
    chunk_base[(i < pc.num_k_chunks ? 0u : MAX_CHUNKS) + i % pc.num_k_chunks] = VkaChunkTable(pc.chunk_table_address).address[i];

  float o[OPT_MAX];
  [[unroll]] for (uint i = 0; i < OPT_MAX; ++i) o[i] = 0.0;
  float m = VKA_NEG_INF, l = 0.0;   // this invocation's row (tid < BM)

  // Prologue: the first tile's addresses and loads.
  uvec4 kraw[CPT_MAX], vraw[CPT_MAX];
  barrier();
  if (tid < BN && kv_begin + int(tid) < kv_end) {
    const uint b = checked_block(raw_block(seq, kv_begin + int(tid)), seq, kv_begin + int(tid));
    key_block[tid] = block_address(false, b);
    value_block[tid] = block_address(true, b);
  }
  barrier();
  load_tile(kv_begin, kv_end, kv_head, kraw, vraw);

  for (int k0 = kv_begin; k0 < kv_end; k0 += int(BN)) {
    const int k1 = k0 + int(BN);   // the next tile
    // The next tile's block-table entry: issued now, used after S.
    int next_block = 0;
    const bool has_next = tid < BN && k1 + int(tid) < kv_end;
    if (has_next) next_block = raw_block(seq, k1 + int(tid));
    store_tile(false, kraw);
    barrier();
    tile_scores();
    barrier();
    store_tile(true, vraw);
    if (has_next) {
      const uint b = checked_block(next_block, seq, k1 + int(tid));
      key_block[tid] = block_address(false, b);
      value_block[tid] = block_address(true, b);
    }
    // Logits of this tile.
    for (uint i = tid; i < BM * BN; i += WG) {
      const uint r = i / BN, j = i % BN;
      const int q_pos = row_qpos[r];
      float logit = VKA_NEG_INF;
      if (q_pos >= 0) {
        const float s = Ss[i];
        const uint row = row_start + r;
        const uint head = kv_head * PA_GQA + row % PA_GQA;
        const int k_pos = k0 + int(j);
        VkaLogitParams p;
        p.has_softcap = PA_HAS_SOFTCAP != 0u;
        p.softcap = hdr.softcap;
        p.has_window = PA_HAS_WINDOW != 0u;
        p.window = hdr.sliding_window;
        p.has_alibi = PA_HAS_ALIBI != 0u;
        p.alibi_slope = PA_HAS_ALIBI != 0u ? fwords[hdr.alibi_at + head] : 0.0;
        p.ctx = ctx;
        float bias = 0.0;
        if (PA_HAS_QQ_BIAS != 0u) {
          const int kj = k_pos - ctx;
          const uint qi = row / PA_GQA;
          if (kj >= 0 && uint(kj) < hdr.qq_bias_stride && qi < hdr.qq_bias_rows)
            bias = fwords[hdr.qq_bias_at + qi * hdr.qq_bias_stride + uint(kj)];
        }
        logit = vka_logit(s, p, q_pos, k_pos, kv_end, bias);
      }
      Ss[i] = logit;
    }
    barrier();
    if (k1 < kv_end) load_tile(k1, kv_end, kv_head, kraw, vraw);

    // Online softmax, one invocation per row.
    if (tid < BM) {
      float tile_max = VKA_NEG_INF;
      for (uint j = 0; j < BN; ++j) tile_max = max(tile_max, Ss[tid * BN + j]);
      const float alpha = vka_softmax_rescale(m, l, tile_max);
      float sum = 0.0;
      for (uint j = 0; j < BN; ++j) {
        const float p = vka_exp_diff(Ss[tid * BN + j], m);
#if VKATTN_PATH == 0
        Ss[tid * BN + j] = p;
#else
        Ph[tid * BN + j] = float16_t(p);
#endif
        sum += p;
      }
      l += sum;
      row_alpha[tid] = alpha;
    }
    barrier();

    // O = O * alpha + P V
#if VKATTN_PATH >= 1
    tile_pv();
    barrier();
#endif
    [[unroll]] for (uint i = 0; i < OPT_MAX; ++i) {
      if (i >= OPT) break;
      const uint e = tid + i * WG;
      const uint r = e / D, d = e % D;
      float acc = o[i] * row_alpha[r];
#if VKATTN_PATH == 0
      for (uint j = 0; j < BN; ++j) acc += Ss[r * BN + j] * KVs[j * DP + d];
#else
      acc += Of[r * D + d];
#endif
      o[i] = acc;
    }
    barrier();   // P V is done with the V tile and P before the next tile lands
  }

  if (tid < BM) {
    row_m[tid] = m;
    row_l[tid] = l;
  }
  barrier();
  [[unroll]] for (uint i = 0; i < OPT_MAX; ++i) {
    if (i >= OPT) break;
    const uint e = tid + i * WG;
    const uint r = e / D, d = e % D;
    if (r >= row_count) continue;
    const uint row = row_start + r;
    const uint token = token0 + row / PA_GQA;
    const uint head = kv_head * PA_GQA + row % PA_GQA;
    if (PA_SPLIT != 0u) {
      // Unnormalised partial result of this segment, for paged_attention_reduce.
      const uint slot = (token * hdr.num_q_heads + head) * hdr.num_segments + segment;
      scratch[slot * D + d] = o[i];
      if (d == 0u) {
        const uint stats = hdr.num_tokens * hdr.num_q_heads * hdr.num_segments * D;
        scratch[stats + slot * 2u] = row_m[r];
        scratch[stats + slot * 2u + 1u] = row_l[r];
      }
      continue;
    }
    float factor, lse;
    const float sink = PA_HAS_SINKS != 0u ? fwords[hdr.sinks_at + head] : VKA_NEG_INF;
    vka_softmax_finish(row_m[r], row_l[r], PA_HAS_SINKS != 0u, sink, factor, lse);
    const float value = o[i] * factor;
    const uint at = pc.out_offset + token * pc.out_token_stride + head * pc.out_head_stride + d;
    if (PA_OUT_DTYPE == DTYPE_F32) out32[at] = value;
    else if (PA_OUT_DTYPE == DTYPE_F16 || PA_OUT_DTYPE == DTYPE_BF16) out16[at] = uint16_t(encode_out(value));
    else out8[at] = uint8_t(encode_out(value));
    if (PA_WRITE_LSE != 0u && d == 0u) lse_out[pc.lse_offset + token * pc.lse_token_stride + head] = lse;
  }
}
