// Where the prefill kernel's K/V tiles come from, in two steps a tile apart,
// so that a tile's loads wait on no lookup of their own:
//   kv_source_locate(it, k): where key k's K and V start (0: outside the
//     item's range [kv_begin, kv_end), whose values read as 0);
//   kv_source_raw8(at, is_value, k, head, d): eight consecutive head dims of
//     key k from there, raw (f16/bf16 bits or fp8 bytes, as pa_load_raw8).
// This is the paged cache (every layout and dtype: the block table, then the
// block's chunk). A contiguous tensor, or a paged prefix followed by a
// contiguous suffix, are other bodies of the same two functions.
// Include after paged_attention_io.glsl.
#ifndef VKATTN_KV_SOURCE_GLSL
#define VKATTN_KV_SOURCE_GLSL

// The lookup's first half (its load), issued early: the block-table entry.
int kv_source_entry(PaItem it, int k_pos) {
  return k_pos >= it.kv_begin && k_pos < it.kv_end ? pa_raw_block(it.seq, k_pos) : -1;
}

// The second half, from the entry: K's and V's addresses (the block's).
void kv_source_locate_entry(PaItem it, int k_pos, int entry, out uint64_t k_at, out uint64_t v_at) {
  k_at = v_at = 0ul;
  if (k_pos < it.kv_begin || k_pos >= it.kv_end) return;
  const uint b = pa_checked_block(entry, it.seq, k_pos);
  k_at = pa_block_address(false, b);
  v_at = pa_block_address(true, b);
}

uvec4 kv_source_raw8(uint64_t at, bool is_value, int k_pos, uint head, uint d) {
  if (at == 0ul) return uvec4(0);
  return pa_load_raw8(at, is_value, uint(k_pos) % PA_BLOCK_SIZE, head, d);
}
#endif
