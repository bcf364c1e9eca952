// Block-sparse attention's part of attention_nonfinite.glsl's scheme: after
// the key loop, what the non-finite V values that partial blocks staged as 0
// make of an output element, over the keys its row counts.
// Include after block_sparse_io.glsl and matrix_element.glsl.
#ifndef VKATTN_BLOCK_SPARSE_NONFINITE_GLSL
#define VKATTN_BLOCK_SPARSE_NONFINITE_GLSL
float pa_item_nonfinite_term(PaItem it, uint row, uint d) {
  const int q_idx = int(it.row_start + row);
  const int kb = int(bs_kv_block());
  float val = 0.0;
  for (int j = 0; j < it.partial && row < it.row_count; ++j) {
    const int k0 = int(bs_block(it, j)) * kb;
    for (int k = k0; k < k0 + kb && pa_key_in_item(it, k); ++k) {
      if (!BS_MASK_READING_DOCUMENTS(it.b, it.h, q_idx, k)) continue;
      float x[8];
      pa_decode_key8(false, bs_value_raw8(it, k, d & ~7u), 1.0, x);
      val = elem_nonfinite_sum(val, float(ELEM(x[d % 8u])));   // as it was staged
    }
  }
  return val;
}
#endif
