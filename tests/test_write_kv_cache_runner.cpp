// `vkattn run write-kv-cache`'s case: padding tokens take no slot, every
// other token a slot of its own, so num_tokens - padding must fit the cache.
#include <functional>
#include <string>
#include <vector>

#include "runners/write_kv_cache_runner.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

using tool::WriteKvCacheCase;

WriteKvCacheCase one_block_case(uint32_t tokens, uint32_t padding) {
  WriteKvCacheCase c;
  c.num_tokens = tokens;
  c.padding_tokens = padding;
  c.cache = {.num_blocks = 1, .block_size = 16, .num_kv_heads = 1, .head_size = 16};
  c.timing_repetitions = 0;
  return c;
}

// Parses the tool's flags and builds its case (no device involved).
WriteKvCacheCase case_from_flags(const std::vector<std::string>& args) {
  cli::Flags f("vkattn run write-kv-cache", "");
  tool::WriteKvCacheFlags wf(f);
  f.parse(args);
  return wf.apply();
}

std::string usage_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const cli::UsageError& e) {
    return e.what();
  }
  return "";
}

class WriteKvCacheRunner : public VkTest {};

TEST_F(WriteKvCacheRunner, EverySlotTakenWhenTheTokensLessPaddingFillTheCache) {
  // 19 tokens, 3 of them padding: the other 16 fill the 16 slots exactly.
  for (uint64_t seed : {1, 2, 3}) {
    auto c = one_block_case(19, 3);
    c.seed = seed;
    auto r = tool::run_write_kv_cache(ctx(), c);
    EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure;
    EXPECT_NE(r.summary.find("19 tokens (3 padding)"), std::string::npos) << r.summary;
  }
}

TEST_F(WriteKvCacheRunner, MoreTokensThanSlotsIsAUsageError) {
  const std::string msg = usage_error_of([&] { tool::run_write_kv_cache(ctx(), one_block_case(20, 3)); });
  EXPECT_NE(msg.find("20 tokens with 3 padding leave 17 tokens"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the cache has only 16"), std::string::npos) << msg;
}

TEST(WriteKvCacheRunnerFlags, TooManyTokensAreRefusedBeforeTheDeviceOpens) {
  EXPECT_NO_THROW(case_from_flags({"--num-blocks", "1", "--block-size", "16", "--num-tokens", "19", "--padding", "3"}));
  EXPECT_NO_THROW(case_from_flags({"--num-blocks", "1", "--block-size", "16", "--num-tokens", "5", "--padding", "9"}));
  const std::string msg = usage_error_of(
      [] { case_from_flags({"--num-blocks", "1", "--block-size", "16", "--num-tokens", "19", "--padding", "2"}); });
  EXPECT_NE(msg.find("19 tokens with 2 padding leave 17 tokens"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(--num-blocks x --block-size)"), std::string::npos) << msg;
}

}  // namespace
}  // namespace vkattn::test
