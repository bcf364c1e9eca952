// TensorView is a plain value: its extents live in place (Extents), so an
// engine that builds its views every step allocates nothing for them
// (test_record_allocations.cpp counts that), and a view copies as bytes.
#include <vkattn/error.hpp>
#include <vkattn/tensor.hpp>

#include <gtest/gtest.h>

#include <type_traits>
#include <vector>

#include "vk_test.hpp"

namespace vkattn::test {
namespace {

static_assert(std::is_trivially_copyable_v<TensorView>, "a view copies as bytes");
static_assert(std::is_trivially_copyable_v<Extents>);

TEST(Extents, BehavesAsTheVectorItReplaces) {
  Extents e{4, 32, 128};
  EXPECT_EQ(e.size(), 3u);
  EXPECT_EQ(e.front(), 4);
  EXPECT_EQ(e.back(), 128);
  EXPECT_EQ(e.to_vector(), (std::vector<int64_t>{4, 32, 128}));
  e.insert(e.begin() + 1, 2);
  EXPECT_EQ(e, (Extents{4, 2, 32, 128}));
  e.erase(e.begin());
  EXPECT_EQ(e, (Extents{2, 32, 128}));
  e.resize(5, 7);
  EXPECT_EQ(e, (Extents{2, 32, 128, 7, 7}));
  e.assign(2, 1);
  EXPECT_EQ(e, (Extents{1, 1}));
  e = {9};
  EXPECT_EQ(e.size(), 1u);
  EXPECT_NE(e, (Extents{9, 1}));
  const std::vector<int64_t> v{3, 5};
  const Extents from_vector = v;   // a vector converts
  EXPECT_EQ(from_vector, (Extents{3, 5}));
  e.clear();
  EXPECT_TRUE(e.empty());
  int64_t sum = 0;
  for (int64_t x : Extents{1, 2, 3}) sum += x;
  EXPECT_EQ(sum, 6);
}

TEST(Extents, MoreThanItHoldsIsAnError) {
  Extents e;
  for (std::size_t i = 0; i < Extents::kMaxRank; ++i) e.push_back(1);
  EXPECT_VKATTN_ERROR(e.push_back(1), "9 dimensions", "at most 8");
  EXPECT_EQ(e.size(), Extents::kMaxRank);   // unchanged
  EXPECT_VKATTN_ERROR(e.insert(e.begin(), 1), "9 dimensions");
  EXPECT_VKATTN_ERROR(e.resize(12), "12 dimensions");
  EXPECT_VKATTN_ERROR((Extents{1, 2, 3, 4, 5, 6, 7, 8, 9}), "9 dimensions");
  const std::vector<int64_t> ten(10, 1);
  EXPECT_VKATTN_ERROR(e.assign(ten.begin(), ten.end()), "9 dimensions");
  EXPECT_VKATTN_ERROR(e = ten, "9 dimensions");
}

TEST(TensorViewValue, ACopyIsIndependent) {
  TensorView a;
  a.shape = {2, 3};
  a.strides = {4, 1};
  TensorView b = a;
  b.shape[0] = 5;
  b.strides.clear();
  EXPECT_EQ(a.shape, (Extents{2, 3}));
  EXPECT_EQ(a.stride(0), 4);
  EXPECT_EQ(b.stride(0), 3);
  EXPECT_EQ(b.shape_string(), "[5, 3]");
}

}  // namespace
}  // namespace vkattn::test
