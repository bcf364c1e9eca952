// Host reference for the narrow number formats used by the kernels.
//
// Everything here works on the exact double value, so the host reference never
// adds a rounding step of its own: encode() is the one correctly rounded
// conversion, and the GLSL encoders in shaders/include/number_formats.glsl must
// agree with it bit for bit on every float input.
//
// Encoding semantics, shared by every format and by the GLSL side:
//   * round to nearest, ties to even (on the subnormal grid too);
//   * saturating: finite values past the largest finite value, and +-inf,
//     become +-max finite; encode never produces an infinity;
//   * NaN becomes the format's canonical quiet NaN with the input's sign bit
//     kept (f16 0x7E00/0xFE00, bf16 0x7FC0/0xFFC0, e4m3 0x7F/0xFF,
//     e5m2 0x7E/0xFE);
//   * -0.0 and negative values that round to zero keep their sign.
// Decoding is exact. Decoders ignore bits above the format's width.
#pragma once

#include <cstdint>

namespace vkattn::ref {

enum class Format { f16, bf16, e4m3, e5m2 };

// Layout of a sign/exponent/mantissa format. e4m3 here is the "fn" variant
// (PyTorch float8_e4m3fn): no infinities, and the all-ones exponent still
// holds finite values except the single NaN mantissa, so max finite and NaN
// cannot be derived from the field widths alone and are listed explicitly.
struct FormatSpec {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  uint32_t max_finite_bits;  // magnitude bits (sign clear) of the largest finite value
  bool has_inf;              // all-ones exponent with zero mantissa is +-inf
  uint32_t nan_bits;         // canonical NaN, sign clear
};

FormatSpec format_spec(Format format);

// The one generic encoder/decoder; the per-format functions below forward here.
uint32_t encode_bits(const FormatSpec& spec, double x);
double decode_bits(const FormatSpec& spec, uint32_t bits);

uint16_t f16_from_double(double x);
double f16_to_double(uint16_t bits);
uint16_t bf16_from_double(double x);
double bf16_to_double(uint16_t bits);
uint8_t e4m3_from_double(double x);
double e4m3_to_double(uint8_t bits);
uint8_t e5m2_from_double(double x);
double e5m2_to_double(uint8_t bits);

uint32_t encode(Format format, double x);
double decode(Format format, uint32_t bits);
double max_finite(Format format);

// Spacing of the format's representable values at |x|: 2^(E - mantissa_bits)
// where E = floor(log2|x|), clamped below to the minimum normal exponent (so
// the subnormal range and 0 report the subnormal spacing) and above to the
// binade of max_finite. For |x| strictly inside a binade that is the gap
// between the two representable neighbours bracketing x; at a power of two it
// is the larger (upper) of the two adjacent gaps. NaN gives NaN.
double ulp_at(Format format, double x);

}  // namespace vkattn::ref
