// The non-finite tests' check: in a batch whose K and V are all 0.25 but for
// planted non-finite values, every output that sees none of them averages
// back to exactly 0.25, and every output that sees one is not finite.
#pragma once
#include <cmath>
#include <cstdint>

#include <gtest/gtest.h>

namespace vkattn::test {

// out: [T, Hq, D] f32 as downloaded; sees(t, h, d): whether that output sees
// a planted value (the test's own geometry); exactly: where the planted
// values are infinities of one sign, that infinity (a NaN there means a
// product 0 x Inf that no row should have met); NaN: any non-finite value.
template <class Out, class Sees>
void expect_nonfinite_exactly_where_seen(const Out& out, uint32_t T, uint32_t Hq, uint32_t D, Sees sees,
                                         float exactly = NAN) {
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t h = 0; h < Hq; ++h)
      for (uint32_t d = 0; d < D; ++d) {
        const float x = out[(t * Hq + h) * D + d];
        if (sees(t, h, d) && !std::isnan(exactly))
          EXPECT_EQ(x, exactly) << "token " << t << " head " << h << " dim " << d << " sees the value";
        else if (sees(t, h, d))
          EXPECT_FALSE(std::isfinite(x)) << "token " << t << " head " << h << " dim " << d << " sees the value but gave " << x;
        else
          ASSERT_FLOAT_EQ(x, 0.25f) << "token " << t << " head " << h << " dim " << d << " cannot see the value";
      }
}

}  // namespace vkattn::test
