#include "bench/bench_op.hpp"

#include <vkattn/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string_view>

#include "gpu_timer.hpp"

namespace vkattn::tool {

uint32_t rotation_copies(uint64_t bytes) {
  if (bytes == 0) return 1;
  return static_cast<uint32_t>(std::clamp<uint64_t>((kRotateBytes + bytes - 1) / bytes, 1, 64));
}

void measure(Context& ctx, BenchOp& op, const MeasureOptions& o) {
  Verification v = op.verify();
  op.info.verified = v.pass;
  op.info.max_abs_err = v.max_abs_err;
  op.info.max_rel_err = v.max_rel_err;
  // VKATTN_BENCH_TIMING_ONLY=1 (developer aid, DEVELOPERS.md): ablation builds
  // that leave a stage out give wrong results on purpose; their cases are
  // timed anyway and the report says "no" under verified.
  const char* timing_only = std::getenv("VKATTN_BENCH_TIMING_ONLY");
  if (!v.pass && !(timing_only && std::string_view(timing_only) == "1"))
    throw Error("benchmark case '" + op.info.name + "' failed verification: " + v.failure);

  if (o.before_timing) o.before_timing();
  GpuTimer timer(ctx);
  // Pipelines are created in the first warm-up repetition, outside the timing.
  // Then warm up until the GPU is in a steady state: at least warmup_time_s of
  // work and two consecutive batches whose medians agree within 2%. (Seen on an
  // H200: after a few seconds of host-side setup, copies ran at 41% of their
  // speed for well over 0.1 s of renewed load.)
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  double warm_us = 0, previous = -1;
  for (double x : timer.time_us(op.record, o.warmup)) warm_us += x;
  const double batch_us = std::max(o.warmup_time_s * 1e6 / 5, 1.0);
  for (int batches = 0; batches < 1000 && warm_us < o.max_warmup_time_s * 1e6; ++batches) {
    uint32_t n = static_cast<uint32_t>(std::clamp(batch_us / std::max(warm_us / o.warmup, 0.1), 1.0, 256.0));
    auto us = timer.time_us(op.record, n);
    for (double x : us) warm_us += x;
    double m = median(us);
    bool steady = previous > 0 && std::fabs(m - previous) <= 0.02 * previous;
    previous = m;
    if (warm_us >= o.warmup_time_s * 1e6 && steady) break;
  }
  // Timed until the samples are steady: a run whose first quarter's median
  // is more than 3% off its last quarter's is timed again (up to
  // kMaxRetimes times). Seen on an H200 (`bench sparse`, 25 November 2026):
  // after a spin-up and a warm-up whose batches agreed, a case's first 2 to 7
  // repetitions still ran 1.5 to 4x slower than the rest (a window mask at
  // 20.2 ms, then 4.9 ms from one repetition to the next), so the median of a
  // short run reported the slow state.
  constexpr int kMaxRetimes = 3;
  int machine_retimes = 0;
  for (int attempt = 0;; ++attempt) {
    op.info.samples_us.clear();
    double total_us = 0;
    uint32_t batch = std::max<uint32_t>(1, std::min(o.repeat, 64u));
    while (op.info.samples_us.size() < o.repeat || (total_us < o.min_time_s * 1e6 && op.info.samples_us.size() < o.max_repeat)) {
      auto base = static_cast<uint32_t>(op.info.samples_us.size());
      auto us = timer.time_us([&](VkCommandBuffer cmd, uint32_t rep) { op.record(cmd, base + rep); }, batch);
      for (double x : us) total_us += x;
      op.info.samples_us.insert(op.info.samples_us.end(), us.begin(), us.end());
    }
    const bool steady = steady_samples(op.info.samples_us);
    if (steady && o.machine_check) {
      const MachineRates now = o.machine_check();
      auto reading = [&](const char* key, double value) {
        char text[32];
        std::snprintf(text, sizeof text, "%.4g", value);
        op.info.params[key] = text;
      };
      reading("matrix_rate_after", now.matrix_tflops);
      reading("copy_rate_after", now.copy_gbps);
      auto below = [](double value, double ceiling) { return ceiling > 0 && value < 0.9 * ceiling; };
      const bool slow = below(now.matrix_tflops, o.machine_ceiling.matrix_tflops) || below(now.copy_gbps, o.machine_ceiling.copy_gbps);
      if (slow) op.info.params["machine_slow"] = "yes";
      else op.info.params.erase("machine_slow");
      if (slow && machine_retimes++ == 0) {
        std::fprintf(stderr,
                     "bench: after '%s', the f16 matrix rate read %.1f TFLOP/s (the run's ceiling %.1f) and the copy %.0f GB/s "
                     "(%.0f): timing it again\n",
                     op.info.name.c_str(), now.matrix_tflops, o.machine_ceiling.matrix_tflops, now.copy_gbps,
                     o.machine_ceiling.copy_gbps);
        op.info.params["retimes"] = std::to_string(attempt + 1);
        continue;
      }
    }
    if (steady) break;
    if (attempt == kMaxRetimes) {
      op.info.params["unsteady"] = "yes";   // the report keeps the last run, and says so
      break;
    }
    op.info.params["retimes"] = std::to_string(attempt + 1);
  }
}

bool steady_samples(const std::vector<double>& samples) {
  // Too few to tell (the smoke tests' --repeat 2 or 3): steady.
  if (samples.size() < 8) return true;
  const std::size_t q = samples.size() / 4;
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  const double first = median({samples.begin(), samples.begin() + q});
  const double last = median({samples.end() - q, samples.end()});
  return std::fabs(first - last) <= 0.03 * std::min(first, last);
}

}  // namespace vkattn::tool
