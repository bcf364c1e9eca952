// Non-finite V values and the matrix kernels. A matrix product computes
// P[r][k] * V[k][d] for every pair, and 0 * NaN (or Inf) is NaN, so a value
// a row cannot see would reach it. Keys outside an item's range are staged as
// 0. Inside it, rows of one token (PA_SINGLE_TOKEN_ROWS: decode) see the same
// keys, so nothing can leak. Rows of several tokens do not, but only in tiles
// that some row sees in part (the causal diagonal, a window's edge:
// partly_seen). There the kernels stage non-finite V values as 0, and after
// the key loop, if any were, each output element takes what the values its
// row sees make of it (nonfinite_term).
// Include after paged_attention_io.glsl and matrix_element.glsl.
#ifndef VKATTN_ATTENTION_NONFINITE_GLSL
#define VKATTN_ATTENTION_NONFINITE_GLSL

// Keys [lo, hi] that every row of the item sees (its first row's position
// bounds the causal part, its last row's the window).
void seen_by_every_row(PaItem it, out int lo, out int hi) {
  hi = pa_row_position(it, 0u);
  lo = PA_HAS_WINDOW != 0u ? pa_row_position(it, it.row_count - 1u) - pc.sliding_window + 1 : 0;
#if PP_SUFFIX_STAND_IN
  // No key before the item's first is seen: the prefill kernel's first tile
  // (from a multiple of 16) may hold new tokens' stand-ins there
  // (kv_source.glsl), which must be staged as a tile seen in part.
  if (PA_KV_SUFFIX != 0u) lo = max(lo, it.kv_begin);
#endif
}

// Whether the tile of keys [k0, k0 + n) is seen in part by some row (rows of
// several tokens only).
bool partly_seen(int k0, int n, int lo, int hi) { return PA_SINGLE_TOKEN_ROWS == 0u && (k0 < lo || k0 + n - 1 > hi); }

// What the non-finite V values that partly seen tiles (of `tile_keys` keys,
// from key a0 on) staged as 0 make of element d of local row r (rare, after
// the key loop): +Inf, -Inf or NaN as IEEE sums would combine them over the
// keys the row sees, else 0. Whether the row sees a key is the mask's answer,
// as in the float64 reference, where no P underflows to 0.
float nonfinite_term(PaItem it, uint r, uint d, int a0, int tile_keys) {
  int lo, hi;
  seen_by_every_row(it, lo, hi);
  const int q_pos = pa_row_position(it, r);
  float val = 0.0;
  for (int k = it.kv_begin; k < it.kv_end && q_pos >= 0; ++k) {
    const int k0 = a0 + (k - a0) / tile_keys * tile_keys;
    if (!partly_seen(k0, tile_keys, lo, hi)) {   // staged as it is
      k = k0 + tile_keys - 1;
      continue;
    }
    if (pa_logit(it, 0.0, r, q_pos, k) == VKA_NEG_INF) continue;   // masked for this row
    const bool suffix = pa_suffix_item(it);
    const uint64_t at = pa_key_at(it, true, k, suffix ? 0 : pa_raw_block(it.seq, k));
    float x[8];
    pa_decode_key8(suffix, pa_key_raw8(pa_key_source(it), at, true, k, it.kv_head, d & ~7u), 1.0, x);
    val = elem_nonfinite_sum(val, float(ELEM(x[d % 8u])));   // as it was staged
  }
  return val;
}
#endif
