// A block-sparse variant for the tests (test_block_sparse.cpp checks it
// against its C++ twin there): every third key, shifted per head by a buffer,
// is masked; a per-key weight from another buffer, times b + 1, is added to
// the score.
#define VKA_MASK_MOD 1
#define VKA_SCORE_MOD 1
VKA_MOD_BUFFER(0, float, key_weight)
VKA_MOD_BUFFER(1, int, head_shift)

bool vka_mask_mod(uint b, uint h, int q_idx, int kv_idx) { return (kv_idx + head_shift[h]) % 3 != 1; }

float vka_score_mod(float score, uint b, uint h, int q_idx, int kv_idx) {
  return score + key_weight[kv_idx] * float(b + 1u);
}
