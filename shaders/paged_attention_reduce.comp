#version 460
// Split-KV reduce: combines each (token, q head) row's segments (unnormalised
// output, running max, exp-sum) with the same online softmax as the attention
// kernel, adds the sink once, and writes the output (and LSE). Two shapes:
//   - many segments (long decode contexts, few rows): one workgroup per row,
//     the segments spread over its invocations (below);
//   - few segments (PR_ROW_PARALLEL: prefix prefill's 2, short splits; many
//     rows): each invocation merges its row's segments alone and writes 4
//     dims, with no barrier. One workgroup per row, whose merge tree costs
//     barriers, had made the reduce of an 8k-token prefix prefill take 1.9 ms.
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
const uint PA_WRITE_LSE = PR_WRITE_LSE;
#include "paged_attention_bindings.glsl"
#include "split_kv_merge.glsl"

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

// Whether row `row` (token, head) has partial results to combine: not past
// the batch (a replay plan's spare capacity; a query_start_loc out of range
// was reported by the attention kernel), not a one-token sequence that
// prefix prefill's skip_decode leaves as it is, and not a sequence whose
// prefill-kernel items wrote their outputs themselves (PA_FLAG_SUFFIX_PASSES:
// the rows pa_load_item routes to that kernel).
bool row_has_results(uint token) {
  if (token >= uint(clamp(pa_query_start(pc.num_seqs), 0, int(pc.num_tokens)))) return false;
  const bool skip_decode = (pc.flags & PA_FLAG_SKIP_DECODE) != 0u, passes = (pc.flags & PA_FLAG_SUFFIX_PASSES) != 0u;
  if (!skip_decode && !passes) return true;
  const int len = pa_query_len(pa_token_seq(token));
  if (skip_decode && len == 1) return false;
  return !passes || uint(len) * PR_GQA < pc.route_rows;
}

// PR_ROW_PARALLEL: this invocation's row and 4 dims (pc.num_workgroups counts
// rows), up to PR_ROW_PARALLEL_MAX_SEGMENTS segments: the merge the attention
// kernels run themselves with PA_FLAG_MERGE_LAST (split_kv_merge.glsl).
void merge_row_parallel() {
  const uint per_row = PR_HEAD_SIZE / 4u;
  const uint local = gl_LocalInvocationIndex / per_row;
  if (local >= PR_ROWS_PER_WORKGROUP(PR_WORKGROUP_SIZE, PR_HEAD_SIZE)) return;
  const uint row = vka_linear_workgroup(pc.grid_x) * PR_ROWS_PER_WORKGROUP(PR_WORKGROUP_SIZE, PR_HEAD_SIZE) + local;
  if (row >= pc.num_workgroups) return;
  const uint token = row / PA_NUM_Q_HEADS;
  if (!row_has_results(token)) return;
  pa_write_merged4(token, row % PA_NUM_Q_HEADS, (gl_LocalInvocationIndex % per_row) * 4u);
}

void main() {
  if (PR_ROW_PARALLEL != 0u) {
    merge_row_parallel();
    return;
  }
  const uint row = vka_linear_workgroup(pc.grid_x);
  if (row >= pc.num_workgroups) return;
  const uint tid = gl_LocalInvocationIndex;
  const uint token = row / PA_NUM_Q_HEADS, head = row % PA_NUM_Q_HEADS;
  if (!row_has_results(token)) return;
  const uint S = pc.num_segments;
  const uint slot0 = pa_partial_slot(token, head, 0u);
  const uint stats = pa_partial_stats(slot0);
  const uint o0 = pa_partial_out(slot0, 0u);

  // Every load that does not depend on another is issued first: the sink, the
  // segments' (m, l), and the first EARLY segments' outputs of column tid.
  const float sink = PR_HAS_SINKS != 0u ? pa_sink(head, tid == 0u) : VKA_NEG_INF;
  float early[EARLY];
  [[unroll]] for (uint i = 0; i < EARLY; ++i)
    early[i] = i < S && tid < PR_HEAD_SIZE ? workspace_in[o0 + i * PR_HEAD_SIZE + tid] : 0.0;
  const float my_m = tid < S ? workspace_in[stats + tid * 2u] : VKA_NEG_INF;   // segment tid's
  float m = my_m, l = tid < S ? workspace_in[stats + tid * 2u + 1u] : 0.0;
  for (uint s = tid + WG; s < S; s += WG) vka_softmax_merge(m, l, workspace_in[stats + s * 2u], workspace_in[stats + s * 2u + 1u]);
  workgroup_merge(m, l);
  for (uint s = tid; s < S; s += WG) seg_weight[s] = vka_exp_diff(s == tid ? my_m : workspace_in[stats + s * 2u], m);
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
      [[unroll]] for (uint i = 0; i < 8u; ++i) v[i] = s + i < S ? workspace_in[o0 + (s + i) * PR_HEAD_SIZE + d] : 0.0;
      [[unroll]] for (uint i = 0; i < 8u; ++i) acc += s + i < S ? v[i] * seg_weight[s + i] : 0.0;
    }
    pa_write_out(token, head, d, acc * factor);
  }
  if (PR_WRITE_LSE != 0u && tid == 0u) pa_write_lse(token, head, lse);
}
