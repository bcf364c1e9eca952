// The views of paged_attention and paged_attention_reduce (abi/paged_attention.h
// numbers them), and the reads and writes both kernels make through them:
// batch metadata, per-head parameters, the output row, and split-KV partial
// results in the workspace.
//
// The includer defines PA_HEAD_SIZE, PA_NUM_Q_HEADS, PA_OUT_DTYPE and
// PA_HAS_SINKS (spec constants, or aliases of the reduce's) first.
#ifndef VKATTN_PAGED_ATTENTION_BINDINGS_GLSL
#define VKATTN_PAGED_ATTENTION_BINDINGS_GLSL
#include "number_formats.glsl"
#include "status.glsl"

layout(set = 0, binding = PA_BINDING_Q, std430) readonly buffer Q16 { uint16_t q16[]; };
layout(set = 0, binding = PA_BINDING_OUT, std430) writeonly buffer Out16 { uint16_t out16[]; };
layout(set = 0, binding = PA_BINDING_OUT, std430) writeonly buffer Out32 { float out32[]; };
layout(set = 0, binding = PA_BINDING_OUT, std430) writeonly buffer Out8 { uint8_t out8[]; };
#if defined(PA_PREFILL_KERNEL) && PA_PREFILL_KERNEL   // (the reduce and the check include this alone)
layout(set = 0, binding = PA_BINDING_OUT, std430) writeonly buffer OutVec { uvec4 out_vec[]; };
#include "out_words.glsl"
#endif
layout(set = 0, binding = PA_BINDING_LSE, std430) writeonly buffer Lse { float lse_out[]; };
layout(set = 0, binding = PA_BINDING_QUERY_START_LOC, std430) readonly buffer QueryStartLoc { int query_start_words[]; };
layout(set = 0, binding = PA_BINDING_SEQ_LENS, std430) readonly buffer SeqLens { int seq_len_words[]; };
layout(set = 0, binding = PA_BINDING_BLOCK_TABLE, std430) readonly buffer BlockTable { int block_table_words[]; };
layout(set = 0, binding = PA_BINDING_ALIBI, std430) readonly buffer Alibi { float alibi_words[]; };
layout(set = 0, binding = PA_BINDING_SINKS, std430) readonly buffer Sinks { float sink_words[]; };
layout(set = 0, binding = PA_BINDING_QQ_BIAS, std430) readonly buffer QqBias { float qq_bias_words[]; };
// The attention kernels write partial results, the reduce reads them
// (workspace_in); with PA_FLAG_MERGE_LAST an attention kernel's last segment
// reads the others' as well (a segment's 4 dims, or its (m, l) pair, in one
// load: abi/paged_attention.h aligns them), and counts arrivals in the
// counter words. Shared across workgroups: `nonprivate` in the matrix
// kernels, whose fences make them available and visible, `coherent` in the
// scalar one (split_kv_merge.glsl says why).
#ifdef VKATTN_PAGED_ATTENTION_REDUCE
layout(set = 0, binding = PA_BINDING_WORKSPACE, std430) readonly buffer Workspace { float workspace_in[]; };
#else
#if VKATTN_PATH != 0
#define PA_WORKSPACE_SHARED nonprivate
#else
#define PA_WORKSPACE_SHARED coherent
#endif
layout(set = 0, binding = PA_BINDING_WORKSPACE, std430) PA_WORKSPACE_SHARED writeonly buffer Workspace { float workspace[]; };
layout(set = 0, binding = PA_BINDING_WORKSPACE, std430) coherent buffer WorkspaceWords { uint workspace_words[]; };
layout(set = 0, binding = PA_BINDING_WORKSPACE, std430) PA_WORKSPACE_SHARED readonly buffer WorkspaceIn4 { vec4 workspace_in4[]; };
layout(set = 0, binding = PA_BINDING_WORKSPACE, std430) PA_WORKSPACE_SHARED readonly buffer WorkspaceIn2 { vec2 workspace_in2[]; };
#if defined(PA_PREFILL_KERNEL) && PA_PREFILL_KERNEL
layout(set = 0, binding = PA_BINDING_WORKSPACE, std430) PA_WORKSPACE_SHARED writeonly buffer WorkspaceOut4 { vec4 workspace4[]; };
#endif
#endif

// Element offset of view `v` (PA_VIEW_*) inside its binding.
uint pa_view_offset(uint v) {
  const uint w = v < 4u ? pc.view_offsets0 : v < 8u ? pc.view_offsets1 : pc.view_offsets2;
  return (w >> (8u * (v % 4u))) & 0xFFu;
}

int pa_query_start(uint s) { return query_start_words[pa_view_offset(PA_VIEW_QUERY_START_LOC) + s]; }
int pa_seq_len(uint s) { return seq_len_words[pa_view_offset(PA_VIEW_SEQ_LENS) + s]; }
// The sequence whose new tokens include token `token`: the last one starting
// at or before it, by search.
uint pa_token_seq(uint token) {
  uint lo = 0u, hi = pc.num_seqs;
  while (hi - lo > 1u) {
    const uint mid = (lo + hi) / 2u;
    if (pa_query_start(mid) <= int(token)) lo = mid;
    else hi = mid;
  }
  return lo;
}
// Sequence s's new tokens [q0, q1): query_start_loc clamped into the tokens
// and made non-decreasing (the check dispatch reports what it changed). The
// one clamp of the attention kernels (pa_load_item) and the reduce.
void pa_query_range(uint s, out int q0, out int q1) {
  const int T = int(pc.num_tokens);
  q0 = clamp(pa_query_start(s), 0, T);
  q1 = clamp(pa_query_start(s + 1u), q0, T);
}
int pa_query_len(uint s) {
  int q0, q1;
  pa_query_range(s, q0, q1);
  return q1 - q0;
}

float pa_alibi_slope(uint head) { return alibi_words[pa_view_offset(PA_VIEW_ALIBI) + head]; }

// Reports a slope that is not finite (its row's output is then meaningless).
void pa_alibi_slope_checked(uint head) {
  const float s = pa_alibi_slope(head);
  if (isnan(s) || isinf(s)) vka_report(STATUS_PARAMETER, 0u, head, floatBitsToUint(s));
}

// The sink of a head; `check`: report NaN or +inf (a sink of -inf is none).
float pa_sink(uint head, bool check) {
  const float s = sink_words[pa_view_offset(PA_VIEW_SINKS) + head];
  if (check && (isnan(s) || s == uintBitsToFloat(0x7F800000u))) vka_report(STATUS_PARAMETER, 1u, head, floatBitsToUint(s));
  return s;
}

// The index of element d of the output row (token, head) in the out view.
// (A macro, so that each writer's code is what it was written inline.)
#define PA_OUT_AT(token, head, d) (pa_view_offset(PA_VIEW_OUT) + (token) * pc.out_token_stride + (head) * pc.out_head_stride + (d))

// Element d of the output row (token, head), encoded to the output dtype.
void pa_write_out(uint token, uint head, uint d, float value) {
  const uint at = PA_OUT_AT(token, head, d);
  if (PA_OUT_DTYPE == DTYPE_F32) out32[at] = value;
  else if (PA_OUT_DTYPE == DTYPE_F16 || PA_OUT_DTYPE == DTYPE_BF16) out16[at] = uint16_t(vka_encode(PA_OUT_DTYPE, value));
  else out8[at] = uint8_t(vka_encode(PA_OUT_DTYPE, value * pc.out_inv_scale));
}

void pa_write_lse(uint token, uint head, float lse) {
  lse_out[pa_view_offset(PA_VIEW_LSE) + token * pc.lse_token_stride + head] = lse;
}

// Split-KV partial results, after the arrival counters (abi/paged_attention.h):
// for every (token, head, segment), head_size floats of unnormalised output,
// then, after all of them, its (m, l) pair.
uint pa_partial_slot(uint token, uint head, uint segment) {
  return (token * PA_NUM_Q_HEADS + head) * pc.num_segments + segment;
}
uint pa_partials_at() {
  const uint end = pa_view_offset(PA_VIEW_WORKSPACE) + PA_SPLIT_COUNTER_WORDS;
  return (end + PA_PARTIALS_ALIGN_WORDS - 1u) / PA_PARTIALS_ALIGN_WORDS * PA_PARTIALS_ALIGN_WORDS;
}
uint pa_partial_stats(uint slot) {
  return pa_partials_at() + pc.num_tokens * PA_NUM_Q_HEADS * pc.num_segments * PA_HEAD_SIZE + slot * 2u;
}
uint pa_partial_out(uint slot, uint d) { return pa_partials_at() + slot * PA_HEAD_SIZE + d; }

#ifndef VKATTN_PAGED_ATTENTION_REDUCE
void pa_write_partial_stats(uint slot, float m, float l) {
  workspace[pa_partial_stats(slot)] = m;
  workspace[pa_partial_stats(slot) + 1u] = l;
}
void pa_write_partial(uint token, uint head, uint segment, uint d, float o, float m, float l) {
  const uint slot = pa_partial_slot(token, head, segment);
  workspace[pa_partial_out(slot, d)] = o;
  if (d == 0u) pa_write_partial_stats(slot, m, l);
}
#endif
#endif
