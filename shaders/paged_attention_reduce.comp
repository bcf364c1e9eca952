#version 460
// Split-KV reduce: one workgroup per (token, q head) row combines the row's
// segments (unnormalised output, running max, exp-sum) with the same online
// softmax as the attention kernel, adds the sink once, and writes the output
// (and LSE).
//
// Every step spreads the segments over the invocations: a loop over up to 64
// segments' loads, one after another, cost more than the attention itself
// for a single long sequence (the loads waited on each other's latency).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_control_flow_attributes : require

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

const uint WG = PR_WORKGROUP_SIZE;
const uint MAX_SEGMENTS = 256u;   // the plan's limit
shared float seg_weight[MAX_SEGMENTS];   // exp(m_s - m) of each segment
shared float partial[PR_WORKGROUP_SIZE];

// Max (is_max) or sum of every invocation's x, returned to all.
float workgroup_reduce(float x, bool is_max) {
  const uint tid = gl_LocalInvocationIndex;
  partial[tid] = x;
  barrier();
  for (uint half_n = WG / 2u; half_n > 0u; half_n /= 2u) {
    if (tid < half_n) partial[tid] = is_max ? max(partial[tid], partial[tid + half_n]) : partial[tid] + partial[tid + half_n];
    barrier();
  }
  const float r = partial[0];
  barrier();   // partial is reused by the next reduction
  return r;
}

void main() {
  const uint row = vka_linear_workgroup(pc.grid_x);
  if (row >= pc.num_items) return;
  const uint tid = gl_LocalInvocationIndex;
  const uint token = row / hdr.num_q_heads, head = row % hdr.num_q_heads;
  const uint S = hdr.num_segments;
  const uint stats = hdr.num_tokens * hdr.num_q_heads * S * PR_HEAD_SIZE + row * S * 2u;

  float m = VKA_NEG_INF;
  for (uint s = tid; s < S; s += WG) m = max(m, scratch[stats + s * 2u]);
  m = workgroup_reduce(m, true);
  float l = 0.0;
  for (uint s = tid; s < S; s += WG) {
    const float w = vka_exp_diff(scratch[stats + s * 2u], m);
    seg_weight[s] = w;
    l += scratch[stats + s * 2u + 1u] * w;
  }
  l = workgroup_reduce(l, false);   // its barriers also publish seg_weight

  float factor, lse;
  const float sink = PR_HAS_SINKS != 0u ? fwords[hdr.sinks_at + head] : VKA_NEG_INF;
  vka_softmax_finish(m, l, PR_HAS_SINKS != 0u, sink, factor, lse);

  const uint o0 = row * S * PR_HEAD_SIZE;
  for (uint d = tid; d < PR_HEAD_SIZE; d += WG) {
    // Eight segments' loads at a time, issued before any is used.
    float acc = 0.0;
    for (uint s = 0; s < S; s += 8u) {
      float v[8];
      [[unroll]] for (uint i = 0; i < 8u; ++i) v[i] = s + i < S ? scratch[o0 + (s + i) * PR_HEAD_SIZE + d] : 0.0;
      [[unroll]] for (uint i = 0; i < 8u; ++i) acc += s + i < S ? v[i] * seg_weight[s + i] : 0.0;
    }
    const float value = acc * factor;
    const uint at = pc.out_offset + token * pc.out_token_stride + head * pc.out_head_stride + d;
    if (PR_OUT_DTYPE == DTYPE_F32) out32[at] = value;
    else if (PR_OUT_DTYPE == DTYPE_F16) out16[at] = uint16_t(vka_f32_to_f16(value));
    else if (PR_OUT_DTYPE == DTYPE_BF16) out16[at] = uint16_t(vka_f32_to_bf16(value));
    else if (PR_OUT_DTYPE == DTYPE_FP8_E4M3) out8[at] = uint8_t(vka_f32_to_e4m3(value * hdr.out_inv_scale));
    else out8[at] = uint8_t(vka_f32_to_e5m2(value * hdr.out_inv_scale));
  }
  if (PR_WRITE_LSE != 0u && tid == 0u) lse_out[pc.lse_offset + token * pc.lse_token_stride + head] = lse;
}
