// Online softmax (FlashAttention): a row's running max m and exp-sum l, and
// the rescaling of its accumulator when a tile raises the max. Shared by the
// attention kernels and the split-KV reduce, so every path combines partial
// results the same way. A row that has seen no key keeps m = -inf, l = 0.
#ifndef VKATTN_ONLINE_SOFTMAX_GLSL
#define VKATTN_ONLINE_SOFTMAX_GLSL

#define VKA_NEG_INF uintBitsToFloat(0xFF800000u)

// exp(a - b) that is 0 (not NaN) when both are -inf.
float vka_exp_diff(float a, float b) { return a == VKA_NEG_INF ? 0.0 : exp(a - b); }

// Folds a tile's max `tile_max` into the running (m, l): returns alpha, the
// factor that rescales the accumulator and l, and updates m. NAME takes
// exp(a - b) from EXP_DIFF (one body for both bases below).
#define VKA_SOFTMAX_RESCALE(NAME, EXP_DIFF)                       \
  float NAME(inout float m, inout float l, float tile_max) {     \
    float m_new = max(m, tile_max);                              \
    float alpha = EXP_DIFF(m, m_new);                            \
    m = m_new;                                                   \
    l *= alpha;                                                  \
    return alpha;                                                \
  }
VKA_SOFTMAX_RESCALE(vka_softmax_rescale, vka_exp_diff)

// The same in base 2, for a loop that holds its logits (and so m) times
// log2(e), as FlashAttention does: each P is then exp2 of one subtraction,
// where exp(a - b) costs a multiply more. l is the same sum in both units;
// m converts back by VKA_LN2 before anything outside the loop reads it.
#define VKA_LOG2E 1.4426950408889634
#define VKA_LN2 0.6931471805599453
float vka_exp2_diff(float a, float b) { return a == VKA_NEG_INF ? 0.0 : exp2(a - b); }
VKA_SOFTMAX_RESCALE(vka_softmax_rescale_log2, vka_exp2_diff)

// Merges another partial softmax (m2, l2) of the same row into (m, l), and
// gives the factors their accumulators take: (m, l)'s w, (m2, l2)'s w2.
void vka_softmax_merge_weights(inout float m, inout float l, float m2, float l2, out float w, out float w2) {
  const float m_new = max(m, m2);
  w = vka_exp_diff(m, m_new);
  w2 = vka_exp_diff(m2, m_new);
  l = l * w + l2 * w2;
  m = m_new;
}
void vka_softmax_merge(inout float m, inout float l, float m2, float l2) {
  float w, w2;
  vka_softmax_merge_weights(m, l, m2, l2, w, w2);
}

// Final normaliser with an optional sink logit (one extra term in the
// denominator, no value): returns the factor that turns the accumulator into
// the output, and the log-sum-exp. Rows with nothing (l = 0, no sink) give
// factor 0 and lse -inf.
void vka_softmax_finish(float m, float l, bool has_sink, float sink, out float out_factor, out float lse) {
  float mm = has_sink ? max(m, sink) : m;
  if (mm == VKA_NEG_INF) {
    out_factor = 0.0;
    lse = VKA_NEG_INF;
    return;
  }
  float lt = l * vka_exp_diff(m, mm) + (has_sink ? vka_exp_diff(sink, mm) : 0.0);
  out_factor = lt > 0.0 ? vka_exp_diff(m, mm) / lt : 0.0;
  lse = lt > 0.0 ? mm + log(lt) : VKA_NEG_INF;
}
#endif
