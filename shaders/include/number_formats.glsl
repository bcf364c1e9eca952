// Narrow number formats for the kernels: f16, bf16, fp8 e4m3 ("fn": no inf,
// max 448, NaN 0x7F/0xFF) and fp8 e5m2 (IEEE-like, max 57344).
//
// Same semantics as the host reference (reference/src/number_formats.cpp), and
// bit-identical to it for every float input:
//   * round to nearest, ties to even, also on the subnormal grid;
//   * saturating: values past max finite and +-inf become +-max finite;
//   * NaN becomes the canonical NaN with the sign bit kept
//     (f16 0x7E00/0xFE00, bf16 0x7FC0/0xFFC0, e4m3 0x7F/0xFF, e5m2 0x7E/0xFE);
//   * -0.0 keeps its sign.
// Integer arithmetic on bit patterns, and float products only where they are
// exact and far from f32's denormals, so results do not depend on the
// device's f32 denormal flushing or float conversion rounding. (Inputs must
// still reach these functions unflushed: f32 denormals matter for bf16.)
// Encoders return the format's bits in the low bits of a uint; decoders ignore
// bits above the format's width.
//
// Include-only: no #version here.
#ifndef VKATTN_NUMBER_FORMATS_GLSL
#define VKATTN_NUMBER_FORMATS_GLSL

#include "abi/common.h"   // DTYPE_*

// Generic decoder. Every value of these formats is exactly representable in
// f32; all but bf16 subnormals are f32 normals.
float vka_nf_decode(uint bits, int ebits, int mbits, int bias, uint max_bits, bool has_inf)
{
    uint width = uint(ebits + mbits);
    uint sign = ((bits >> width) & 1u) << 31;
    uint mag = bits & ((1u << width) - 1u);
    if (mag > max_bits) {
        uint inf_bits = ((1u << uint(ebits)) - 1u) << uint(mbits);
        return uintBitsToFloat(sign | ((has_inf && mag == inf_bits) ? 0x7F800000u : 0x7FC00000u));
    }
    uint ex = mag >> uint(mbits);
    uint man = mag & ((1u << uint(mbits)) - 1u);
    if (ex != 0u) {
        return uintBitsToFloat(sign | (uint(int(ex) - bias + 127) << 23) | (man << uint(23 - mbits)));
    }
    if (man == 0u) {
        return uintBitsToFloat(sign);
    }
    // Subnormal man * 2^(1 - bias - mbits): its leading one becomes f32's
    // implicit bit.
    int p = findMSB(man);
    int fe = p + 1 - bias - mbits + 127;
    if (fe <= 0) {
        // Only bf16 gets here (same exponent range as f32): its subnormals are
        // f32 denormals with the mantissa in place. The min() only keeps the
        // folded shift legal for formats that never take this branch.
        return uintBitsToFloat(sign | (man << uint(min(150 - bias - mbits, 31))));
    }
    return uintBitsToFloat(sign | (uint(fe) << 23) | ((man ^ (1u << uint(p))) << uint(23 - p)));
}

float vka_f16_to_f32(uint bits) { return vka_nf_decode(bits, 5, 10, 15, 0x7BFFu, true); }
float vka_bf16_to_f32(uint bits) { return vka_nf_decode(bits, 8, 7, 127, 0x7F7Fu, true); }

// Eight f16 (or, with bf16, bf16) values packed two to a word, as f32: both
// conversions are exact (f16 in one hardware instruction, bf16 the top half
// of an f32).
void vka_decode_16bit8(uvec4 w, bool bf16, out float x[8]) {
  for (uint i = 0; i < 4u; ++i) {
    if (bf16) {
      x[2u * i] = uintBitsToFloat((w[i] & 0xFFFFu) << 16);
      x[2u * i + 1u] = uintBitsToFloat(w[i] & 0xFFFF0000u);
    } else {
      const vec2 f = unpackHalf2x16(w[i]);
      x[2u * i] = f.x;
      x[2u * i + 1u] = f.y;
    }
  }
}

// f32 to a narrow format of `width` bits (mbits mantissa bits, exponent
// bias `bias` <= 127 - mbits, so that its subnormal quantum times the scale
// below stays an f32 normal): the host reference's bits (round to nearest
// even, saturating to max_bits, infinities too; NaN to nan_bits) in about
// half the instructions of a general encoder by exponent and mantissa fields,
// which bound write_kv_cache into an fp8 cache and the kernels' 16-bit output
// stores. A test checks it against the reference at every tie
// (test_write_kv_cache.cpp). Normals round by integer carry into the exponent
// field; values below the smallest normal 2^(1 - bias) are a whole number of
// quanta 2^(1 - bias - mbits), scaled exactly and rounded by roundEven.
uint vka_f32_to_narrow(float x, uint width, int mbits, int bias, uint max_bits, uint nan_bits) {
  const uint b = floatBitsToUint(x), sign = (b >> (32u - width)) & (1u << (width - 1u)), a = b & 0x7FFFFFFFu;
  const uint s = uint(23 - mbits);
  const uint r = a + ((1u << (s - 1u)) - 1u) + ((a >> s) & 1u);
  const uint normal = min((r >> s) - (uint(127 - bias) << uint(mbits)), max_bits);
  const float quanta = uintBitsToFloat(uint(127 + bias - 1 + mbits) << 23);   // 2^(bias - 1 + mbits)
  const uint subnormal = uint(roundEven(uintBitsToFloat(a) * quanta));
  const uint code = a < (uint(128 - bias) << 23) ? subnormal : normal;
  return sign | (a > 0x7F800000u ? nan_bits : code);
}

// f16: the narrow encoder (an f32 denormal is far below f16's quantum 2^-24,
// so flushing one cannot change the result).
uint vka_f32_to_f16(float x) { return vka_f32_to_narrow(x, 16u, 10, 15, 0x7BFFu, 0x7E00u); }
// bf16 has f32's exponent range, so rounding f32's bits at bit 16 is the
// whole encoder, subnormals included (f32 denormals are bf16's subnormals
// with more bits); past max finite, infinities too, saturates.
uint vka_f32_to_bf16(float x) {
  const uint b = floatBitsToUint(x), sign = (b >> 16) & 0x8000u, a = b & 0x7FFFFFFFu;
  const uint r = (a + 0x7FFFu + ((a >> 16) & 1u)) >> 16;
  return sign | (a > 0x7F800000u ? 0x7FC0u : min(r, 0x7F7Fu));
}

uint vka_f32_to_e4m3(float x) { return vka_f32_to_narrow(x, 8u, 3, 7, 0x7Eu, 0x7Fu); }
// The fp8 decoders run on every element of an fp8 cache in the attention
// kernels' key loops: selects, no branches (vka_nf_decode's, data-dependent,
// diverge there). Subnormals are man * 2^(1 - bias - mbits), computed in f32
// exactly and far from f32's own subnormals.
float vka_e4m3_to_f32(uint bits) {
  const uint mag = bits & 0x7Fu, sign = (bits & 0x80u) << 24;
  const uint ex = mag >> 3, man = mag & 7u;
  const uint normal = ((ex + 120u) << 23) | (man << 20);
  const uint subnormal = floatBitsToUint(float(man) * 0.001953125);   // 2^-9
  return uintBitsToFloat(sign | (mag == 0x7Fu ? 0x7FC00000u : ex != 0u ? normal : subnormal));
}

uint vka_f32_to_e5m2(float x) { return vka_f32_to_narrow(x, 8u, 2, 15, 0x7Bu, 0x7Eu); }
float vka_e5m2_to_f32(uint bits) {
  const uint mag = bits & 0x7Fu, sign = (bits & 0x80u) << 24;
  const uint ex = mag >> 2, man = mag & 3u;
  const uint normal = ((ex + 112u) << 23) | (man << 21);
  const uint subnormal = floatBitsToUint(float(man) * 1.52587890625e-05);   // 2^-16
  const uint special = man == 0u ? 0x7F800000u : 0x7FC00000u;               // Inf, NaN
  return uintBitsToFloat(sign | (ex == 31u ? special : ex != 0u ? normal : subnormal));
}

// Eight fp8 values (word W's first 8 bytes, value i in byte i) as f32, times
// SCALE, into X. A macro, so that each kernel's code is what it wrote before.
#define VKA_DECODE_FP8X8(W, E4M3, SCALE, X)                                \
  [[unroll]] for (uint i = 0; i < 8u; ++i) {                               \
    const uint b = ((W)[i / 4u] >> (8u * (i % 4u))) & 0xFFu;               \
    X[i] = ((E4M3) ? vka_e4m3_to_f32(b) : vka_e5m2_to_f32(b)) * (SCALE);    \
  }

// x in the narrow format `dtype` (DTYPE_F16, DTYPE_BF16, DTYPE_FP8_E4M3 or
// DTYPE_FP8_E5M2): the bits to store. Kernels pass a specialization constant,
// so only one branch remains.
uint vka_encode(uint dtype, float x) {
  if (dtype == DTYPE_F16) return vka_f32_to_f16(x);
  if (dtype == DTYPE_BF16) return vka_f32_to_bf16(x);
  if (dtype == DTYPE_FP8_E4M3) return vka_f32_to_e4m3(x);
  return vka_f32_to_e5m2(x);
}

// x[0..7] times `factor` in the 16-bit format `dtype` (DTYPE_F16 or
// DTYPE_BF16), two to a word in order: one 16-byte store's worth.
uvec4 vka_encode16x8(uint dtype, float x[8], float factor) {
  uvec4 w;
  for (uint i = 0; i < 4u; ++i)
    w[i] = vka_encode(dtype, x[2u * i] * factor) | (vka_encode(dtype, x[2u * i + 1u] * factor) << 16);
  return w;
}

#endif  // VKATTN_NUMBER_FORMATS_GLSL
