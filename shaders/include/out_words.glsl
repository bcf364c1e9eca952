// Eight consecutive results of an f32 or 16-bit output stored as 16-byte
// words: the prefill kernel's epilogue, for either op (pa_write_result8_scaled).
// The includer declares `out_vec` (its out binding as uvec4s) and
// PA_OUT_DTYPE first.
#ifndef VKATTN_OUT_WORDS_GLSL
#define VKATTN_OUT_WORDS_GLSL
#include "number_formats.glsl"

// o[0..7] times `factor` at element `at` (a multiple of 8) of the out view.
void vka_store_out8(uint at, float o[8], float factor) {
  if (PA_OUT_DTYPE == DTYPE_F32) {
    out_vec[at / 4u] = floatBitsToUint(vec4(o[0], o[1], o[2], o[3]) * factor);
    out_vec[at / 4u + 1u] = floatBitsToUint(vec4(o[4], o[5], o[6], o[7]) * factor);
  } else {
    out_vec[at / 8u] = vka_encode16x8(PA_OUT_DTYPE, o, factor);
  }
}
#endif
