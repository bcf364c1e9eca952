#include <gtest/gtest.h>
#include <vkattn/block_allocator.hpp>
#include <vkattn/error.hpp>

namespace vkattn {
namespace {

TEST(BlockAllocator, AllocatesFreesAndReuses) {
  BlockAllocator a(8);
  auto x = a.allocate(3);
  EXPECT_EQ(x, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(a.num_free(), 5u);
  a.free(x);
  EXPECT_EQ(a.num_free(), 8u);
  auto y = a.allocate(8);
  std::sort(y.begin(), y.end());
  EXPECT_EQ(y, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_THROW(a.allocate(1), Error);
}

TEST(BlockAllocator, ForkSharesBlocksUntilTheLastReference) {
  BlockAllocator a(4);
  auto prefix = a.allocate(2);
  auto shared = a.fork(prefix);
  EXPECT_EQ(shared, prefix);
  EXPECT_EQ(a.ref_count(prefix[0]), 2u);
  a.free(prefix);
  EXPECT_EQ(a.num_free(), 2u);   // still held by the fork
  a.free(shared);
  EXPECT_EQ(a.num_free(), 4u);
}

TEST(BlockAllocator, BadFreesAreErrorsAndChangeNothing) {
  BlockAllocator a(4);
  auto b = a.allocate(1);
  try {
    a.free(std::vector<uint32_t>{b[0], 3});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("block 3 is not allocated"), std::string::npos) << e.what();
  }
  EXPECT_EQ(a.ref_count(b[0]), 1u);   // all or nothing
  EXPECT_THROW(a.free(std::vector<uint32_t>{b[0], b[0]}), Error);
  EXPECT_THROW(a.free(std::vector<uint32_t>{9}), Error);
  EXPECT_THROW(a.fork(std::vector<uint32_t>{2}), Error);
}

TEST(BlockTable, FlattensWithPadding) {
  BlockTable t;
  t.add_sequence({5, 2, 7});
  t.add_sequence({1});
  EXPECT_EQ(t.max_blocks_per_sequence(), 3u);
  EXPECT_EQ(t.flattened(), (std::vector<int32_t>{5, 2, 7, 1, 0, 0}));
}

// Found by an adversarial pass: lookups past the end threw std::out_of_range,
// ids of 2^31 or more wrapped negative in the int32 table, and an empty
// allocator's messages named block 2^64 - 1.
TEST(BlockTable, OutOfRangeAndTooLargeIdsAreErrors) {
  BlockTable t;
  EXPECT_THROW(t.sequence(0), Error);
  t.add_sequence({1, 0x80000000u});
  try {
    t.flattened();
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("block 2147483648"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("below 2^31"), std::string::npos) << e.what();
  }
  t.sequence(0)[1] = 0x7FFFFFFFu;
  EXPECT_EQ(t.flattened(), (std::vector<int32_t>{1, 0x7FFFFFFF}));
  BlockAllocator none(0);
  try {
    none.ref_count(0);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("it has no blocks"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vkattn
