// The element type of the matrix kernels' products (paged_attention_subgroup.comp,
// paged_prefill.comp): f16, or bf16 in modules built with PA_MATRIX_BF16
// (bf16 q with bf16 or fp8 caches). fp8 values are exact in both.
// Include after paged_attention_io.glsl.
#ifndef VKATTN_MATRIX_ELEMENT_GLSL
#define VKATTN_MATRIX_ELEMENT_GLSL

#include "matrix_element_type.glsl"

// Four e4m3 values (the bytes of x) as two f16 pairs of value * 2^-8, bytes
// 0 and 2 in .x and bytes 1 and 3 in .y (16-bit lanes): e4m3 s.eeee.mmm
// (bias 7) at bits 7-14 of an f16 s.eeeee.mmmmmmmmmm (bias 15), the exponent
// field's top bit 0, subnormals included (they become f16 normals or
// subnormals, exactly); a byte whose low 7 bits are all ones (a NaN code,
// which would land on 1.875) sets that top bit instead: a NaN. y holds each
// byte's low 7 bits and, at bit 7, that flag (no carry leaves a byte). About
// 10 operations for the word, where pair by pair took about 15: the
// conversion is what bounds e4m3 decode's staging.
uvec2 e4m3_word_to_f16_pairs(uint x) {
  const uint low = x & 0x7F7F7F7Fu, y = low | ((low + 0x01010101u) & 0x80808080u);
  return uvec2(((y & 0x00FF00FFu) << 7) | ((x << 8) & 0x80008000u), ((y & 0xFF00FF00u) >> 1) | (x & 0x80008000u));
}

// Four f16 pairs as ELEM pairs: bf16 modules convert them, exactly for the
// fp8 values they come from (bf16 normals of at most 4 significant bits).
uvec4 elem_pairs_from_f16(uvec4 h) {
  if (ELEM_IS_BF16) {
    [[unroll]] for (uint e = 0; e < 4u; ++e) {
      const vec2 f = unpackHalf2x16(h[e]);
      h[e] = elem_pair_bits(f.x, f.y);
    }
  }
  return h;
}

// Eight cache values as pa_load_raw8 read them, as eight ELEMs: f16 and bf16
// bits go through unchanged (the cache's type is the element type); e5m2 is
// f16's top byte, so into f16 it is four byte shifts; e4m3 into f16 is shifts
// too, giving value * 2^-8 (PA_STAGED_FP8_FACTOR undoes it). bf16 modules
// convert those f16 pairs: every fp8 value, and every e4m3 value * 2^-8, is
// a bf16 normal with at most 4 significant bits, so both steps are exact.
uvec4 elem8_from_raw(uvec4 raw) {
  uvec4 h = raw;
  if (PA_CACHE_DTYPE == DTYPE_FP8_E5M2) {
    // bytes 0-3 of raw.x and raw.y become four f16 pairs.
    [[unroll]] for (uint w = 0; w < 2u; ++w) {
      h[2u * w] = ((raw[w] & 0xFFu) << 8) | ((raw[w] & 0xFF00u) << 16);
      h[2u * w + 1u] = ((raw[w] >> 8) & 0xFF00u) | (raw[w] & 0xFF000000u);
    }
  } else if (PA_CACHE_DTYPE == DTYPE_FP8_E4M3) {
    // Bytes 0 and 1 of a word go to lanes 0 and 1 of one pair, 2 and 3 of the next.
    [[unroll]] for (uint w = 0; w < 2u; ++w) {
      const uvec2 p = e4m3_word_to_f16_pairs(raw[w]);   // bytes 0, 2 and 1, 3
      h[2u * w] = (p.x & 0xFFFFu) | (p.y << 16);
      h[2u * w + 1u] = (p.x >> 16) | (p.y & 0xFFFF0000u);
    }
  }
  return PA_FP8_CACHE ? elem_pairs_from_f16(h) : h;
}

// Eight fp8 values (the bytes of w0, then of w1) as ELEM pairs with the
// middle two of every four swapped (values 0, 2, 1, 3): each pair is then
// one mask of the word, and for e5m2 one shift (the decode kernel's WIDE
// pieces, SWAP_DIMS there).
uvec4 elem8_from_fp8_swapped(uint w0, uint w1) {
  uvec4 h;
  [[unroll]] for (uint w = 0; w < 2u; ++w) {
    const uint x = w == 0u ? w0 : w1;
    if (PA_CACHE_DTYPE == DTYPE_FP8_E5M2) {   // f16's top byte
      h[2u * w] = (x & 0x00FF00FFu) << 8;
      h[2u * w + 1u] = x & 0xFF00FF00u;
    } else {
      const uvec2 p = e4m3_word_to_f16_pairs(x);
      h[2u * w] = p.x;
      h[2u * w + 1u] = p.y;
    }
  }
  return elem_pairs_from_f16(h);
}

// Eight values as pa_key_raw8 read them, as ELEMs: the suffix's are q's
// dtype, which is the element type.
uvec4 elem8_from_key(bool suffix, uvec4 raw) { return PA_KV_SUFFIX != 0u && suffix ? raw : elem8_from_raw(raw); }

// The sum of non-finite values so far (0: none yet) with value v, as IEEE
// sums combine them: finite values add nothing; +Inf and -Inf give NaN.
float elem_nonfinite_sum(float val, float v) {
  if (!isinf(v) && !isnan(v)) return val;
  return isnan(val) || isnan(v) ? v + val : val == 0.0 ? v : val == v ? val : uintBitsToFloat(0x7FC00000u);
}

// h (eight ELEMs) with its non-finite values (exponent all ones) replaced by 0.
uvec4 elem8_finite_or_zero(uvec4 h) {
  const uvec4 lo = mix(uvec4(0xFFFFu), uvec4(0u), equal(h & ELEM_EXPONENT, uvec4(ELEM_EXPONENT)));
  const uvec4 hi = mix(uvec4(0xFFFF0000u), uvec4(0u), equal(h & (ELEM_EXPONENT << 16), uvec4(ELEM_EXPONENT << 16)));
  return h & (lo | hi);
}
#endif
