// A bad index found in a kernel's key loop, reported after the loop rather
// than where it is found. Kernels that define PA_DEFERRED_BLOCK_REPORT (both
// matrix kernels) keep the first bad key or list entry in a register of the
// invocation that looked it up (pa_bad_key, by a select), and report it once
// after their key loop: the report's code in the loop's lookups (an atomic
// on the status buffer and a buffer memory barrier, never executed) made the
// paged prefill kernel about 5% slower, and even an atomicMin on shared
// memory in its place 3-4% (DEVELOPERS.md, "The lookups priced, and the
// block-table report"). The op module says what the index is and reports it
// (pa_report_bad_block); this file holds what both op modules share.
// The prefill kernel reports once per workgroup through a shared word
// (abi/paged_attention.h's PP_SHARED_BYTES counts it); the decode kernel,
// whose shared memory is counted to the byte, once per subgroup
// (PA_DEFERRED_REPORT_PER_SUBGROUP).
#ifndef VKATTN_DEFERRED_REPORT_GLSL
#define VKATTN_DEFERRED_REPORT_GLSL
uint pa_bad_key = 0xFFFFFFFFu;
// K: the subgroup's first bad key (shuffles: as the kernels' softmax). A
// macro, not a function, so that the modules do not move with the form.
#define PA_SUBGROUP_BAD_KEY(K) \
  uint K = pa_bad_key;         \
  for (uint i = 1u; i < gl_SubgroupSize; i *= 2u) K = min(K, subgroupShuffleXor(K, i))
#if !PA_DEFERRED_REPORT_PER_SUBGROUP
shared uint pa_first_bad_block_key;
void pa_bad_block_init() {
  if (gl_LocalInvocationIndex == 0u) pa_first_bad_block_key = 0xFFFFFFFFu;   // (a barrier follows before pa_bad_block_note)
}
// After the key loop, in uniform control flow, before a barrier.
void pa_bad_block_note() {
  PA_SUBGROUP_BAD_KEY(k);
  if (gl_SubgroupInvocationID == 0u && k != 0xFFFFFFFFu) atomicMin(pa_first_bad_block_key, k);
}
#endif
#endif
