// The host's rules for what a dispatch may assume of a view (src/dispatch.hpp).
#include <gtest/gtest.h>

#include "dispatch.hpp"

namespace vkattn::detail {
namespace {

// The prefill kernel loads q 16 bytes at a time (PA_FLAG_Q_WIDE,
// BS_FLAG_Q_WIDE) and stores out so (PA_FLAG_OUT_WIDE, BS_FLAG_OUT_WIDE),
// and prefix prefill and block-sparse attention load their K/V so, only
// where every row of 8 elements starts on a 16-byte word: an element offset
// or any stride off a multiple of 8 must say no.
TEST(RowsOf8OnWords, EveryStrideAndTheOffsetMustBeMultiplesOf8) {
  EXPECT_TRUE(rows_of_8_on_words(0, {4096, 128}));
  EXPECT_TRUE(rows_of_8_on_words(8, {4096 + 8, 128, 0}));   // padded rows, a broadcast (zero) stride
  EXPECT_FALSE(rows_of_8_on_words(3, {4096, 128}));         // the view starts mid-word
  EXPECT_FALSE(rows_of_8_on_words(0, {4096 + 3, 128}));     // token rows 3 elements apart
  EXPECT_FALSE(rows_of_8_on_words(0, {4096, 132}));         // head rows off words
  EXPECT_FALSE(rows_of_8_on_words(0, {4096, 128, 12}));     // any stride counts
  EXPECT_TRUE(rows_of_8_on_words(16, {}));
}

}  // namespace
}  // namespace vkattn::detail
