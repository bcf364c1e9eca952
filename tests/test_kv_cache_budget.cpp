// A cache larger than the device's memory budget (Capabilities::
// device_local_budget_bytes) is refused before anything is allocated.
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

class KvCacheBudget : public VkTest {};

TEST_F(KvCacheBudget, ACacheFourTimesTheBudgetIsRefused) {
  const uint64_t budget = ctx().capabilities().device_local_budget_bytes;
  if (budget == 0) GTEST_SKIP() << "the device reports no memory budget";
  // Large blocks (4 MiB of K and V each) keep the block count small.
  KvCacheConfig c{.num_blocks = 0, .block_size = 256, .num_kv_heads = 64, .head_size = 128};
  const uint64_t per_block = 2ull * c.block_size * c.num_kv_heads * c.head_size * 2;
  const uint64_t blocks = (4 * budget + per_block - 1) / per_block;
  if (blocks * c.block_size >= (1ull << 31)) GTEST_SKIP() << "budget too large to exceed with 2^31 slots";
  c.num_blocks = static_cast<uint32_t>(blocks);
  // (EXPECT_VKATTN_ERROR's fragments must outlive its loop: named strings.)
  const std::string what = "PagedKvCache: " + std::to_string(blocks) + " blocks take";
  const std::string available = "more than the device has available (" + std::to_string(budget) + " bytes";
  EXPECT_VKATTN_ERROR(PagedKvCache(ctx(), c), what.c_str(), available.c_str(), "use fewer blocks");
  // The refused cache allocated nothing: a cache within the budget still fits.
  c.num_blocks = 1;
  EXPECT_NO_THROW(PagedKvCache(ctx(), c));
}

}  // namespace
}  // namespace vkattn::test
