// The prefill kernel's phase profile, for developers' builds (CMake option
// VKATTN_PHASE_PROFILE; off in every other build, whose modules hold no
// trace of it). paged_prefill.comp then reads the subgroup clock
// (VK_KHR_shader_clock, which the Context enables where offered) between the
// phases of each work item, and each subgroup adds its cycles per phase, in
// units of 2^PP_PROFILE_SHIFT, to its dispatch's status slot from word
// PP_PROFILE_WORD0 on (past the report's words, which the host never clears),
// then its tiles and 1, so that the sums average per subgroup-tile and per
// subgroup-item. A Context of such a build prints the sums over its slots
// when it is destroyed (one case per process, then: `vkattn bench prefill
// --filter ...`). The clock reads hold the compiler's scheduling at each
// phase's end and the module's registers change, so a profiled build runs
// slower than the product: compare phases' shares, not the times.
#ifndef VKATTN_ABI_PHASE_PROFILE_H
#define VKATTN_ABI_PHASE_PROFILE_H

// The phases, in the order a subgroup meets them; each is the time from the
// end of the one before.
#define PP_PROFILE_PROLOGUE 0u     /* from the workgroup's start: the item, Q, tiles 0 and 1 located, tile 0 staged */
#define PP_PROFILE_TILE_START 1u   /* a partly seen tile's non-finite pass, the next keys and lookups issued, the rows' classes */
#define PP_PROFILE_S 2u            /* S = Q K^T */
#define PP_PROFILE_LOADS 3u        /* the next tile's K/V loads issued (where LOADS_AFTER_S; else in the tile's start) */
#define PP_PROFILE_SOFTMAX 4u      /* logits and masks, the online softmax, P, O's rescale */
#define PP_PROFILE_PV 5u           /* O += P V (with V_LAG, where one block holds both: the softmax's too) */
#define PP_PROFILE_LOCATE 6u       /* tile t + 2's keys located */
#define PP_PROFILE_BARRIER_1 7u    /* the wait for every subgroup to be done with the staged tile */
#define PP_PROFILE_STAGING 8u      /* the next tile staged (waiting for its loads) */
#define PP_PROFILE_BARRIER_2 9u    /* the wait for the staging */
#define PP_PROFILE_EPILOGUE 10u    /* the results */
#define PP_PROFILE_PHASES 11u
#define PP_PROFILE_TILES PP_PROFILE_PHASES          /* then the subgroup's tiles */
#define PP_PROFILE_ITEMS (PP_PROFILE_PHASES + 1u)   /* and 1 per subgroup and item */
#define PP_PROFILE_WORDS (PP_PROFILE_PHASES + 2u)
#define PP_PROFILE_WORD0 8u   /* in a status slot (abi/common.h: the report takes words 0 to STATUS_CLAIM) */
#define PP_PROFILE_SHIFT 6u   /* a subgroup's sums over a large item would pass 2^32 cycles */

#ifdef __cplusplus
namespace vkattn::abi {
inline const char* phase_profile_name(unsigned phase) {
  switch (phase) {
    case PP_PROFILE_PROLOGUE: return "prologue (per item)";
    case PP_PROFILE_TILE_START: return "tile start";
    case PP_PROFILE_S: return "S = Q K^T";
    case PP_PROFILE_LOADS: return "next loads issued";
    case PP_PROFILE_SOFTMAX: return "logits, softmax, rescale";
    case PP_PROFILE_PV: return "P V";
    case PP_PROFILE_LOCATE: return "tile t+2 located";
    case PP_PROFILE_BARRIER_1: return "barrier before staging";
    case PP_PROFILE_STAGING: return "staging";
    case PP_PROFILE_BARRIER_2: return "barrier after staging";
    case PP_PROFILE_EPILOGUE: return "epilogue (per item)";
    default: return "?";
  }
}
}  // namespace vkattn::abi
#endif
#endif
