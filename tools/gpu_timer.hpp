// GPU time of recorded work, from timestamp queries written before and after it.
#pragma once
#include <vkattn/context.hpp>

#include <functional>
#include <vector>

namespace vkattn::tool {

class GpuTimer {
 public:
  // Room for `max_samples` timed regions per submission.
  GpuTimer(Context& ctx, uint32_t max_samples = 256);
  ~GpuTimer();
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;
  // Runs record() `repetitions` times in one submission, each between its own
  // pair of timestamps, and returns the microseconds of each. Throws if the
  // device has no timestamps on the context's queue.
  std::vector<double> time_us(const std::function<void(VkCommandBuffer, uint32_t rep)>& record, uint32_t repetitions);

 private:
  Context& ctx_;
  VkQueryPool pool_ = VK_NULL_HANDLE;
  uint32_t max_samples_;
};

// Median GPU time of `record` for `vkattn run`: one warm-up repetition (which
// also estimates the cost), then up to `max_repetitions`, as many as fit in
// `budget_us` of GPU time (slow devices, e.g. a CPU driver, get fewer).
double median_time_us(Context& ctx, const std::function<void(VkCommandBuffer)>& record, uint32_t max_repetitions,
                      double budget_us = 2e6);

}  // namespace vkattn::tool
