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
#include "online_softmax.glsl"

const uint PA_HEAD_SIZE = PR_HEAD_SIZE;
const uint PA_NUM_Q_HEADS = PR_NUM_Q_HEADS;
const uint PA_OUT_DTYPE = PR_OUT_DTYPE;
const uint PA_HAS_SINKS = PR_HAS_SINKS;
#include "paged_attention_bindings.glsl"

layout(local_size_x_id = 4) in;

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
  if (row >= pc.num_workgroups) return;
  const uint tid = gl_LocalInvocationIndex;
  const uint token = row / PA_NUM_Q_HEADS, head = row % PA_NUM_Q_HEADS;
  // Tokens past the batch (a replay plan's spare capacity) have no partial
  // results; a query_start_loc out of range was reported by the attention kernel.
  if (token >= uint(clamp(pa_query_start(pc.num_seqs), 0, int(pc.num_tokens)))) return;
  // Prefix prefill's skip_decode: a sequence of one new token is left as it is.
  if ((pc.flags & PA_FLAG_SKIP_DECODE) != 0u && pa_token_is_single(token)) return;
  const uint S = pc.num_segments;
  const uint slot0 = pa_partial_slot(token, head, 0u);
  const uint stats = pa_partial_stats(slot0);
  const uint o0 = pa_partial_out(slot0, 0u);

  // Every load that does not depend on another is issued first: the sink, the
  // segments' (m, l), and the first EARLY segments' outputs of column tid.
  const float sink = PR_HAS_SINKS != 0u ? pa_sink(head, tid == 0u) : VKA_NEG_INF;
  float early[EARLY];
  [[unroll]] for (uint i = 0; i < EARLY; ++i)
    early[i] = i < S && tid < PR_HEAD_SIZE ? workspace[o0 + i * PR_HEAD_SIZE + tid] : 0.0;
  const float my_m = tid < S ? workspace[stats + tid * 2u] : VKA_NEG_INF;   // segment tid's
  float m = my_m, l = tid < S ? workspace[stats + tid * 2u + 1u] : 0.0;
  for (uint s = tid + WG; s < S; s += WG) vka_softmax_merge(m, l, workspace[stats + s * 2u], workspace[stats + s * 2u + 1u]);
  workgroup_merge(m, l);
  for (uint s = tid; s < S; s += WG) seg_weight[s] = vka_exp_diff(s == tid ? my_m : workspace[stats + s * 2u], m);
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
      [[unroll]] for (uint i = 0; i < 8u; ++i) v[i] = s + i < S ? workspace[o0 + (s + i) * PR_HEAD_SIZE + d] : 0.0;
      [[unroll]] for (uint i = 0; i < 8u; ++i) acc += s + i < S ? v[i] * seg_weight[s + i] : 0.0;
    }
    pa_write_out(token, head, d, acc * factor);
  }
  if (PR_WRITE_LSE != 0u && tid == 0u) pa_write_lse(token, head, lse);
}
