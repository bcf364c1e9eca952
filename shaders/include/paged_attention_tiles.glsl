// The paged op's tile walk: how the tiled kernels (paged_prefill.comp, and
// paged_attention.comp on the scalar path) visit a work item's keys, and what
// each visit needs to know. An op built on the same kernels provides the same
// functions (block_sparse_io.glsl); the kernels call nothing else of the
// item's key range.
//   pa_tile_count / pa_tile_key0: the tiles, PA_BN keys each, in visit order;
//   PA_TILE_KEY_LOADS: whether pa_tile_key0 reads memory (the prefill kernel
//     then reads each tile's key once, and carries it);
//   pa_key_in_item: whether a key of a tile exists for the item (others load as 0);
//   pa_tiles_setup, pa_tile_partly_seen: tiles that some row sees in part
//     (attention_nonfinite.glsl stages their non-finite V values as 0);
//   pa_subgroup_setup, pa_subgroup_skips, pa_subgroup_whole: for 16 rows,
//     tiles none of them sees, and tiles all of them see with no per-element term;
//   (the setups return what the others take, PaTiles and PaRows, which the
//   kernel keeps as locals);
//   pa_item_logit: a score's logit for a row and key, -inf where masked;
//   pa_item_nonfinite_term: attention_nonfinite.glsl's correction.
// Include after paged_attention_io.glsl (and attention_nonfinite.glsl in the
// matrix kernels).
#ifndef VKATTN_PAGED_ATTENTION_TILES_GLSL
#define VKATTN_PAGED_ATTENTION_TILES_GLSL

const int PA_TILE_KEYS = int(PA_BN);

// The prefill kernel's first tile starts at a multiple of 16 keys (its
// key_at lookups and the decode kernel's tiles line up); the scalar kernel's
// at the item's first key.
int pa_tile_origin(PaItem it) { return PA_PREFILL_KERNEL != 0 ? it.kv_begin & ~15 : it.kv_begin; }
int pa_tile_count(PaItem it) {
  const int a0 = pa_tile_origin(it);
  return it.kv_end > a0 ? (it.kv_end - a0 + PA_TILE_KEYS - 1) / PA_TILE_KEYS : 0;
}
int pa_tile_key0(PaItem it, int t) { return pa_tile_origin(it) + t * PA_TILE_KEYS; }
#define PA_TILE_KEY_LOADS 0
bool pa_key_in_item(PaItem it, int k) { return k >= it.kv_begin && k < it.kv_end; }

#ifdef VKATTN_ATTENTION_NONFINITE_GLSL   // the matrix kernels'
struct PaTiles {
  int seen_lo, seen_hi;   // keys every row of the item sees
};
PaTiles pa_tiles_setup(PaItem it) {
  PaTiles s;
  seen_by_every_row(it, s.seen_lo, s.seen_hi);
  return s;
}
bool pa_tile_partly_seen(PaItem it, PaTiles s, int t, int k0) { return partly_seen(k0, PA_TILE_KEYS, s.seen_lo, s.seen_hi); }
float pa_item_nonfinite_term(PaItem it, uint row, uint d) {
  return nonfinite_term(it, row, d, pa_tile_origin(it), PA_TILE_KEYS);
}
#endif

// Rows row0 .. row0 + 15: which keys all of them see, which some of them do.
struct PaRows {
  bool has_rows, all_rows;
  int first, last;   // the first and last row's positions
  int lo, reach;     // keys from `lo` on are seen by every row, from `reach` on by some (windows)
};
PaRows pa_subgroup_setup(PaItem it, uint row0) {
  PaRows r;
  r.has_rows = row0 < it.row_count;
  const uint last_row = r.has_rows ? min(row0 + 15u, it.row_count - 1u) : 0u;
  r.all_rows = row0 + 16u <= it.row_count;
  r.first = r.has_rows ? pa_row_position(it, row0) : -1;
  r.last = r.has_rows ? pa_row_position(it, last_row) : -1;
  r.lo = PA_HAS_WINDOW != 0u ? r.last - pc.sliding_window + 1 : 0;
  r.reach = PA_HAS_WINDOW != 0u ? r.first - pc.sliding_window + 1 : 0;
  return r;
}
bool pa_subgroup_skips(PaItem it, PaRows r, int t, int k0) {
  return !r.has_rows || k0 > r.last || k0 + PA_TILE_KEYS - 1 < r.reach;
}
bool pa_subgroup_whole(PaItem it, PaRows r, int t, int k0) {
  const bool logit_terms = PA_HAS_SOFTCAP != 0u || PA_HAS_ALIBI != 0u || PA_HAS_QQ_BIAS != 0u;
  return !logit_terms && r.all_rows && k0 >= it.kv_begin && k0 + PA_TILE_KEYS <= it.kv_end &&
         k0 + PA_TILE_KEYS - 1 <= r.first && k0 >= r.lo;
}

// Logit of score s (scale * q.k) for local row `row` at key k (of tile t).
float pa_item_logit(PaItem it, uint row, int k, float s, int t) {
  const int q_pos = pa_row_position(it, row);
  if (q_pos < 0 || k < it.kv_begin) return VKA_NEG_INF;
  return pa_logit(it, s, row, q_pos, k);
}

// The factor the scalar kernel decodes an fp8 cache's K or V with.
float pa_decode_scale(bool is_value) { return is_value ? pc.v_scale : pc.k_scale; }
#endif
