// vkattn bench refuses to time a case that fails verification, unless
// VKATTN_BENCH_TIMING_ONLY=1 (timing-only builds that leave a stage out):
// then it times it and reports it unverified. And it times a case again when
// its samples drift (steady_samples), or when the machine's matrix or copy
// rate read slow right after it (MeasureOptions::machine_check).
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_op.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

class BenchTimingOnly : public VkTest {
 protected:
  void TearDown() override { clear_test_env("VKATTN_BENCH_TIMING_ONLY"); }

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
  clear_test_env("VKATTN_BENCH_TIMING_ONLY");
  tool::BenchOp op = wrong_case();
  EXPECT_VKATTN_ERROR(tool::measure(ctx(), op, few()), "wrong on purpose", "failed verification", "every value is off");
  EXPECT_TRUE(op.info.samples_us.empty());
}

TEST_F(BenchTimingOnly, TimingOnlyTimesItAndSaysItIsUnverified) {
  set_test_env("VKATTN_BENCH_TIMING_ONLY", "1");
  tool::BenchOp op = wrong_case();
  EXPECT_NO_THROW(tool::measure(ctx(), op, few()));
  EXPECT_FALSE(op.info.verified);
  EXPECT_GE(op.info.samples_us.size(), 2u);
}

TEST_F(BenchTimingOnly, OnlyTheValueOneCounts) {
  set_test_env("VKATTN_BENCH_TIMING_ONLY", "yes");
  tool::BenchOp op = wrong_case();
  EXPECT_VKATTN_ERROR(tool::measure(ctx(), op, few()), "failed verification");
}

// A case whose machine check reads slow (the matrix rate or the copy rate
// under 90% of its ceiling) is timed again, once, and flagged only when the
// second check reads slow too.
TEST_F(BenchTimingOnly, ASlowMachineCheckRetimesTheCaseOnce) {
  clear_test_env("VKATTN_BENCH_TIMING_ONLY");
  auto passing = [] {
    tool::BenchOp op = wrong_case();
    op.info.name = "fine";
    op.verify = [] {
      tool::Verification v;
      v.pass = true;
      return v;
    };
    return op;
  };
  const tool::MachineRates ceiling{600, 4000}, fast{641, 4100};
  // 539 < 90% of 600 = 540; 3599 < 90% of 4000 = 3600.
  for (const tool::MachineRates slow_reading : {tool::MachineRates{539, 4100}, tool::MachineRates{641, 3599}})
    for (const bool stays_slow : {false, true}) {
      SCOPED_TRACE(std::string(stays_slow ? "stays slow, " : "slow once, ") + (slow_reading.matrix_tflops < 540 ? "matrix" : "copy"));
      tool::BenchOp op = passing();
      tool::MeasureOptions o = few();
      int checks = 0;
      o.machine_ceiling = ceiling;
      o.machine_check = [&] { return ++checks == 1 || stays_slow ? slow_reading : fast; };
      EXPECT_NO_THROW(tool::measure(ctx(), op, o));
      EXPECT_EQ(checks, 2);
      const tool::MachineRates last = stays_slow ? slow_reading : fast;
      EXPECT_EQ(op.info.params["matrix_rate_after"], last.matrix_tflops == 539 ? "539" : "641");
      EXPECT_EQ(op.info.params["copy_rate_after"], last.copy_gbps == 3599 ? "3599" : "4100");
      EXPECT_EQ(op.info.params.count("machine_slow"), stays_slow ? 1u : 0u);
      EXPECT_EQ(op.info.params["retimes"], "1");
    }
  // At 90% of both ceilings: one check, no retime.
  tool::BenchOp op = passing();
  tool::MeasureOptions o = few();
  int checks = 0;
  o.machine_ceiling = ceiling;
  o.machine_check = [&] { return ++checks, tool::MachineRates{540, 3600}; };
  EXPECT_NO_THROW(tool::measure(ctx(), op, o));
  EXPECT_EQ(checks, 1);
  EXPECT_EQ(op.info.params.count("machine_slow"), 0u);
  EXPECT_EQ(op.info.params.count("retimes"), 0u);
}

// The H200's sliding-window case of 25 November 2026: 6 repetitions at 20.2
// ms, then 4.9 ms from one to the next.
TEST(BenchSteadySamples, ASlowStartIsNotSteady) {
  std::vector<double> s(6, 20200.0);
  s.insert(s.end(), 14, 4900.0);
  EXPECT_FALSE(tool::steady_samples(s));
}

TEST(BenchSteadySamples, NoiseAndOneOutlierAreSteady) {
  std::vector<double> s;
  for (int i = 0; i < 20; ++i) s.push_back(14430.0 + (i % 3) * 10.0);
  s[0] = 45308;   // a first repetition's outlier: the quarter's median ignores it
  EXPECT_TRUE(tool::steady_samples(s));
}

TEST(BenchSteadySamples, TheBoundIsThreePercentOfTheFasterQuarter) {
  std::vector<double> s(4, 103.0);
  s.insert(s.end(), 4, 100.0);
  EXPECT_TRUE(tool::steady_samples(s));
  s[0] = s[1] = s[2] = s[3] = 103.1;
  EXPECT_FALSE(tool::steady_samples(s));
  // A run that speeds up is caught as one that slows down.
  std::vector<double> r(s.rbegin(), s.rend());
  EXPECT_FALSE(tool::steady_samples(r));
}

TEST(BenchSteadySamples, FewerThanEightSamplesCountAsSteady) {
  EXPECT_TRUE(tool::steady_samples({}));
  EXPECT_TRUE(tool::steady_samples({1, 1, 1, 100, 100, 100, 100}));
}

}  // namespace
}  // namespace vkattn::test
