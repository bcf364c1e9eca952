// The chunk division the kernels run (abi/kv_chunk_division.h), compiled
// here from the same text, against the division it replaces: every divisor
// from 1 to 4096 and around each power of two, at the blocks where a
// rounding error would show first (each multiple of the divisor and the
// block before it) and at the top of the range (2^31 - 1).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "abi/kv_chunk_division.h"

namespace {
using vkattn::abi::vka_kv_chunk_magic;
using vkattn::abi::vka_kv_chunk_of;

constexpr uint32_t kTop = 0x7fffffffu;   // the largest block a cache holds

// Blocks to check for divisor d: 0, the top, and around up to `per` multiples
// of d spread over the range (their neighbours are where a short multiplier
// would first be off by one).
std::vector<uint32_t> blocks_for(uint32_t d, uint32_t per) {
  std::vector<uint32_t> b = {0u, 1u, kTop, kTop - 1u};
  const uint64_t multiples = kTop / d, step = multiples / per + 1;
  for (uint64_t m = 1; m <= multiples; m += step)
    for (int64_t delta : {-1, 0, 1}) {
      const int64_t x = int64_t(m * d) + delta;
      if (x >= 0 && x <= int64_t(kTop)) b.push_back(uint32_t(x));
    }
  const uint64_t last = multiples * d;   // the last multiple and its neighbours
  for (uint64_t x : {last - 1, last, last + 1})
    if (x <= kTop) b.push_back(uint32_t(x));
  return b;
}

void expect_exact(uint32_t d, uint32_t per) {
  const uint32_t magic = vka_kv_chunk_magic(d);
  for (uint32_t block : blocks_for(d, per))
    ASSERT_EQ(vka_kv_chunk_of(block, d, magic), block / d) << "block " << block << ", blocks_per_chunk " << d;
}

TEST(KvChunkDivision, EverySmallDivisor) {
  for (uint32_t d = 1; d <= 4096; ++d) expect_exact(d, 64);
}

TEST(KvChunkDivision, AroundEveryPowerOfTwo) {
  for (uint32_t s = 12; s <= 31; ++s) {
    const uint32_t p = 1u << s;
    for (uint32_t d : {p - 1u, p, p + 1u, p + p / 3u})
      if (d >= 1u && d <= kTop) expect_exact(d, 4096);
  }
}
}  // namespace
