#version 460
// Split-KV reduce: one workgroup per (token, q head) row combines the row's
// segments (unnormalised output, running max, exp-sum) with the same online
// softmax as the attention kernel, adds the sink once, and writes the output
// (and LSE).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require

#define VKATTN_PAGED_ATTENTION_REDUCE
#include "abi/paged_attention.h"
#include "grid.glsl"
#include "number_formats.glsl"
#include "online_softmax.glsl"
#include "status.glsl"

layout(local_size_x_id = 4) in;

layout(set = 0, binding = 1, std430) writeonly buffer Out16 { uint16_t out16[]; };
layout(set = 0, binding = 1, std430) writeonly buffer Out32 { float out32[]; };
layout(set = 0, binding = 1, std430) writeonly buffer Out8 { uint8_t out8[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Lse { float lse_out[]; };
layout(set = 0, binding = 3, std430) readonly buffer MetaF { PagedAttentionMeta hdr; float fwords[]; };
layout(set = 0, binding = 4, std430) readonly buffer Scratch { float scratch[]; };

void main() {
  const uint row = vka_linear_workgroup(pc.grid_x);
  if (row >= pc.num_items) return;
  const uint token = row / hdr.num_q_heads, head = row % hdr.num_q_heads;
  const uint S = hdr.num_segments;
  const uint stats = hdr.num_tokens * hdr.num_q_heads * S * PR_HEAD_SIZE;

  // Combine the segments' (m, l): every invocation does it (S is small).
  float m = VKA_NEG_INF;
  for (uint s = 0; s < S; ++s) m = max(m, scratch[stats + (row * S + s) * 2u]);
  float l = 0.0;
  for (uint s = 0; s < S; ++s) l += scratch[stats + (row * S + s) * 2u + 1u] * vka_exp_diff(scratch[stats + (row * S + s) * 2u], m);
  float factor, lse;
  const float sink = PR_HAS_SINKS != 0u ? fwords[hdr.sinks_at + head] : VKA_NEG_INF;
  vka_softmax_finish(m, l, PR_HAS_SINKS != 0u, sink, factor, lse);

  for (uint d = gl_LocalInvocationIndex; d < PR_HEAD_SIZE; d += PR_WORKGROUP_SIZE) {
    float acc = 0.0;
    for (uint s = 0; s < S; ++s)
      acc += scratch[(row * S + s) * PR_HEAD_SIZE + d] * vka_exp_diff(scratch[stats + (row * S + s) * 2u], m);
    const float value = acc * factor;
    const uint at = pc.out_offset + token * pc.out_token_stride + head * pc.out_head_stride + d;
    if (PR_OUT_DTYPE == DTYPE_F32) out32[at] = value;
    else if (PR_OUT_DTYPE == DTYPE_F16) out16[at] = uint16_t(vka_f32_to_f16(value));
    else if (PR_OUT_DTYPE == DTYPE_BF16) out16[at] = uint16_t(vka_f32_to_bf16(value));
    else if (PR_OUT_DTYPE == DTYPE_FP8_E4M3) out8[at] = uint8_t(vka_f32_to_e4m3(value * hdr.out_inv_scale));
    else out8[at] = uint8_t(vka_f32_to_e5m2(value * hdr.out_inv_scale));
  }
  if (PR_WRITE_LSE != 0u && gl_LocalInvocationIndex == 0u) lse_out[pc.lse_offset + token * pc.lse_token_stride + head] = lse;
}
