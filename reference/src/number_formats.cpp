#include "vkattn_ref/number_formats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace vkattn::ref {

FormatSpec format_spec(Format format) {
  switch (format) {
    case Format::f16: return {5, 10, 15, 0x7BFFu, true, 0x7E00u};
    case Format::bf16: return {8, 7, 127, 0x7F7Fu, true, 0x7FC0u};
    case Format::e4m3: return {4, 3, 7, 0x7Eu, false, 0x7Fu};
    case Format::e5m2: return {5, 2, 15, 0x7Bu, true, 0x7Eu};
  }
  throw std::invalid_argument("vkattn::ref::format_spec: unknown Format");
}

uint32_t encode_bits(const FormatSpec& spec, double x) {
  const uint32_t sign = std::signbit(x) ? (1u << (spec.exponent_bits + spec.mantissa_bits)) : 0u;
  if (std::isnan(x)) return sign | spec.nan_bits;
  const double a = std::fabs(x);
  if (a == 0.0) return sign;
  // Saturating, so infinity is just another value past max finite.
  if (std::isinf(a)) return sign | spec.max_finite_bits;

  const int min_exp = 1 - spec.bias;
  const int max_exp = static_cast<int>(spec.max_finite_bits >> spec.mantissa_bits) - spec.bias;
  int k = 0;
  std::frexp(a, &k);  // a = f * 2^k with f in [0.5, 1): floor(log2 a) = k - 1
  // Below the normal range the quantum stays at the subnormal spacing, so
  // clamping the exponent makes subnormal rounding fall out of the same code.
  const int e = std::max(k - 1, min_exp);
  // Checked before any shift: double exponents reach 1023.
  if (e > max_exp) return sign | spec.max_finite_bits;

  // a measured in quanta of 2^(e - mantissa_bits). Scaling by a power of two is
  // exact here: either the result keeps a's binade-relative bits (n >= 2^m,
  // normal) or e was clamped and we scale up, which never loses bits.
  const double n = std::ldexp(a, spec.mantissa_bits - e);
  const double whole = std::floor(n);
  const double frac = n - whole;  // exact: whole >= n/2 or whole == 0
  uint64_t m = static_cast<uint64_t>(whole);
  // Explicit ties-to-even rather than nearbyint, so the result does not depend
  // on the caller's floating-point rounding mode.
  if (frac > 0.5 || (frac == 0.5 && (m & 1u) != 0)) ++m;

  // m carries the implicit leading one when normal, so adding it to the
  // (biased exponent - 1) field yields the right bits in every case: a
  // subnormal (e == min_exp, field 0), a subnormal rounding up to the minimum
  // normal, and a mantissa carry into the next binade all come out right.
  uint64_t bits = (static_cast<uint64_t>(e + spec.bias - 1) << spec.mantissa_bits) + m;
  // Rounding up past max finite (including into e4m3's NaN slot or an inf
  // pattern) saturates.
  bits = std::min<uint64_t>(bits, spec.max_finite_bits);
  return sign | static_cast<uint32_t>(bits);
}

double decode_bits(const FormatSpec& spec, uint32_t bits) {
  const int width = spec.exponent_bits + spec.mantissa_bits;
  const bool negative = ((bits >> width) & 1u) != 0;
  const uint32_t mag = bits & ((1u << width) - 1u);
  double v;
  if (mag > spec.max_finite_bits) {
    const uint32_t inf_bits = ((1u << spec.exponent_bits) - 1u) << spec.mantissa_bits;
    v = (spec.has_inf && mag == inf_bits) ? std::numeric_limits<double>::infinity()
                                          : std::numeric_limits<double>::quiet_NaN();
  } else {
    const uint32_t field = mag >> spec.mantissa_bits;
    const uint32_t man = mag & ((1u << spec.mantissa_bits) - 1u);
    v = field == 0
            ? std::ldexp(static_cast<double>(man), 1 - spec.bias - spec.mantissa_bits)
            : std::ldexp(static_cast<double>(man | (1u << spec.mantissa_bits)),
                         static_cast<int>(field) - spec.bias - spec.mantissa_bits);
  }
  return negative ? -v : v;
}

uint16_t f16_from_double(double x) { return static_cast<uint16_t>(encode(Format::f16, x)); }
double f16_to_double(uint16_t bits) { return decode(Format::f16, bits); }
uint16_t bf16_from_double(double x) { return static_cast<uint16_t>(encode(Format::bf16, x)); }
double bf16_to_double(uint16_t bits) { return decode(Format::bf16, bits); }
uint8_t e4m3_from_double(double x) { return static_cast<uint8_t>(encode(Format::e4m3, x)); }
double e4m3_to_double(uint8_t bits) { return decode(Format::e4m3, bits); }
uint8_t e5m2_from_double(double x) { return static_cast<uint8_t>(encode(Format::e5m2, x)); }
double e5m2_to_double(uint8_t bits) { return decode(Format::e5m2, bits); }

uint32_t encode(Format format, double x) { return encode_bits(format_spec(format), x); }

namespace {
// Every value of a format, decoded once: the references decode each K/V
// element they read, and decode_bits' ldexp was a sixth of a test's host time.
struct DecodeTable {
  uint32_t mask;
  std::vector<double> values;
  explicit DecodeTable(Format format) {
    const FormatSpec spec = format_spec(format);
    mask = (1u << (spec.exponent_bits + spec.mantissa_bits + 1)) - 1u;   // sign and below
    values.resize(size_t(mask) + 1);
    for (uint32_t b = 0; b <= mask; ++b) values[b] = decode_bits(spec, b);
  }
};
}  // namespace

double decode(Format format, uint32_t bits) {
  static const DecodeTable f16(Format::f16), bf16(Format::bf16), e4m3(Format::e4m3), e5m2(Format::e5m2);
  const DecodeTable* t = nullptr;
  switch (format) {
    case Format::f16: t = &f16; break;
    case Format::bf16: t = &bf16; break;
    case Format::e4m3: t = &e4m3; break;
    case Format::e5m2: t = &e5m2; break;
  }
  if (!t) return decode_bits(format_spec(format), bits);   // format_spec throws for an unknown one
  return t->values[bits & t->mask];   // bits above the format are ignored, as decode_bits does
}

double max_finite(Format format) {
  const FormatSpec spec = format_spec(format);
  return decode_bits(spec, spec.max_finite_bits);
}

double ulp_at(Format format, double x) {
  if (std::isnan(x)) return std::numeric_limits<double>::quiet_NaN();
  const FormatSpec spec = format_spec(format);
  const double a = std::min(std::fabs(x), max_finite(format));
  int e = 1 - spec.bias;
  if (a != 0.0) {
    int k = 0;
    std::frexp(a, &k);
    e = std::max(k - 1, e);
  }
  return std::ldexp(1.0, e - spec.mantissa_bits);
}

}  // namespace vkattn::ref
