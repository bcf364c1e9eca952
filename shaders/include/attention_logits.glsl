// What turns q.k into a logit, for every attention variant: the scale (folded
// into q by the caller), softcap, causal and sliding-window masks, ALiBi and
// qq_bias. One implementation; the kernels only decide which are on (spec
// constants). Order as vLLM's unified attention: softcap on the scaled dot
// product, then masks, then the additive biases.
#ifndef VKATTN_ATTENTION_LOGITS_GLSL
#define VKATTN_ATTENTION_LOGITS_GLSL
#include "online_softmax.glsl"

// softcap * tanh(s / softcap). tanh through exp overflows to inf/inf for
// large arguments on some drivers; |x| >= 10 is +-1 in f32 anyway. Near 0
// the same exp form cancels (lavapipe lost 0.6% at x = 1e-5, a large softcap):
// there tanh's series, whose next term is below f32's rounding for |x| < 1/8.
float vka_tanh(float x) {
  const float x2 = x * x;
  if (abs(x) < 0.125) return x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0))));
  return tanh(clamp(x, -10.0, 10.0));
}
float vka_softcap(float s, float softcap) { return softcap * vka_tanh(s / softcap); }

struct VkaLogitParams {
  bool has_softcap;
  float softcap;
  bool has_window;
  int window;
  bool has_alibi;
  float alibi_slope;
  int ctx;             // context length of the sequence: keys >= ctx are new tokens
};

// `s`: scale * q.k; `q_pos`, `k_pos`: absolute positions; `k_end`: keys at or
// past it do not exist. `qq_bias`: bias for this (query, key) pair, when the key
// is a new token (0 otherwise; the caller looks it up).
float vka_logit(float s, VkaLogitParams p, int q_pos, int k_pos, int k_end, float qq_bias) {
  if (k_pos >= k_end || k_pos > q_pos) return VKA_NEG_INF;
  if (p.has_window && q_pos - k_pos >= p.window) return VKA_NEG_INF;
  if (p.has_softcap) s = vka_softcap(s, p.softcap);
  if (p.has_alibi) s += p.alibi_slope * float(k_pos - p.ctx);
  return s + qq_bias;
}
#endif
