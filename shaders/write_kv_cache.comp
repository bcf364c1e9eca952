#version 460
// write_kv_cache (vLLM's reshape_and_cache): one workgroup per token. Each
// invocation takes 8 consecutive elements of one head (16 into an fp8 cache:
// WKV_PIECE_ELEMENTS; head_size is a multiple of 16), loads them as 16-byte
// words when the inputs allow, converts them to the cache dtype and stores
// them with one 16-byte store wherever the layout keeps them contiguous
// (every layout but split V).
// An f16 or bf16 cache written from inputs of its own dtype takes the bits
// as they are: no conversion (the conversions' instructions, not memory, had
// bounded the kernel there).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : require

#include "abi/write_kv_cache.h"
#include "grid.glsl"
#include "kv_addressing.glsl"
#include "number_formats.glsl"
#include "status.glsl"

layout(local_size_x_id = 7) in;

// Inputs are bound once per access width; spec constants pick one.
layout(set = 0, binding = 1, std430) readonly buffer Key16 { uint16_t key16[]; };
layout(set = 0, binding = 1, std430) readonly buffer Key32 { float key32[]; };
layout(set = 0, binding = 1, std430) readonly buffer KeyVec { uvec4 key_vec[]; };
layout(set = 0, binding = 2, std430) readonly buffer Value16 { uint16_t value16[]; };
layout(set = 0, binding = 2, std430) readonly buffer Value32 { float value32[]; };
layout(set = 0, binding = 2, std430) readonly buffer ValueVec { uvec4 value_vec[]; };
layout(set = 0, binding = 3, std430) readonly buffer Slots { int slot_words[]; };

layout(buffer_reference, std430, buffer_reference_align = 16) buffer Cache16x8 { uvec4 v; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer Cache16 { uint16_t v; };
layout(buffer_reference, std430, buffer_reference_align = 1) buffer Cache8 { uint8_t v; };

const bool FP8_CACHE = WKV_CACHE_DTYPE == DTYPE_FP8_E4M3 || WKV_CACHE_DTYPE == DTYPE_FP8_E5M2;
const uint ESIZE = FP8_CACHE ? 1u : 2u;

// A 16-bit input value as f32 (exact; NaNs stay NaNs). The hardware's
// conversion for f16, a shift for bf16.
float half_word(uint bits) {
  return WKV_INPUT_DTYPE == DTYPE_BF16 ? uintBitsToFloat(bits << 16) : unpackHalf2x16(bits).x;
}
const bool SAME_DTYPE = WKV_INPUT_DTYPE == WKV_CACHE_DTYPE;   // f16 or bf16 to a cache of the same dtype

// Eight consecutive 16-bit input elements starting at `index`, as they are.
uvec4 load8_bits(bool is_value, uint index) {
  if (WKV_VECTOR_LOADS != 0u) return is_value ? value_vec[index / 8u] : key_vec[index / 8u];
  uvec4 w;
  [[unroll]] for (uint i = 0; i < 4u; ++i) {
    const uint lo = uint(is_value ? value16[index + 2u * i] : key16[index + 2u * i]);
    const uint hi = uint(is_value ? value16[index + 2u * i + 1u] : key16[index + 2u * i + 1u]);
    w[i] = lo | (hi << 16);
  }
  return w;
}

// Eight consecutive input elements starting at `index` (a multiple of 8 when vectorized).
void load8(bool is_value, uint index, out float x[8]) {
  if (WKV_VECTOR_LOADS != 0u) {
    if (WKV_INPUT_DTYPE == DTYPE_F32) {
      [[unroll]] for (uint w = 0; w < 2u; ++w) {
        uvec4 q = is_value ? value_vec[index / 4u + w] : key_vec[index / 4u + w];
        [[unroll]] for (uint i = 0; i < 4u; ++i) x[w * 4u + i] = uintBitsToFloat(q[i]);
      }
    } else {
      uvec4 q = is_value ? value_vec[index / 8u] : key_vec[index / 8u];
      [[unroll]] for (uint i = 0; i < 4u; ++i) {
        if (WKV_INPUT_DTYPE == DTYPE_F16) {   // a pair per conversion
          const vec2 f = unpackHalf2x16(q[i]);
          x[2u * i] = f.x;
          x[2u * i + 1u] = f.y;
        } else {
          x[2u * i] = half_word(q[i] & 0xFFFFu);
          x[2u * i + 1u] = half_word(q[i] >> 16);
        }
      }
    }
    return;
  }
  [[unroll]] for (uint i = 0; i < 8u; ++i) {
    if (WKV_INPUT_DTYPE == DTYPE_F32) x[i] = is_value ? value32[index + i] : key32[index + i];
    else x[i] = half_word(uint(is_value ? value16[index + i] : key16[index + i]));
  }
}

// Stores 16 encoded fp8 elements (one 16-byte store where contiguous, as
// store8 otherwise).
void store16_fp8(uint64_t address, bool contiguous, uint64_t stride_bytes, uint code[16]) {
  if (contiguous) {
    uvec4 w = uvec4(0);
    [[unroll]] for (uint i = 0; i < 16u; ++i) w[i / 4u] |= code[i] << (8u * (i % 4u));
    Cache16x8(address).v = w;
    return;
  }
  [[unroll]] for (uint i = 0; i < 16u; ++i) Cache8(address + i * stride_bytes).v = uint8_t(code[i]);
}

// Stores 8 encoded 16-bit elements (caches other than fp8); `contiguous`:
// element i lives at `address + 2 * i`, otherwise at `address + i * stride_bytes`.
void store8(uint64_t address, bool contiguous, uint64_t stride_bytes, uint code[8]) {
  if (contiguous) {
    uvec4 w;
    [[unroll]] for (uint i = 0; i < 4u; ++i) w[i] = code[2u * i] | (code[2u * i + 1u] << 16);
    Cache16x8(address).v = w;
    return;
  }
  [[unroll]] for (uint i = 0; i < 8u; ++i) Cache16(address + i * stride_bytes).v = uint16_t(code[i]);
}

void main() {
  const uint token = vka_linear_workgroup(pc.grid_x);
  if (token >= pc.num_tokens) return;

  int slot_lo, slot_hi;
  if (WKV_SLOT_DTYPE == DTYPE_I64) {
    slot_lo = slot_words[pc.slot_offset * 2u + token * 2u];
    slot_hi = slot_words[pc.slot_offset * 2u + token * 2u + 1u];
  } else {
    slot_lo = slot_words[pc.slot_offset + token];
    slot_hi = slot_lo < 0 ? -1 : 0;
  }
  if (slot_hi < 0) return;   // padding
  const uint num_slots = pc.num_blocks * WKV_BLOCK_SIZE;   // < 2^31: checked on the host
  if (slot_hi != 0 || uint(slot_lo) >= num_slots) {
    if (gl_LocalInvocationIndex == 0u) vka_report(STATUS_SLOT_OUT_OF_RANGE, token, uint(slot_lo), uint(slot_hi));
    return;
  }
  const uint block = uint(slot_lo) / WKV_BLOCK_SIZE;
  const uint t = uint(slot_lo) % WKV_BLOCK_SIZE;

  const uint x = 16u / ESIZE;
  const uint64_t block_bytes = uint64_t(WKV_BLOCK_SIZE) * WKV_NUM_KV_HEADS * WKV_HEAD_SIZE * ESIZE;
  const uint64_t k_block = vka_kv_block_address(pc.chunk_table_address, pc.num_k_chunks, pc.blocks_per_chunk, pc.chunk_magic, block_bytes, false, block);
  const uint64_t v_block = vka_kv_block_address(pc.chunk_table_address, pc.num_k_chunks, pc.blocks_per_chunk, pc.chunk_magic, block_bytes, true, block);
  // Only the split layout's V places consecutive dims apart (block_size elements).
  const bool v_contiguous = WKV_LAYOUT != KV_LAYOUT_SPLIT;
  const uint64_t v_stride = uint64_t(WKV_BLOCK_SIZE) * ESIZE;

  const uint PIECE = WKV_PIECE_ELEMENTS(FP8_CACHE);
  for (uint i = gl_LocalInvocationIndex; i < WKV_NUM_KV_HEADS * WKV_HEAD_SIZE / PIECE; i += WKV_WORKGROUP_SIZE) {
    const uint h = (i * PIECE) / WKV_HEAD_SIZE;
    const uint d = (i * PIECE) % WKV_HEAD_SIZE;
    const uint k_at = pc.key_offset + token * pc.key_token_stride + h * pc.key_head_stride + d;
    const uint v_at = pc.value_offset + token * pc.value_token_stride + h * pc.value_head_stride + d;
    const uint ke = vka_kv_element_in_block(WKV_LAYOUT, false, t, h, d, WKV_BLOCK_SIZE, WKV_NUM_KV_HEADS, WKV_HEAD_SIZE, x);
    const uint ve = vka_kv_element_in_block(WKV_LAYOUT, true, t, h, d, WKV_BLOCK_SIZE, WKV_NUM_KV_HEADS, WKV_HEAD_SIZE, x);
    if (FP8_CACHE) {
      uint kc[16], vc[16];
      [[unroll]] for (uint half8 = 0; half8 < 2u; ++half8) {
        float k[8], v[8];
        load8(false, k_at + 8u * half8, k);
        load8(true, v_at + 8u * half8, v);
        [[unroll]] for (uint j = 0; j < 8u; ++j) {
          kc[8u * half8 + j] = vka_encode(WKV_CACHE_DTYPE, k[j] * pc.k_inv_scale);
          vc[8u * half8 + j] = vka_encode(WKV_CACHE_DTYPE, v[j] * pc.v_inv_scale);
        }
      }
      store16_fp8(k_block + uint64_t(ke), true, 0, kc);
      store16_fp8(v_block + uint64_t(ve), v_contiguous, v_stride, vc);
      continue;
    }
    uint kc[8], vc[8];
    if (SAME_DTYPE) {
      const uvec4 kb = load8_bits(false, k_at), vb = load8_bits(true, v_at);
      [[unroll]] for (uint j = 0; j < 8u; ++j) {
        kc[j] = (kb[j / 2u] >> (16u * (j % 2u))) & 0xFFFFu;
        vc[j] = (vb[j / 2u] >> (16u * (j % 2u))) & 0xFFFFu;
      }
    } else {
      float k[8], v[8];
      load8(false, k_at, k);
      load8(true, v_at, v);
      [[unroll]] for (uint j = 0; j < 8u; ++j) {
        kc[j] = vka_encode(WKV_CACHE_DTYPE, k[j]);
        vc[j] = vka_encode(WKV_CACHE_DTYPE, v[j]);
      }
    }
    store8(k_block + uint64_t(ke) * ESIZE, true, 0, kc);
    store8(v_block + uint64_t(ve) * ESIZE, v_contiguous, v_stride, vc);
  }
}
