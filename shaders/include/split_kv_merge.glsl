// Merging split-KV segments: each (token, q head) row's partial results
// (paged_attention_bindings.glsl) combined with the online softmax, by the
// reduce (paged_attention_reduce.comp, few segments per row) or, with
// PA_FLAG_MERGE_LAST, by the attention kernel's workgroup that finishes its
// item's segments last (abi/paged_attention.h has the counters' rules). One
// code for both, so a merged output is the same whichever merged it.
//
// The includer has included paged_attention_bindings.glsl (and, for the
// attention kernels' part, paged_attention_io.glsl's PaItem).
#ifndef VKATTN_SPLIT_KV_MERGE_GLSL
#define VKATTN_SPLIT_KV_MERGE_GLSL
#include "online_softmax.glsl"

// Segments whose loads are issued together (a loop of one segment's loads
// after another waits on each one's latency in turn), in unrolled loops: the
// decode kernel, the merge's user on GPUs, takes 8 (#define PA_MERGE_BATCH 8u
// and PA_MERGE_LOOP [[unroll]] before including this). Elsewhere one at a
// time in loops: lavapipe compiles every pipeline through LLVM at its first
// use, and with the decode kernel's form the scalar kernel's and the
// reduce's pipelines took about 1.7x as long to compile (CI's tests 40%
// longer).
#ifndef PA_MERGE_BATCH
#define PA_MERGE_BATCH 1u
#define PA_MERGE_LOOP [[dont_unroll]]
#endif

// Row (token, head)'s segments combined for dims d0 .. d0 + 3: the
// unnormalised output `acc` and the row's running max m and exp-sum l.
void pa_merge_segments4(uint token, uint head, uint d0, out vec4 acc, out float m, out float l) {
  const uint S = pc.num_segments;
  const uint slot0 = pa_partial_slot(token, head, 0u);
  const uint stats = pa_partial_stats(slot0), o0 = pa_partial_out(slot0, d0);
  acc = vec4(0.0);
  m = VKA_NEG_INF;
  l = 0.0;
  for (uint s0 = 0u; s0 < S; s0 += PA_MERGE_BATCH) {
    float ms[PA_MERGE_BATCH], ls[PA_MERGE_BATCH];
    vec4 os[PA_MERGE_BATCH];
    PA_MERGE_LOOP for (uint i = 0u; i < PA_MERGE_BATCH; ++i) {
      const uint s = s0 + i, at = o0 + s * PA_HEAD_SIZE;
      const bool here = s < S;
#ifdef VKATTN_PAGED_ATTENTION_REDUCE
      ms[i] = here ? workspace_in[stats + s * 2u] : VKA_NEG_INF;
      ls[i] = here ? workspace_in[stats + s * 2u + 1u] : 0.0;
      os[i] = here ? vec4(workspace_in[at], workspace_in[at + 1u], workspace_in[at + 2u], workspace_in[at + 3u]) : vec4(0.0);
#else
      const vec2 st = here ? workspace_in2[(stats + s * 2u) / 2u] : vec2(VKA_NEG_INF, 0.0);
      ms[i] = st.x;
      ls[i] = st.y;
      os[i] = here ? workspace_in4[at / 4u] : vec4(0.0);
#endif
    }
    float mn = m;
    PA_MERGE_LOOP for (uint i = 0u; i < PA_MERGE_BATCH; ++i) mn = max(mn, ms[i]);
    const float alpha = vka_exp_diff(m, mn);
    acc *= alpha;
    l *= alpha;
    PA_MERGE_LOOP for (uint i = 0u; i < PA_MERGE_BATCH; ++i) {
      const float w = vka_exp_diff(ms[i], mn);
      acc += w * os[i];
      l += w * ls[i];
    }
    m = mn;
  }
}

// Writes dims d0 .. d0 + 3 of row (token, head) from its merged segments (and
// its LSE, by the invocation of dim 0), the sink counted once.
void pa_write_merged4(uint token, uint head, uint d0) {
  vec4 acc;
  float m, l, factor, lse;
  pa_merge_segments4(token, head, d0, acc, m, l);
  const float sink = PA_HAS_SINKS != 0u ? pa_sink(head, d0 == 0u) : VKA_NEG_INF;
  vka_softmax_finish(m, l, PA_HAS_SINKS != 0u, sink, factor, lse);
  PA_MERGE_LOOP for (uint i = 0u; i < 4u; ++i) pa_write_out(token, head, d0 + i, acc[i] * factor);
  if (PA_WRITE_LSE != 0u && d0 == 0u) pa_write_lse(token, head, lse);
}

#ifndef VKATTN_PAGED_ATTENTION_REDUCE
// How the segments' partial results reach the merging workgroup: CUDA's
// threadFenceReduction pattern in Vulkan's scoped form. Every invocation
// makes its own partial results available at queue-family scope (a release
// fence: it waits for its stores), a workgroup barrier, then one invocation
// counts the arrival with a relaxed atomic; in the workgroup that arrives
// last, after a barrier, every invocation's acquire fence makes the others'
// results visible to its loads. The matrix kernels use the Vulkan memory
// model (cooperative matrices bring it), where partial results are
// `nonprivate` rather than `coherent` (made available or visible access by
// access), which made the merge faster on an H200, as did these fences over
// an atomic with acquire-release semantics of its own (DEVELOPERS.md,
// "Merging split-KV segments in the attention kernel" has the figures). The
// scalar kernel keeps GLSL's own model: `coherent` and memoryBarrierBuffer.
#if VKATTN_PATH != 0
#define PA_MERGE_RELEASE() memoryBarrier(gl_ScopeQueueFamily, gl_StorageSemanticsBuffer, gl_SemanticsRelease | gl_SemanticsMakeAvailable)
#define PA_MERGE_BARRIER() controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup, gl_StorageSemanticsBuffer | gl_StorageSemanticsShared, gl_SemanticsAcquireRelease)
#define PA_MERGE_ACQUIRE() memoryBarrier(gl_ScopeQueueFamily, gl_StorageSemanticsBuffer, gl_SemanticsAcquire | gl_SemanticsMakeVisible)
#else
#define PA_MERGE_RELEASE() memoryBarrierBuffer()
#define PA_MERGE_BARRIER() barrier()
#define PA_MERGE_ACQUIRE() memoryBarrierBuffer()
#endif
shared uint pa_merge_flag;   // (abi/paged_attention.h counts it in the kernels' shared memory)

// Counts this workgroup's segment of item `item` (items numbered before
// segments) and returns whether it was the item's last: one invocation.
bool pa_arrive_last(uint item) {
  const uint at = pa_view_offset(PA_VIEW_WORKSPACE) + item;
  const uint before = atomicAdd(workspace_words[at], 1u);
  if (before >= pc.num_segments) {   // not this run's count: the counter was not 0
    vka_report(STATUS_SPLIT_COUNTER, item, before, pc.num_segments);
    return false;
  }
  if (before + 1u < pc.num_segments) return false;
  atomicExchange(workspace_words[at], 0u);   // for the next run
  return true;
}

// After this workgroup wrote its segment of item `it` (workgroup wg): with
// PA_FLAG_MERGE_LAST, the item's last segment to arrive writes its rows'
// outputs from all segments. Every invocation calls it (it has barriers).
void pa_merge_when_last(PaItem it, uint wg) {
  if ((pc.flags & PA_FLAG_MERGE_LAST) == 0u) return;
  PA_MERGE_RELEASE();   // this invocation's partial results, before the arrival
  PA_MERGE_BARRIER();
  if (gl_LocalInvocationIndex == 0u) pa_merge_flag = pa_arrive_last(wg / pc.num_segments) ? 1u : 0u;
  PA_MERGE_BARRIER();
  if (pa_merge_flag == 0u) return;
  PA_MERGE_ACQUIRE();   // the other segments' results, after their arrivals
  const uint quads = PA_HEAD_SIZE / 4u;
  for (uint e = gl_LocalInvocationIndex; e < it.row_count * quads; e += PA_WORKGROUP_SIZE) {
    const uint r = e / quads;
    pa_write_merged4(it.token0 + PA_ROW_QUERY(it, r), PA_ROW_HEAD(it, r), (e % quads) * 4u);
  }
}
#endif
#endif
