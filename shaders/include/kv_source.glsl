// Where the prefill kernel's K/V tiles come from, in two steps a tile apart,
// so that a tile's loads wait on no lookup of their own:
//   kv_source_entry / kv_source_locate_entry: where key k's K and V start:
//     in the cache the address of its slot of the item's kv head
//     (pa_slot_address), so that each piece adds only its dims' offset, and
//     for a cache key outside the item's range [kv_begin, kv_end) the cache's
//     zeros (pa_zeros_address), so that the cache's loads need no test (a
//     test per piece, between its address and its load, measurably slowed
//     the key loop: DEVELOPERS.md, "Keys outside the item read zeros");
//     a new token's key outside it is 0 and reads as 0, or in the modules
//     with PP_SUFFIX_STAND_IN (paged_prefill.comp says which) it reads a
//     stand-in, the nearest of the item's own new tokens (the new K/V views
//     are bindings, with no zeros of ours to point at), so that the loads
//     need no test there either. A stand-in's K only meets masked logits.
//     Its V meets P = 0, and 0 x Inf is NaN, so every tile that holds one
//     must be one that some row sees in part (attention_nonfinite.glsl),
//     whose non-finite values are staged as 0: past kv_end the causal
//     diagonal's tile is, and before kv_begin seen_by_every_row counts no
//     key as seen in those modules;
//   kv_source_raw8(src, at, is_value, k, head, d): eight consecutive head dims of
//     key k from there, raw (src: pa_key_source, a constant where called).
// The paged cache (every layout and dtype: the block table, then the block's
// chunk), or for a prefix-prefill suffix item's keys (the new-token pass's)
// the new tokens' K/V views, whose element index is kept plus one so that 0
// still means "outside" (with stand-ins, the index itself).
// Include after paged_attention_io.glsl.
#ifndef VKATTN_KV_SOURCE_GLSL
#define VKATTN_KV_SOURCE_GLSL

// The lookup's first half (its load), issued early: the block-table entry.
int kv_source_entry(PaItem it, int k_pos) {
  if (pa_suffix_item(it)) return 0;
  return k_pos >= it.kv_begin && k_pos < it.kv_end ? pa_raw_block(it.seq, k_pos) : -1;
}

// The second half, from the entry: K's and V's addresses.
void kv_source_locate_entry(PaItem it, int k_pos, int entry, out uint64_t k_at, out uint64_t v_at) {
#if PP_SUFFIX_STAND_IN
  if (pa_suffix_item(it)) {
    // An item with rows has a new token at ctx, and its keys [kv_begin,
    // kv_end) end past ctx: the stand-in is one of its own new tokens.
    const int first = max(it.kv_begin, it.ctx), k = clamp(k_pos, first, max(it.kv_end - 1, first));
    k_at = pa_key_at(it, false, k, entry);
    v_at = pa_key_at(it, true, k, entry);
    return;
  }
  if (k_pos < it.kv_begin || k_pos >= it.kv_end) {
    k_at = v_at = pa_zeros_address();
    return;
  }
#else
  if (k_pos < it.kv_begin || k_pos >= it.kv_end) {
    k_at = v_at = pa_suffix_item(it) ? 0ul : pa_zeros_address();
    return;
  }
  if (pa_suffix_item(it)) {   // the row's element index, plus one
    k_at = pa_key_at(it, false, k_pos, entry) + 1ul;
    v_at = pa_key_at(it, true, k_pos, entry) + 1ul;
    return;
  }
#endif
  const uint t = uint(k_pos) % PA_BLOCK_SIZE;
  k_at = pa_slot_address(pa_key_at(it, false, k_pos, entry), false, t, it.kv_head);
  v_at = pa_slot_address(pa_key_at(it, true, k_pos, entry), true, t, it.kv_head);
}

uvec4 kv_source_raw8(uint src, uint64_t at, bool is_value, int k_pos, uint head, uint d) {
#if PP_SUFFIX_STAND_IN
  if (PA_KV_SUFFIX != 0u && src != PA_SRC_CACHE) return pa_suffix_raw8(src == PA_SRC_SUFFIX_NARROW, is_value, uint(at) + d);
#else
  if (PA_KV_SUFFIX != 0u && src != PA_SRC_CACHE) {
    if (at == 0ul) return uvec4(0);
    return pa_suffix_raw8(src == PA_SRC_SUFFIX_NARROW, is_value, uint(at - 1ul) + d);
  }
#endif
  return pa_load_slot_raw8(at, is_value, d);
}
#endif
