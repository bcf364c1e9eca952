// vkattn bench refuses to time a case that fails verification, unless
// VKATTN_BENCH_TIMING_ONLY=1 (timing-only builds that leave a stage out):
// then it times it and reports it unverified.
#include <cstdlib>

#include "bench/bench_op.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

class BenchTimingOnly : public VkTest {
 protected:
  void TearDown() override { ::unsetenv("VKATTN_BENCH_TIMING_ONLY"); }

  // A case whose check always fails, and whose repetition records nothing.
  static tool::BenchOp wrong_case() {
    tool::BenchOp op;
    op.info.name = "wrong on purpose";
    op.record = [](VkCommandBuffer, uint32_t) {};
    op.verify = [] {
      tool::Verification v;
      v.failure = "every value is off";
      return v;
    };
    return op;
  }
  static tool::MeasureOptions few() {
    tool::MeasureOptions o;
    o.repeat = 2;
    o.min_time_s = 0;
    o.warmup = 1;
    o.warmup_time_s = 0;
    return o;
  }
};

TEST_F(BenchTimingOnly, AFailedCheckStopsTheBenchmark) {
  ::unsetenv("VKATTN_BENCH_TIMING_ONLY");
  tool::BenchOp op = wrong_case();
  EXPECT_VKATTN_ERROR(tool::measure(ctx(), op, few()), "wrong on purpose", "failed verification", "every value is off");
  EXPECT_TRUE(op.info.samples_us.empty());
}

TEST_F(BenchTimingOnly, TimingOnlyTimesItAndSaysItIsUnverified) {
  ::setenv("VKATTN_BENCH_TIMING_ONLY", "1", 1);
  tool::BenchOp op = wrong_case();
  EXPECT_NO_THROW(tool::measure(ctx(), op, few()));
  EXPECT_FALSE(op.info.verified);
  EXPECT_GE(op.info.samples_us.size(), 2u);
}

TEST_F(BenchTimingOnly, OnlyTheValueOneCounts) {
  ::setenv("VKATTN_BENCH_TIMING_ONLY", "yes", 1);
  tool::BenchOp op = wrong_case();
  EXPECT_VKATTN_ERROR(tool::measure(ctx(), op, few()), "failed verification");
}

}  // namespace
}  // namespace vkattn::test
