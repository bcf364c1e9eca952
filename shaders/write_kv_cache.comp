#version 460
// write_kv_cache (vLLM's reshape_and_cache): one workgroup per token; its
// invocations stride over the token's num_kv_heads * head_size elements of K
// and V, convert them to the cache dtype and store them into the token's slot.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_buffer_reference : require

#include "abi/write_kv_cache.h"
#include "grid.glsl"
#include "kv_addressing.glsl"
#include "number_formats.glsl"
#include "status.glsl"

layout(local_size_x_id = 7) in;

// Inputs are bound once per element width; the dtype spec constant picks one.
layout(set = 0, binding = 1, std430) readonly buffer Key16 { uint16_t key16[]; };
layout(set = 0, binding = 1, std430) readonly buffer Key32 { float key32[]; };
layout(set = 0, binding = 2, std430) readonly buffer Value16 { uint16_t value16[]; };
layout(set = 0, binding = 2, std430) readonly buffer Value32 { float value32[]; };
layout(set = 0, binding = 3, std430) readonly buffer Slots { int slot_words[]; };

layout(buffer_reference, std430, buffer_reference_align = 2) buffer Cache16 { uint16_t v; };
layout(buffer_reference, std430, buffer_reference_align = 1) buffer Cache8 { uint8_t v; };

float load_input(bool is_value, uint index) {
  if (WKV_INPUT_DTYPE == DTYPE_F32) return is_value ? value32[index] : key32[index];
  uint bits = uint(is_value ? value16[index] : key16[index]);
  return WKV_INPUT_DTYPE == DTYPE_BF16 ? vka_bf16_to_f32(bits) : vka_f16_to_f32(bits);
}

void store_cache(uint64_t address, float x) {
  if (WKV_CACHE_DTYPE == DTYPE_F16) Cache16(address).v = uint16_t(vka_f32_to_f16(x));
  else if (WKV_CACHE_DTYPE == DTYPE_BF16) Cache16(address).v = uint16_t(vka_f32_to_bf16(x));
  else if (WKV_CACHE_DTYPE == DTYPE_FP8_E4M3) Cache8(address).v = uint8_t(vka_f32_to_e4m3(x));
  else Cache8(address).v = uint8_t(vka_f32_to_e5m2(x));
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
  const uint num_slots_lo = pc.num_blocks * WKV_BLOCK_SIZE;   // < 2^32: checked on the host
  if (slot_hi != 0 || uint(slot_lo) >= num_slots_lo) {
    if (gl_LocalInvocationIndex == 0u) vka_report(STATUS_SLOT_OUT_OF_RANGE, token, uint(slot_lo), uint(slot_hi));
    return;
  }
  const uint slot = uint(slot_lo);
  const uint block = slot / WKV_BLOCK_SIZE;
  const uint t = slot % WKV_BLOCK_SIZE;

  const uint esize = (WKV_CACHE_DTYPE == DTYPE_F16 || WKV_CACHE_DTYPE == DTYPE_BF16) ? 2u : 1u;
  const uint x = 16u / esize;
  const uint64_t block_bytes = uint64_t(WKV_BLOCK_SIZE) * WKV_NUM_KV_HEADS * WKV_HEAD_SIZE * esize;
  const uint64_t k_block = vka_kv_block_address(pc.chunk_table_address, pc.num_k_chunks, pc.blocks_per_chunk, block_bytes, false, block);
  const uint64_t v_block = vka_kv_block_address(pc.chunk_table_address, pc.num_k_chunks, pc.blocks_per_chunk, block_bytes, true, block);

  for (uint i = gl_LocalInvocationIndex; i < WKV_NUM_KV_HEADS * WKV_HEAD_SIZE; i += WKV_WORKGROUP_SIZE) {
    const uint h = i / WKV_HEAD_SIZE;
    const uint d = i % WKV_HEAD_SIZE;
    float k = load_input(false, pc.key_offset + token * pc.key_token_stride + h * pc.key_head_stride + d);
    float v = load_input(true, pc.value_offset + token * pc.value_token_stride + h * pc.value_head_stride + d);
    if (WKV_CACHE_DTYPE == DTYPE_FP8_E4M3 || WKV_CACHE_DTYPE == DTYPE_FP8_E5M2) {
      k *= pc.k_inv_scale;
      v *= pc.v_inv_scale;
    }
    uint ke = vka_kv_element_in_block(WKV_LAYOUT, false, t, h, d, WKV_BLOCK_SIZE, WKV_NUM_KV_HEADS, WKV_HEAD_SIZE, x);
    uint ve = vka_kv_element_in_block(WKV_LAYOUT, true, t, h, d, WKV_BLOCK_SIZE, WKV_NUM_KV_HEADS, WKV_HEAD_SIZE, x);
    store_cache(k_block + uint64_t(ke) * esize, k);
    store_cache(v_block + uint64_t(ve) * esize, v);
  }
}
