// What the paged-attention kernels (paged_attention.comp, the scalar path, and
// paged_attention_subgroup.comp, the matrix paths) share besides the online
// softmax: the bindings, the work item, reading K/V (block table -> chunk ->
// element), turning a score into a logit for a row, and writing a row's result
// (final output and LSE, or a split-KV partial for paged_attention_reduce).
// Include after abi/paged_attention.h (the spec constants) and before main().
// Loops over the workgroup step by PA_WORKGROUP_SIZE, never gl_WorkGroupSize:
// the kernels declare local_size_x_id after this file, and until then glslang
// gives gl_WorkGroupSize as (1, 1, 1), so every invocation did all the work.
#ifndef VKATTN_PAGED_ATTENTION_IO_GLSL
#define VKATTN_PAGED_ATTENTION_IO_GLSL
#include "attention_logits.glsl"
#include "kv_addressing.glsl"
#include "number_formats.glsl"
#include "online_softmax.glsl"
#include "status.glsl"

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

const bool PA_FP8_CACHE = PA_CACHE_DTYPE == DTYPE_FP8_E4M3 || PA_CACHE_DTYPE == DTYPE_FP8_E5M2;
const uint PA_ESIZE = PA_FP8_CACHE ? 1u : 2u;
const uint64_t PA_BLOCK_BYTES = uint64_t(PA_BLOCK_SIZE) * PA_NUM_KV_HEADS * PA_HEAD_SIZE * PA_ESIZE;

// One work item of the plan: rows [row_start, row_start + row_count) of a
// sequence and kv head (row = token_in_sequence * GQA + head_in_group), keys
// [kv_begin, kv_end).
struct PaItem {
  uint seq, kv_head, row_start, row_count, segment, token0;
  int kv_begin, kv_end, ctx;
};

PaItem pa_load_item(uint item) {
  const uint ib = hdr.items_at + item * PA_ITEM_WORDS;
  PaItem it;
  it.seq = uint(words[ib + PA_ITEM_SEQ]);
  it.kv_head = uint(words[ib + PA_ITEM_KV_HEAD]);
  it.row_start = uint(words[ib + PA_ITEM_ROW_START]);
  it.row_count = uint(words[ib + PA_ITEM_ROW_COUNT]);
  it.kv_begin = words[ib + PA_ITEM_KV_BEGIN];
  it.kv_end = words[ib + PA_ITEM_KV_END];
  it.segment = uint(words[ib + PA_ITEM_SEGMENT]);
  it.token0 = uint(words[hdr.query_start_loc_at + it.seq]);
  const int query_len = words[hdr.query_start_loc_at + it.seq + 1u] - int(it.token0);
  it.ctx = words[hdr.seq_lens_at + it.seq] - query_len;
  return it;
}

// Absolute position of local row r, or -1 for rows past the item (they see no key).
int pa_row_position(PaItem it, uint r) { return r < it.row_count ? it.ctx + int((it.row_start + r) / PA_GQA) : -1; }

// Element d of local row r's query, as stored (f16 or bf16 bits); 0 past the item.
uint pa_q_bits(PaItem it, uint r, uint d) {
  if (r >= it.row_count) return 0u;
  const uint row = it.row_start + r;
  const uint token = it.token0 + row / PA_GQA;
  const uint head = it.kv_head * PA_GQA + row % PA_GQA;
  return uint(q16[pc.q_offset + token * pc.q_token_stride + head * pc.q_head_stride + d]);
}

// Up to 64 K and 64 V chunk bases, read once per workgroup (the plan refuses
// caches of more chunks), so that a key's address needs no dependent load.
const uint PA_MAX_CHUNKS = 64u;
shared uint64_t pa_chunk_base[2u * PA_MAX_CHUNKS];

// Every invocation calls it; a barrier() must follow before pa_block_address.
void pa_load_chunk_bases() {
  const uint n = min(pc.num_k_chunks, PA_MAX_CHUNKS);
  for (uint i = gl_LocalInvocationIndex; i < 2u * n; i += PA_WORKGROUP_SIZE)
    pa_chunk_base[(i < n ? 0u : PA_MAX_CHUNKS) + i % n] = VkaChunkTable(pc.chunk_table_address).address[i];
}

uint64_t pa_block_address(bool is_value, uint block) {
  uint chunk;
  uint64_t offset;
  vka_kv_locate_block(block, pc.blocks_per_chunk, PA_BLOCK_BYTES, chunk, offset);
  return pa_chunk_base[(is_value ? PA_MAX_CHUNKS : 0u) + chunk] + offset;
}

// The plan's block-table entry of key k_pos, as stored. Kernels load it a
// phase before use (pa_checked_block), so the load is in flight meanwhile.
int pa_raw_block(uint seq, int k_pos) {
  const uint col = min(uint(k_pos) / PA_BLOCK_SIZE, hdr.max_blocks_per_seq - 1u);
  return words[hdr.block_table_at + seq * hdr.max_blocks_per_seq + col];
}

// The plan checked every entry; this keeps a table corrupted since then inside
// the cache (block 0 stands in) and reports it.
uint pa_checked_block(int b, uint seq, int k_pos) {
  if (b < 0 || uint(b) >= pc.num_blocks) {
    vka_report(STATUS_BLOCK_OUT_OF_RANGE, seq, min(uint(k_pos) / PA_BLOCK_SIZE, hdr.max_blocks_per_seq - 1u), uint(b));
    return 0u;
  }
  return uint(b);
}

// Raw bits of eight consecutive head dims (d, ..., d+7; d a multiple of 8) of
// key slot t of a block: one 16-byte (f16/bf16) or 8-byte (fp8) load where
// the layout keeps them contiguous (every layout but split V, whose dims lie
// block_size apart).
uvec4 pa_load_raw8(uint64_t block, bool is_value, uint t, uint h, uint d) {
  if (is_value && PA_LAYOUT == KV_LAYOUT_SPLIT) {
    uvec4 w = uvec4(0);
    [[unroll]] for (uint i = 0; i < 8u; ++i) {
      const uint e = vka_kv_element_in_block(PA_LAYOUT, true, t, h, d + i, PA_BLOCK_SIZE, PA_NUM_KV_HEADS, PA_HEAD_SIZE, 16u / PA_ESIZE);
      const uint64_t a = block + uint64_t(e) * PA_ESIZE;
      if (PA_FP8_CACHE) w[i / 4u] |= uint(Kv8(a).v) << (8u * (i % 4u));
      else w[i / 2u] |= uint(Kv16(a).v) << (16u * (i % 2u));
    }
    return w;
  }
  const uint e = vka_kv_element_in_block(PA_LAYOUT, is_value, t, h, d, PA_BLOCK_SIZE, PA_NUM_KV_HEADS, PA_HEAD_SIZE, 16u / PA_ESIZE);
  const uint64_t a = block + uint64_t(e) * PA_ESIZE;
  if (PA_FP8_CACHE) return uvec4(Kv8x8(a).v, 0u, 0u);
  return Kv16x8(a).v;
}

// The eight values of pa_load_raw8's word, fp8 values times `fp8_scale`.
void pa_decode_raw8(uvec4 w, float fp8_scale, out float x[8]) {
  if (PA_FP8_CACHE) {
    [[unroll]] for (uint i = 0; i < 8u; ++i) {
      const uint b = (w[i / 4u] >> (8u * (i % 4u))) & 0xFFu;
      x[i] = (PA_CACHE_DTYPE == DTYPE_FP8_E4M3 ? vka_e4m3_to_f32(b) : vka_e5m2_to_f32(b)) * fp8_scale;
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

// Logit of score s (scale * q.k) for local row r at q_pos and key k_pos:
// softcap, masks and biases as configured (attention_logits.glsl).
float pa_logit(PaItem it, float s, uint r, int q_pos, int k_pos) {
  const uint row = it.row_start + r;
  VkaLogitParams p;
  p.has_softcap = PA_HAS_SOFTCAP != 0u;
  p.softcap = hdr.softcap;
  p.has_window = PA_HAS_WINDOW != 0u;
  p.window = hdr.sliding_window;
  p.has_alibi = PA_HAS_ALIBI != 0u;
  p.alibi_slope = PA_HAS_ALIBI != 0u ? fwords[hdr.alibi_at + it.kv_head * PA_GQA + row % PA_GQA] : 0.0;
  p.ctx = it.ctx;
  float bias = 0.0;
  if (PA_HAS_QQ_BIAS != 0u) {
    const int kj = k_pos - it.ctx;
    const uint qi = row / PA_GQA;
    if (kj >= 0 && uint(kj) < hdr.qq_bias_stride && qi < hdr.qq_bias_rows)
      bias = fwords[hdr.qq_bias_at + qi * hdr.qq_bias_stride + uint(kj)];
  }
  return vka_logit(s, p, q_pos, k_pos, it.kv_end, bias);
}

// Element d of local row r's result, from its unnormalised accumulator o and
// softmax state (m, l): the output (and LSE, written with d == 0) without
// split-KV; with it, this segment's partial result for paged_attention_reduce.
void pa_write_result(PaItem it, uint r, uint d, float o, float m, float l) {
  if (r >= it.row_count) return;
  const uint row = it.row_start + r;
  const uint token = it.token0 + row / PA_GQA;
  const uint head = it.kv_head * PA_GQA + row % PA_GQA;
  if (PA_SPLIT != 0u) {
    const uint slot = (token * hdr.num_q_heads + head) * hdr.num_segments + it.segment;
    scratch[slot * PA_HEAD_SIZE + d] = o;
    if (d == 0u) {
      const uint stats = hdr.num_tokens * hdr.num_q_heads * hdr.num_segments * PA_HEAD_SIZE;
      scratch[stats + slot * 2u] = m;
      scratch[stats + slot * 2u + 1u] = l;
    }
    return;
  }
  float factor, lse;
  const float sink = PA_HAS_SINKS != 0u ? fwords[hdr.sinks_at + head] : VKA_NEG_INF;
  vka_softmax_finish(m, l, PA_HAS_SINKS != 0u, sink, factor, lse);
  const float value = o * factor;
  const uint at = pc.out_offset + token * pc.out_token_stride + head * pc.out_head_stride + d;
  if (PA_OUT_DTYPE == DTYPE_F32) out32[at] = value;
  else if (PA_OUT_DTYPE == DTYPE_F16 || PA_OUT_DTYPE == DTYPE_BF16) out16[at] = uint16_t(vka_encode(PA_OUT_DTYPE, value));
  else out8[at] = uint8_t(vka_encode(PA_OUT_DTYPE, value * hdr.out_inv_scale));
  if (PA_WRITE_LSE != 0u && d == 0u) lse_out[pc.lse_offset + token * pc.lse_token_stride + head] = lse;
}
#endif
