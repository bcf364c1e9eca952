// Where the prefill kernel's K/V tiles come from, in two steps a tile apart,
// so that a tile's loads wait on no lookup of their own:
//   kv_source_entry / kv_source_locate_entry: where key k's K and V start:
//     in the cache the address of its slot of the item's kv head
//     (pa_slot_address), so that each piece adds only its dims' offset, and
//     for a cache key outside the item's range [kv_begin, kv_end) the cache's
//     zeros (pa_zeros_address), so that the cache's loads need no test (a
//     test per piece, between its address and its load, measurably slowed
//     the key loop: DEVELOPERS.md, "Keys outside the item read zeros");
//     a new token's key outside it is 0 and reads as 0;
//   kv_source_raw8(src, at, is_value, k, head, d): eight consecutive head dims of
//     key k from there, raw (src: pa_key_source, a constant where called).
// The paged cache (every layout and dtype: the block table, then the block's
// chunk), or for a prefix-prefill suffix item's keys (a joined item's from
// the context's end on: pa_suffix_key) the new tokens' K/V views, whose
// element index is kept plus one so that 0 still means "outside".
// Include after paged_attention_io.glsl.
#ifndef VKATTN_KV_SOURCE_GLSL
#define VKATTN_KV_SOURCE_GLSL

// The lookup's first half (its load), issued early: the block-table entry.
int kv_source_entry(PaItem it, int k_pos) {
  if (pa_suffix_key(it, k_pos)) return 0;
  return k_pos >= it.kv_begin && k_pos < it.kv_end ? pa_raw_block(it.seq, k_pos) : -1;
}

// The second half, from the entry: K's and V's addresses.
void kv_source_locate_entry(PaItem it, int k_pos, int entry, out uint64_t k_at, out uint64_t v_at) {
  if (k_pos < it.kv_begin || k_pos >= it.kv_end) {
    k_at = v_at = pa_suffix_key(it, k_pos) ? 0ul : pa_zeros_address();
    return;
  }
  if (pa_suffix_key(it, k_pos)) {   // the row's element index, plus one
    k_at = pa_key_at(it, false, k_pos, entry) + 1ul;
    v_at = pa_key_at(it, true, k_pos, entry) + 1ul;
    return;
  }
  const uint t = uint(k_pos) % PA_BLOCK_SIZE;
  k_at = pa_slot_address(pa_key_at(it, false, k_pos, entry), false, t, it.kv_head);
  v_at = pa_slot_address(pa_key_at(it, true, k_pos, entry), true, t, it.kv_head);
}

uvec4 kv_source_raw8(uint src, uint64_t at, bool is_value, int k_pos, uint head, uint d) {
  if (PA_KV_SUFFIX != 0u && src != PA_SRC_CACHE) {
    if (at == 0ul) return uvec4(0);
    return pa_suffix_raw8(src == PA_SRC_SUFFIX_NARROW, is_value, uint(at - 1ul) + d);
  }
  return pa_load_slot_raw8(at, is_value, d);
}
#endif
