// Block-sparse attention's mask and score mods (FlexAttention's mask_mod and
// score_mod): the built-in ones, chosen by spec constants (abi/block_sparse.h
// defines their bits and meaning), and a variant's own: modules built with
// VKA_MOD=1 include its file as "vka_mod.glsl" (cmake/block_sparse_variant.cmake
// puts it there). Such a file defines either or both of
//   bool vka_mask_mod(uint b, uint h, int q_idx, int kv_idx);
//   float vka_score_mod(float score, uint b, uint h, int q_idx, int kv_idx);
// with `#define VKA_MASK_MOD 1` / `#define VKA_SCORE_MOD 1`, and may read
// buffers it declares with VKA_MOD_BUFFER(slot, type, name) (slots 0 to 3,
// declared in slot order where the variant is compiled with their dtype and
// extent, which the host checks each view against; its reads must stay
// within that extent: each is bound to exactly the view the caller passes). b and h
// are the batch and q head (the mask builder: the mask row's z and h);
// q_idx and kv_idx the query's and key's indices. The variant's mask is
// ANDed with the built-in one; its score mod runs after the built-in ones.
// Include after abi/block_sparse.h (block_sparse_io.glsl and
// block_mask_build.comp do).
#ifndef VKATTN_BLOCK_SPARSE_MODS_GLSL
#define VKATTN_BLOCK_SPARSE_MODS_GLSL
#include "attention_logits.glsl"

// Element offset of view v (binding v + 1) inside its binding.
uint bs_view_offset(uint v) {
  const uint w = v < 4u ? pc.view_offsets0 : v < 8u ? pc.view_offsets1 : v < 12u ? pc.view_offsets2 : pc.view_offsets3;
  return (w >> (8u * (v % 4u))) & 0xFFu;
}

layout(set = 0, binding = BS_BINDING_ALIBI, std430) readonly buffer BsAlibi { float bs_alibi[]; };
layout(set = 0, binding = BS_BINDING_DOCUMENT, std430) readonly buffer BsDocument { int bs_document[]; };
layout(set = 0, binding = BS_BINDING_REL_BIAS, std430) readonly buffer BsRelBias { float bs_rel_bias[]; };
layout(set = 0, binding = BS_BINDING_BIAS, std430) readonly buffer BsBias { float bs_bias[]; };

#define VKA_MOD_BUFFER(slot, type, name) \
  layout(set = 0, binding = BS_BINDING_MOD0 + (slot), std430) readonly buffer VkaModBuffer##slot { type name[]; };
#if VKA_MOD
#include "vka_mod.glsl"
#endif
#ifndef VKA_MASK_MOD
#define VKA_MASK_MOD 0
#endif
#ifndef VKA_SCORE_MOD
#define VKA_SCORE_MOD 0
#endif

// Whether the scores depend on more than q.k (no tile then skips the
// per-element pass).
const bool BS_HAS_SCORE_MOD = BS_SCORE_MODS != 0u || VKA_SCORE_MOD != 0;

// The document mod's ids: a module that defines BS_DOCUMENT_IDS_GIVEN to 1
// passes the pair's ids (doc_q, doc_k) to bs_mask, read before the mods run
// (the document modules from shared memory, block_sparse_io.glsl; the mask
// builder from the buffer), which measured faster there than reading them
// where the mod asks; the others' mods read them from the buffer.
// BS_MASK_READING_DOCUMENTS(b, h, q_idx, kv_idx) is bs_mask with the ids
// read from the buffer, in either.
#ifndef BS_DOCUMENT_IDS_GIVEN
#define BS_DOCUMENT_IDS_GIVEN 0
#endif
#if BS_DOCUMENT_IDS_GIVEN
#define BS_DOC_PARAMS , int doc_q, int doc_k
#define BS_DOC_ARGS , doc_q, doc_k
#else
#define BS_DOC_PARAMS
#define BS_DOC_ARGS
#endif

// Whether the built-in mod `mod` (one bit) admits key kv_idx for the query
// at position q_pos among the keys.
bool bs_builtin_admits(uint mod, int q_pos, int kv_idx BS_DOC_PARAMS) {
  if (mod == BS_MASK_CAUSAL) return kv_idx <= q_pos;
  if (mod == BS_MASK_WINDOW) return q_pos - kv_idx < pc.window;
  if (mod == BS_MASK_PREFIX) return kv_idx < pc.prefix_len;
  // BS_MASK_DOCUMENT: the host keeps q positions inside the document ids.
  const uint n = pc.kv_len;
  if (q_pos < 0 || uint(q_pos) >= n) return false;
#if BS_DOCUMENT_IDS_GIVEN
  return doc_q == doc_k;
#else
  return bs_document[bs_view_offset(BS_BINDING_DOCUMENT - 1u) + uint(q_pos)] ==
         bs_document[bs_view_offset(BS_BINDING_DOCUMENT - 1u) + uint(kv_idx)];
#endif
}

// What the built-in mod `mod` (one bit) says of every pair of the query
// positions [q_lo, q_hi] and the keys [k_lo, k_hi] (keys inside Lkv): .x
// whether it admits them all, .y whether it admits none. Each is a
// sufficient test (false where unsure) of bs_builtin_admits, case by case.
// The document mod's answer over the ids is the caller's (docs: whether
// every pair's two ids are equal, whether no pair's are), taken where every
// query position lies inside the keys.
bvec2 bs_builtin_range(uint mod, int q_lo, int q_hi, int k_lo, int k_hi, bvec2 docs) {
  if (mod == BS_MASK_CAUSAL) return bvec2(k_hi <= q_lo, k_lo > q_hi);
  if (mod == BS_MASK_WINDOW) return bvec2(q_hi - k_lo < pc.window, q_lo - k_hi >= pc.window);
  if (mod == BS_MASK_PREFIX) return bvec2(k_hi < pc.prefix_len, k_lo >= pc.prefix_len);
  const int n = int(pc.kv_len);
  const bool inside = q_lo >= 0 && q_hi < n, outside = q_hi < 0 || q_lo >= n;
  return bvec2(inside && docs.x, outside || (inside && docs.y));
}

// bs_mask over every pair of the queries [q_lo, q_hi] (indices, as q_idx)
// and the keys [k_lo, k_hi] (inside Lkv): .x whether every pair counts, .y
// whether none does; sufficient tests, false where unsure (a variant's mask
// mod is never known to admit every pair). It spares the mask builder the
// pairs' own tests where the answer is one for the whole block. (The
// attention kernels do not call it: their subgroups walk a tile's keys in
// step, so a part of a partial tile answered whole saves no time while
// another part of it is tested pair by pair; DEVELOPERS.md, "The mask
// builder's blocks answered whole".)
bvec2 bs_mask_range(int q_lo, int q_hi, int k_lo, int k_hi, bvec2 docs) {
  const int p_lo = q_lo + pc.q_offset, p_hi = q_hi + pc.q_offset;
  bool all_every = true, all_none = false, any_every = false, any_none = true;
  [[unroll]] for (uint bit = 1u; bit <= BS_MASK_DOCUMENT; bit <<= 1) {
    if (((BS_MASK_ALL | BS_MASK_ANY) & bit) == 0u) continue;
    const bvec2 r = bs_builtin_range(bit, p_lo, p_hi, k_lo, k_hi, docs);
    if ((BS_MASK_ALL & bit) != 0u) {
      all_every = all_every && r.x;
      all_none = all_none || r.y;
    }
    if ((BS_MASK_ANY & bit) != 0u) {
      any_every = any_every || r.x;
      any_none = any_none && r.y;
    }
  }
  // As bs_mask: with no built-in mask every pair counts; else those that
  // every mod of `all` admits (when it has any), and those some mod of `any` does.
  const bool unmasked = BS_MASK_ALL == 0u && BS_MASK_ANY == 0u;
  const bool every = unmasked || (BS_MASK_ALL != 0u && all_every) || any_every;
  const bool none = !unmasked && (BS_MASK_ALL == 0u || all_none) && any_none;
  return bvec2(every && VKA_MASK_MOD == 0, none);
}

// The mask of a partial block's pair (kv_idx < Lkv).
bool bs_mask(uint b, uint h, int q_idx, int kv_idx BS_DOC_PARAMS) {
  const int q_pos = q_idx + pc.q_offset;
  bool all = BS_MASK_ALL != 0u, any = false;
  [[unroll]] for (uint bit = 1u; bit <= BS_MASK_DOCUMENT; bit <<= 1) {
    if ((BS_MASK_ALL & bit) != 0u) all = all && bs_builtin_admits(bit, q_pos, kv_idx BS_DOC_ARGS);
    if ((BS_MASK_ANY & bit) != 0u) any = any || bs_builtin_admits(bit, q_pos, kv_idx BS_DOC_ARGS);
  }
  bool ok = (BS_MASK_ALL == 0u && BS_MASK_ANY == 0u) || all || any;
#if VKA_MASK_MOD
  ok = ok && vka_mask_mod(b, h, q_idx, kv_idx);
#endif
  return ok;
}

#if BS_DOCUMENT_IDS_GIVEN
// Whether some mask mod compares document ids.
const bool BS_DOCUMENTS = ((BS_MASK_ALL | BS_MASK_ANY) & BS_MASK_DOCUMENT) != 0u;
// The id of position pos, or 0 where no mod reads one or pos lies outside the keys.
int bs_document_id(int pos) {
  return BS_DOCUMENTS && pos >= 0 && uint(pos) < pc.kv_len ? bs_document[bs_view_offset(BS_BINDING_DOCUMENT - 1u) + uint(pos)] : 0;
}
bool bs_mask_reading_documents(uint b, uint h, int q_idx, int kv_idx) {
  return bs_mask(b, h, q_idx, kv_idx, bs_document_id(q_idx + pc.q_offset), bs_document_id(kv_idx));
}
#define BS_MASK_READING_DOCUMENTS(b, h, q_idx, kv_idx) bs_mask_reading_documents(b, h, q_idx, kv_idx)
#else
#define BS_MASK_READING_DOCUMENTS(b, h, q_idx, kv_idx) bs_mask(b, h, q_idx, kv_idx)
#endif

// The logit of score s (scale * q.k) for a counted pair.
float bs_score(float s, uint b, uint h, int q_idx, int kv_idx) {
  if ((BS_SCORE_MODS & BS_SCORE_SOFTCAP) != 0u) s = vka_softcap(s, pc.softcap);
  if ((BS_SCORE_MODS & BS_SCORE_ALIBI) != 0u)
    s += bs_alibi[bs_view_offset(BS_BINDING_ALIBI - 1u) + h] * float(kv_idx - (q_idx + pc.q_offset));
  if ((BS_SCORE_MODS & BS_SCORE_REL_BIAS) != 0u)
    s += bs_rel_bias[bs_view_offset(BS_BINDING_REL_BIAS - 1u) + h * (pc.q_len + pc.kv_len - 1u) +
                     uint(kv_idx - q_idx + int(pc.q_len) - 1)];
  if ((BS_SCORE_MODS & BS_SCORE_BIAS) != 0u)
    s += bs_bias[bs_view_offset(BS_BINDING_BIAS - 1u) + (h * pc.q_len + uint(q_idx)) * pc.kv_len + uint(kv_idx)];
#if VKA_SCORE_MOD
  s = vka_score_mod(s, b, h, q_idx, kv_idx);
#endif
  return s;
}
#endif
