// The consumer's own block-sparse variant (variant_app.cpp holds its C++ twin):
// a checkerboard of 16 x 16 tiles, and a score scaled by a per-head factor.
#define VKA_MASK_MOD 1
#define VKA_SCORE_MOD 1
VKA_MOD_BUFFER(0, float, head_factor)

bool vka_mask_mod(uint b, uint h, int q_idx, int kv_idx) { return ((q_idx / 16) + (kv_idx / 16)) % 2 == 0; }

float vka_score_mod(float score, uint b, uint h, int q_idx, int kv_idx) { return score * head_factor[h]; }
