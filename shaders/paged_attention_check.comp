#version 460
// paged_attention's checks of what the device holds: one invocation per
// sequence reads its query_start_loc pair and seq_len and reports the first
// that the attention kernels cannot use (they keep every index in bounds
// without reporting: reports from their prologue slow decode measurably,
// DEVELOPERS.md). Dispatched beside the attention kernel, with no barrier between:
// both only read the batch.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require

#define VKATTN_PAGED_ATTENTION_CHECK
#include "abi/paged_attention.h"
#include "grid.glsl"

// The bindings header's constants: only the batch's views are read here.
const uint PA_HEAD_SIZE = 16u;
const uint PA_NUM_Q_HEADS = 1u;
const uint PA_OUT_DTYPE = DTYPE_F32;
const uint PA_HAS_SINKS = 0u;
#include "paged_attention_bindings.glsl"

layout(local_size_x_id = 4) in;

void main() {
  const uint s = vka_linear_workgroup(pc.grid_x) * PC_WORKGROUP_SIZE + gl_LocalInvocationIndex;
  if (s >= pc.num_seqs) return;
  const int q0 = pa_query_start(s), q1 = pa_query_start(s + 1u), len = pa_seq_len(s);
  // The keys a sequence may have: its block-table row's, and with prefix
  // prefill's contiguous suffix the new tokens besides.
  const uint64_t keys = uint64_t(pc.max_blocks_per_seq) * PC_BLOCK_SIZE + ((pc.flags & PA_FLAG_SUFFIX) != 0u ? uint(max(q1 - q0, 0)) : 0u);
  // A batch that starts past token 0 would leave the first tokens' rows
  // unwritten: a silent wrong answer, so it is reported like any other.
  if (q0 < 0 || q1 < q0 || q1 > int(pc.num_tokens) || (s == 0u && q0 != 0))
    vka_report(STATUS_QUERY_START_LOC, s, uint(q0), uint(q1));
  else if (len < 0 || (len > 0 && len < q1 - q0)) vka_report(STATUS_SEQ_LEN, s, uint(len), uint(q1 - q0));
  else if (uint64_t(len) > keys) vka_report(STATUS_SEQ_LEN_TABLE, s, uint(len), uint(min(keys, 0xFFFFFFFFul)));
  else if (PC_ONE_TILE_PER_SEQ != 0u && uint(q1 - q0) * PC_GQA > PC_BM)
    vka_report(STATUS_QUERY_LEN_PLAN, s, uint(q1 - q0), PC_BM / PC_GQA);
}
