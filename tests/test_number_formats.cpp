// Tests for the host reference number formats (reference/src/number_formats.cpp).
// The exhaustive tests cover every bit pattern and every midpoint between
// adjacent representable values, so rounding is checked at every tie and
// boundary rather than only at sampled points.
#include "vkattn_ref/number_formats.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace {

using vkattn::ref::decode;
using vkattn::ref::encode;
using vkattn::ref::Format;
using vkattn::ref::format_spec;
using vkattn::ref::FormatSpec;
using vkattn::ref::max_finite;
using vkattn::ref::ulp_at;

constexpr Format kFormats[] = {Format::f16, Format::bf16, Format::e4m3, Format::e5m2};
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const char* name(Format f) {
  switch (f) {
    case Format::f16: return "f16";
    case Format::bf16: return "bf16";
    case Format::e4m3: return "e4m3";
    case Format::e5m2: return "e5m2";
  }
  return "?";
}

uint32_t sign_bit(Format f) {
  const FormatSpec s = format_spec(f);
  return 1u << (s.exponent_bits + s.mantissa_bits);
}

uint32_t pattern_count(Format f) { return sign_bit(f) << 1; }

uint32_t max_bits(Format f) { return format_spec(f).max_finite_bits; }

// Stops a loop after a handful of reported failures so a systematic bug does
// not print 65536 lines.
struct FailureBudget {
  int left = 8;
  bool spend() { return --left > 0; }
};

TEST(NumberFormats, SpecAndMaxFinite) {
  EXPECT_EQ(max_finite(Format::f16), 65504.0);
  EXPECT_EQ(max_finite(Format::bf16), std::ldexp(255.0, 120));  // (2 - 2^-7) * 2^127
  EXPECT_EQ(max_finite(Format::e4m3), 448.0);
  EXPECT_EQ(max_finite(Format::e5m2), 57344.0);
  for (Format f : kFormats) {
    EXPECT_EQ(decode(f, max_bits(f)), max_finite(f)) << name(f);
    EXPECT_EQ(decode(f, sign_bit(f) | max_bits(f)), -max_finite(f)) << name(f);
  }
}

TEST(NumberFormats, RoundTripEveryPattern) {
  for (Format f : kFormats) {
    const FormatSpec spec = format_spec(f);
    int nans = 0, infs = 0;
    FailureBudget budget;
    for (uint32_t bits = 0; bits < pattern_count(f); ++bits) {
      const double d = decode(f, bits);
      const uint32_t sign = bits & sign_bit(f);
      uint32_t expected = bits;
      if (std::isnan(d)) {
        ++nans;
        expected = sign | spec.nan_bits;
      } else if (std::isinf(d)) {
        ++infs;
        expected = sign | spec.max_finite_bits;  // encoding saturates
      }
      const uint32_t got = encode(f, d);
      if (got != expected) {
        ADD_FAILURE() << name(f) << " bits 0x" << std::hex << bits << " decodes to " << d
                      << ", re-encodes to 0x" << got << ", expected 0x" << expected;
        if (!budget.spend()) break;
      }
    }
    const int expected_nans[] = {2 * 1023, 2 * 127, 2, 2 * 3};
    EXPECT_EQ(nans, expected_nans[static_cast<int>(f)]) << name(f);
    EXPECT_EQ(infs, spec.has_inf ? 2 : 0) << name(f);
  }
}

TEST(NumberFormats, DecodeIsMonotonicAndSymmetric) {
  for (Format f : kFormats) {
    EXPECT_EQ(decode(f, 0), 0.0) << name(f);
    EXPECT_FALSE(std::signbit(decode(f, 0))) << name(f);
    EXPECT_TRUE(std::signbit(decode(f, sign_bit(f)))) << name(f);
    FailureBudget budget;
    for (uint32_t mag = 0; mag <= max_bits(f); ++mag) {
      const double v = decode(f, mag);
      const bool ok = decode(f, sign_bit(f) | mag) == -v && (mag == 0 || decode(f, mag - 1) < v);
      if (!ok) {
        ADD_FAILURE() << name(f) << " not monotonic/symmetric at 0x" << std::hex << mag;
        if (!budget.spend()) break;
      }
    }
  }
}

// Independent decoders: bf16 is the top half of an f32, e5m2 the top byte of
// an f16, e4m3 from the textbook formula, f16 from the compiler's _Float16.
TEST(NumberFormats, DecodeMatchesIndependentDefinitions) {
  auto same = [](double a, double b) {
    return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b));
  };
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const double want = std::bit_cast<float>(bits << 16);
    ASSERT_TRUE(same(decode(Format::bf16, bits), want)) << "bf16 0x" << std::hex << bits;
#ifdef __FLT16_MAX__
    const double want16 = static_cast<double>(std::bit_cast<_Float16>(static_cast<uint16_t>(bits)));
    ASSERT_TRUE(same(decode(Format::f16, bits), want16)) << "f16 0x" << std::hex << bits;
#endif
  }
  for (uint32_t bits = 0; bits < 0x100u; ++bits) {
    ASSERT_TRUE(same(decode(Format::e5m2, bits), decode(Format::f16, bits << 8)))
        << "e5m2 0x" << std::hex << bits;
    const uint32_t s = bits >> 7, e = (bits >> 3) & 15u, m = bits & 7u;
    double want = (e == 15 && m == 7) ? kNaN
                  : e == 0            ? std::pow(2.0, -6) * (m / 8.0)
                                      : std::pow(2.0, static_cast<int>(e) - 7) * (1.0 + m / 8.0);
    if (s) want = -want;
    ASSERT_TRUE(same(decode(Format::e4m3, bits), want)) << "e4m3 0x" << std::hex << bits;
  }
}

TEST(NumberFormats, KnownValues) {
  using namespace vkattn::ref;
  // f16
  EXPECT_EQ(f16_from_double(65504.0), 0x7BFF);
  EXPECT_EQ(f16_from_double(1.0), 0x3C00);
  EXPECT_EQ(f16_from_double(-0.0), 0x8000);
  EXPECT_EQ(f16_from_double(0.0), 0x0000);
  EXPECT_EQ(f16_from_double(std::ldexp(1.0, -24)), 0x0001);  // min subnormal
  EXPECT_EQ(f16_from_double(std::ldexp(1.0, -14)), 0x0400);  // min normal
  EXPECT_EQ(f16_from_double(1.0 + std::ldexp(1.0, -11)), 0x3C00);      // tie -> even (down)
  EXPECT_EQ(f16_from_double(1.0 + 3 * std::ldexp(1.0, -11)), 0x3C02);  // tie -> even (up)
  EXPECT_EQ(f16_from_double(std::ldexp(1.0, -25)), 0x0000);             // subnormal tie -> 0
  EXPECT_EQ(f16_from_double(-std::ldexp(1.0, -25)), 0x8000);
  EXPECT_EQ(f16_from_double(std::ldexp(3.0, -25)), 0x0002);  // subnormal tie -> even (up)
  EXPECT_EQ(f16_from_double(std::nextafter(std::ldexp(1.0, -25), 1.0)), 0x0001);
  EXPECT_EQ(f16_from_double(std::ldexp(2047.0, -25)), 0x0400);  // top subnormal tie -> min normal
  EXPECT_EQ(f16_to_double(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(f16_to_double(0x7BFF), 65504.0);
  EXPECT_TRUE(std::isinf(f16_to_double(0x7C00)));
  EXPECT_TRUE(std::isnan(f16_to_double(0x7E00)));
  // bf16
  EXPECT_EQ(bf16_from_double(1.0), 0x3F80);
  EXPECT_EQ(bf16_from_double(-0.0), 0x8000);
  EXPECT_EQ(bf16_from_double(std::ldexp(255.0, 120)), 0x7F7F);
  EXPECT_EQ(bf16_from_double(std::ldexp(1.0, -133)), 0x0001);
  EXPECT_EQ(bf16_from_double(1.0 + std::ldexp(1.0, -8)), 0x3F80);
  EXPECT_EQ(bf16_from_double(1.0 + 3 * std::ldexp(1.0, -8)), 0x3F82);
  EXPECT_EQ(bf16_from_double(std::ldexp(1.0, -134)), 0x0000);
  EXPECT_EQ(bf16_from_double(std::ldexp(3.0, -134)), 0x0002);
  EXPECT_EQ(bf16_from_double(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(bf16_from_double(3.14159265358979), 0x4049);
  EXPECT_EQ(bf16_to_double(0x0001), std::ldexp(1.0, -133));
  // e4m3 (fn)
  EXPECT_EQ(e4m3_from_double(448.0), 0x7E);
  EXPECT_EQ(e4m3_from_double(-448.0), 0xFE);
  EXPECT_EQ(e4m3_from_double(1.0), 0x38);
  EXPECT_EQ(e4m3_from_double(-0.0), 0x80);
  EXPECT_EQ(e4m3_from_double(std::ldexp(1.0, -9)), 0x01);
  EXPECT_EQ(e4m3_from_double(std::ldexp(1.0, -6)), 0x08);  // min normal
  EXPECT_EQ(e4m3_from_double(1.0625), 0x38);               // 1 + 2^-4: tie -> even (down)
  EXPECT_EQ(e4m3_from_double(1.1875), 0x3A);               // 1 + 3*2^-4: tie -> even (up)
  EXPECT_EQ(e4m3_from_double(std::ldexp(1.0, -10)), 0x00);  // subnormal tie -> 0
  EXPECT_EQ(e4m3_from_double(std::ldexp(3.0, -10)), 0x02);
  EXPECT_EQ(e4m3_from_double(std::ldexp(5.0, -10)), 0x02);  // 2.5 quanta -> 2
  EXPECT_EQ(e4m3_from_double(400.0), 0x7C);                 // tie 384|416 -> even (down)
  EXPECT_EQ(e4m3_from_double(432.0), 0x7E);                 // tie 416|448 -> even (up, to max)
  EXPECT_EQ(e4m3_to_double(0x7E), 448.0);
  EXPECT_EQ(e4m3_to_double(0x01), std::ldexp(1.0, -9));
  EXPECT_TRUE(std::isnan(e4m3_to_double(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_double(0xFF)));
  EXPECT_EQ(e4m3_to_double(0x78), 256.0);  // all-ones exponent is still finite in "fn"
  // e5m2
  EXPECT_EQ(e5m2_from_double(57344.0), 0x7B);
  EXPECT_EQ(e5m2_from_double(1.0), 0x3C);
  EXPECT_EQ(e5m2_from_double(-0.0), 0x80);
  EXPECT_EQ(e5m2_from_double(std::ldexp(1.0, -16)), 0x01);
  EXPECT_EQ(e5m2_from_double(1.125), 0x3C);  // 1 + 2^-3: tie -> even (down)
  EXPECT_EQ(e5m2_from_double(1.375), 0x3E);  // 1 + 3*2^-3: tie -> even (up)
  EXPECT_EQ(e5m2_from_double(std::ldexp(1.0, -17)), 0x00);
  EXPECT_EQ(e5m2_from_double(std::ldexp(3.0, -17)), 0x02);
  EXPECT_EQ(e5m2_to_double(0x7B), 57344.0);
  EXPECT_TRUE(std::isinf(e5m2_to_double(0x7C)));
  EXPECT_TRUE(std::isinf(e5m2_to_double(0xFC)) && e5m2_to_double(0xFC) < 0);
  for (uint8_t b : {0x7D, 0x7E, 0x7F}) EXPECT_TRUE(std::isnan(e5m2_to_double(b)));
  // Generic entry points agree with the named ones.
  EXPECT_EQ(encode(Format::e5m2, 3.0), e5m2_from_double(3.0));
  EXPECT_EQ(decode(Format::f16, 0x3555u), f16_to_double(0x3555));
  // Decoders ignore bits above the format's width.
  EXPECT_EQ(decode(Format::e4m3, 0xF38u), 1.0);
}

TEST(NumberFormats, Saturation) {
  const double big[] = {1e6, 1e300, std::numeric_limits<double>::max(), kInf};
  for (Format f : kFormats) {
    for (double x : big) {
      if (x < max_finite(f)) continue;
      EXPECT_EQ(encode(f, x), max_bits(f)) << name(f) << " " << x;
      EXPECT_EQ(encode(f, -x), sign_bit(f) | max_bits(f)) << name(f) << " " << -x;
    }
    // Just past max, at the would-be rounding midpoint, and between max and
    // the next binade all saturate (plain RNE would give inf / NaN here).
    const double m = max_finite(f), half_ulp = ulp_at(f, m) / 2;
    for (double x : {std::nextafter(m, kInf), m + half_ulp, m + 1.5 * half_ulp, 2 * m}) {
      EXPECT_EQ(encode(f, x), max_bits(f)) << name(f) << " " << x;
      EXPECT_EQ(encode(f, -x), sign_bit(f) | max_bits(f)) << name(f) << " " << -x;
    }
  }
  EXPECT_EQ(vkattn::ref::f16_from_double(65520.0), 0x7BFF);
  EXPECT_EQ(vkattn::ref::e4m3_from_double(464.0), 0x7E);  // RNE would land on the NaN pattern
  EXPECT_EQ(vkattn::ref::e4m3_from_double(480.0), 0x7E);
  EXPECT_EQ(vkattn::ref::e5m2_from_double(61440.0), 0x7B);
  EXPECT_EQ(vkattn::ref::e5m2_from_double(-kInf), 0xFB);
}

TEST(NumberFormats, NaNAndZeroSigns) {
  const double snan = std::numeric_limits<double>::signaling_NaN();
  for (Format f : kFormats) {
    const uint32_t nan = format_spec(f).nan_bits;
    EXPECT_EQ(encode(f, kNaN), nan) << name(f);
    EXPECT_EQ(encode(f, snan), nan) << name(f);
    EXPECT_EQ(encode(f, -kNaN), sign_bit(f) | nan) << name(f);
    EXPECT_EQ(encode(f, std::copysign(kNaN, -1.0)), sign_bit(f) | nan) << name(f);
    EXPECT_EQ(encode(f, 0.0), 0u) << name(f);
    EXPECT_EQ(encode(f, -0.0), sign_bit(f)) << name(f);
    EXPECT_EQ(encode(f, std::numeric_limits<double>::denorm_min()), 0u) << name(f);
    EXPECT_EQ(encode(f, -1e-300), sign_bit(f)) << name(f);  // underflow keeps the sign
  }
  EXPECT_EQ(vkattn::ref::f16_from_double(kNaN), 0x7E00);
  EXPECT_EQ(vkattn::ref::bf16_from_double(kNaN), 0x7FC0);
  EXPECT_EQ(vkattn::ref::e4m3_from_double(kNaN), 0x7F);
  EXPECT_EQ(vkattn::ref::e5m2_from_double(kNaN), 0x7E);
}

// Every midpoint between adjacent finite values rounds to the even neighbour,
// and the doubles just either side of it round to the nearer one.
TEST(NumberFormats, EveryMidpointTiesToEven) {
  for (Format f : kFormats) {
    FailureBudget budget;
    for (uint32_t mag = 0; mag < max_bits(f); ++mag) {
      const double lo = decode(f, mag), hi = decode(f, mag + 1);
      const double mid = (lo + hi) / 2;  // exact: few significant bits, far from double underflow
      const uint32_t even = (mag & 1u) ? mag + 1 : mag;
      for (uint32_t s : {0u, sign_bit(f)}) {
        const double sg = s ? -1.0 : 1.0;
        const bool ok = encode(f, sg * mid) == (s | even) &&
                        encode(f, sg * std::nextafter(mid, 0.0)) == (s | mag) &&
                        encode(f, sg * std::nextafter(mid, kInf)) == (s | (mag + 1));
        if (!ok) {
          ADD_FAILURE() << name(f) << " midpoint of 0x" << std::hex << mag << " and 0x" << mag + 1
                        << " (" << sg * mid << ") misrounded";
          if (!budget.spend()) break;
        }
      }
    }
  }
}

TEST(NumberFormats, UlpAt) {
  EXPECT_EQ(ulp_at(Format::f16, 1.0), std::ldexp(1.0, -10));
  EXPECT_EQ(ulp_at(Format::f16, -1.5), std::ldexp(1.0, -10));
  EXPECT_EQ(ulp_at(Format::f16, 0.0), std::ldexp(1.0, -24));
  EXPECT_EQ(ulp_at(Format::f16, 1e-30), std::ldexp(1.0, -24));
  EXPECT_EQ(ulp_at(Format::bf16, 1.0), std::ldexp(1.0, -7));
  EXPECT_EQ(ulp_at(Format::e4m3, 448.0), 32.0);
  EXPECT_EQ(ulp_at(Format::e4m3, 1e6), 32.0);
  EXPECT_EQ(ulp_at(Format::e5m2, 1.0), 0.25);
  EXPECT_TRUE(std::isnan(ulp_at(Format::e5m2, kNaN)));
  // At every representable value (the upper gap) and strictly between two
  // neighbours (their gap).
  for (Format f : kFormats) {
    FailureBudget budget;
    for (uint32_t mag = 0; mag < max_bits(f); ++mag) {
      const double lo = decode(f, mag), hi = decode(f, mag + 1), gap = hi - lo;
      if (ulp_at(f, lo) != gap || ulp_at(f, (lo + hi) / 2) != gap || ulp_at(f, -lo) != gap) {
        ADD_FAILURE() << name(f) << " ulp_at wrong at 0x" << std::hex << mag;
        if (!budget.spend()) break;
      }
    }
  }
}

// Random doubles over a range wider than each format's (deep underflow to
// overflow): the result must be the nearest representable, ties to even.
// Checked against the exact midpoints to the neighbouring values (exact in
// double), and against ulp_at.
TEST(NumberFormats, RandomDoublesRoundToNearest) {
  std::mt19937_64 rng(0x5eed1234u);
  for (Format f : kFormats) {
    const FormatSpec spec = format_spec(f);
    const int min_exp = 1 - spec.bias - spec.mantissa_bits - 4;
    const int max_exp = static_cast<int>(spec.max_finite_bits >> spec.mantissa_bits) - spec.bias + 3;
    std::uniform_int_distribution<int> exp_dist(min_exp, max_exp);
    FailureBudget budget;
    for (int i = 0; i < 1000000; ++i) {
      const uint64_t r = rng();
      // Mostly full 52-bit mantissas; every 8th sample keeps only a few
      // mantissa bits so that exact ties and near-ties show up often.
      uint64_t mant = r & ((uint64_t{1} << 52) - 1);
      if ((r >> 60) % 8 == 0) mant &= ~((uint64_t{1} << (52 - spec.mantissa_bits - 2)) - 1);
      double x = std::ldexp(1.0 + std::ldexp(static_cast<double>(mant), -52), exp_dist(rng));
      if (r >> 63) x = -x;

      const uint32_t bits = encode(f, x);
      const uint32_t sign = bits & sign_bit(f), mag = bits & (sign_bit(f) - 1);
      const double a = std::fabs(x), v = decode(f, mag);
      bool ok = (sign != 0) == std::signbit(x) && mag <= spec.max_finite_bits;
      if (ok && a > max_finite(f)) {
        ok = mag == spec.max_finite_bits;
      } else if (ok) {
        const double below = mag == 0 ? -v : (decode(f, mag - 1) + v) / 2;
        const double above = mag == spec.max_finite_bits ? kInf : (v + decode(f, mag + 1)) / 2;
        const bool even = (mag & 1u) == 0;
        ok = (a > below || (a == below && even)) && (a < above || (a == above && even)) &&
             std::fabs(a - v) <= ulp_at(f, x) / 2;
      }
      if (!ok) {
        ADD_FAILURE() << name(f) << " " << x << " encoded as 0x" << std::hex << bits << " = "
                      << decode(f, bits);
        if (!budget.spend()) break;
      }
    }
  }
}

#ifdef __FLT16_MAX__
// The compiler's double -> _Float16 conversion is correctly rounded (RNE) but
// overflows to inf instead of saturating; compare where the two agree.
TEST(NumberFormats, F16MatchesCompilerConversion) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int> exp_dist(-28, 15);
  for (int i = 0; i < 200000; ++i) {
    const uint64_t r = rng();
    double x = std::ldexp(1.0 + std::ldexp(static_cast<double>(r & ((uint64_t{1} << 52) - 1)), -52),
                          exp_dist(rng));
    if (r >> 63) x = -x;
    if (std::fabs(x) >= 65520.0) continue;
    const auto want = std::bit_cast<uint16_t>(static_cast<_Float16>(x));
    ASSERT_EQ(vkattn::ref::f16_from_double(x), want) << x;
  }
}
#endif

}  // namespace
