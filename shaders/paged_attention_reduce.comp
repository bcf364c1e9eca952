#version 460
// Split-KV reduce: one workgroup per (token, q head) row combines the row's
// segments (unnormalised output, running max, exp-sum) with the same online
// softmax as the attention kernel, adds the sink once, and writes the output
// (and LSE).
//
// Every step spreads the segments over the invocations, and loads that do not
// depend on each other are issued together: a loop over up to 64 segments'
// loads, one after another, cost more than the attention itself for a single
// long sequence (the loads waited on each other's latency).
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
// Segments whose partial outputs an invocation loads before the statistics
// are combined, so that both loads are in flight together.
const uint EARLY = 16u;
shared float seg_weight[MAX_SEGMENTS];   // exp(m_s - m) of each segment
shared float partial_m[PR_WORKGROUP_SIZE], partial_l[PR_WORKGROUP_SIZE];

// Combines every invocation's (m, l) into the row's, returned to all: one
// tree, each step the online-softmax merge.
void workgroup_merge(inout float m, inout float l) {
  const uint tid = gl_LocalInvocationIndex;
  partial_m[tid] = m;
  partial_l[tid] = l;
  barrier();
  for (uint half_n = WG / 2u; half_n > 0u; half_n /= 2u) {
    if (tid < half_n) {
      float mm = partial_m[tid], ll = partial_l[tid];
      vka_softmax_merge(mm, ll, partial_m[tid + half_n], partial_l[tid + half_n]);
      partial_m[tid] = mm;
      partial_l[tid] = ll;
    }
    barrier();
  }
  m = partial_m[0];
  l = partial_l[0];
}

void main() {
  const uint row = vka_linear_workgroup(pc.grid_x);
  if (row >= pc.num_items) return;
  const uint tid = gl_LocalInvocationIndex;
  const uint token = row / hdr.num_q_heads, head = row % hdr.num_q_heads;
  const uint S = hdr.num_segments;
  const uint stats = hdr.num_tokens * hdr.num_q_heads * S * PR_HEAD_SIZE + row * S * 2u;
  const uint o0 = row * S * PR_HEAD_SIZE;

  // Every load that does not depend on another is issued first: the sink, the
  // segments' (m, l), and the first EARLY segments' outputs of column tid.
  const float sink = PR_HAS_SINKS != 0u ? fwords[hdr.sinks_at + head] : VKA_NEG_INF;
  float early[EARLY];
  [[unroll]] for (uint i = 0; i < EARLY; ++i)
    early[i] = i < S && tid < PR_HEAD_SIZE ? scratch[o0 + i * PR_HEAD_SIZE + tid] : 0.0;
  const float my_m = tid < S ? scratch[stats + tid * 2u] : VKA_NEG_INF;   // segment tid's
  float m = my_m, l = tid < S ? scratch[stats + tid * 2u + 1u] : 0.0;
  for (uint s = tid + WG; s < S; s += WG) vka_softmax_merge(m, l, scratch[stats + s * 2u], scratch[stats + s * 2u + 1u]);
  workgroup_merge(m, l);
  for (uint s = tid; s < S; s += WG) seg_weight[s] = vka_exp_diff(s == tid ? my_m : scratch[stats + s * 2u], m);
  barrier();

  float factor, lse;
  vka_softmax_finish(m, l, PR_HAS_SINKS != 0u, sink, factor, lse);

  for (uint d = tid; d < PR_HEAD_SIZE; d += WG) {
    float acc = 0.0;
    uint s = 0u;
    if (d == tid) {
      [[unroll]] for (uint i = 0; i < EARLY; ++i) acc += i < S ? early[i] * seg_weight[i] : 0.0;
      s = EARLY;
    }
    // The rest eight segments at a time, their loads issued before any is used.
    for (; s < S; s += 8u) {
      float v[8];
      [[unroll]] for (uint i = 0; i < 8u; ++i) v[i] = s + i < S ? scratch[o0 + (s + i) * PR_HEAD_SIZE + d] : 0.0;
      [[unroll]] for (uint i = 0; i < 8u; ++i) acc += s + i < S ? v[i] * seg_weight[s + i] : 0.0;
    }
    const float value = acc * factor;
    const uint at = pc.out_offset + token * pc.out_token_stride + head * pc.out_head_stride + d;
    if (PR_OUT_DTYPE == DTYPE_F32) out32[at] = value;
    else if (PR_OUT_DTYPE == DTYPE_F16 || PR_OUT_DTYPE == DTYPE_BF16) out16[at] = uint16_t(vka_encode(PR_OUT_DTYPE, value));
    else out8[at] = uint8_t(vka_encode(PR_OUT_DTYPE, value * hdr.out_inv_scale));
  }
  if (PR_WRITE_LSE != 0u && tid == 0u) lse_out[pc.lse_offset + token * pc.lse_token_stride + head] = lse;
}
