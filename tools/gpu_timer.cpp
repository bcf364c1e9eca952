#include "gpu_timer.hpp"

#include <vkattn/error.hpp>

#include "context_impl.hpp"

#include <algorithm>
#include <functional>

namespace vkattn::tool {

GpuTimer::GpuTimer(Context& ctx, uint32_t max_samples) : ctx_(ctx), max_samples_(max_samples) {
  if (ctx.capabilities().timestamp_period_ns <= 0)
    throw Error("timing needs timestamp queries, which the queue of device '" + ctx.capabilities().device_name + "' lacks");
  VkQueryPoolCreateInfo ci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  ci.queryType = VK_QUERY_TYPE_TIMESTAMP;
  ci.queryCount = 2 * max_samples;
  if (ctx.impl().vk.vkCreateQueryPool(ctx.device(), &ci, nullptr, &pool_) != VK_SUCCESS) throw Error("vkCreateQueryPool failed");
}

GpuTimer::~GpuTimer() { ctx_.impl().vk.vkDestroyQueryPool(ctx_.device(), pool_, nullptr); }

std::vector<double> GpuTimer::time_us(const std::function<void(VkCommandBuffer, uint32_t)>& record, uint32_t repetitions) {
  std::vector<double> out;
  out.reserve(repetitions);
  const double ns_per_tick = ctx_.capabilities().timestamp_period_ns;
  const auto& vk = ctx_.impl().vk;
  for (uint32_t done = 0; done < repetitions;) {
    uint32_t n = std::min(repetitions - done, max_samples_);
    ctx_.submit_and_wait([&](VkCommandBuffer cmd) {
      vk.vkCmdResetQueryPool(cmd, pool_, 0, 2 * n);
      for (uint32_t i = 0; i < n; ++i) {
        // Each sample starts after the previous one's work has finished, so
        // samples do not overlap.
        VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
        mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
        mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
        vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0,
                             nullptr, 0, nullptr);
        vk.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool_, 2 * i);
        record(cmd, done + i);
        vk.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool_, 2 * i + 1);
      }
    });
    std::vector<uint64_t> ticks(2 * n);
    VkResult r = vk.vkGetQueryPoolResults(ctx_.device(), pool_, 0, 2 * n, ticks.size() * sizeof(uint64_t), ticks.data(),
                                       sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    if (r != VK_SUCCESS) throw Error("vkGetQueryPoolResults failed", r);
    for (uint32_t i = 0; i < n; ++i) out.push_back(double(ticks[2 * i + 1] - ticks[2 * i]) * ns_per_tick * 1e-3);
    done += n;
  }
  return out;
}

double median_time_us(Context& ctx, const std::function<void(VkCommandBuffer)>& record, uint32_t max_repetitions,
                      double budget_us) {
  GpuTimer timer(ctx);
  auto rec = [&](VkCommandBuffer cmd, uint32_t) { record(cmd); };
  const double first = timer.time_us(rec, 1)[0];
  const auto n = static_cast<uint32_t>(std::clamp(budget_us / std::max(first, 1e-3), 1.0, double(std::max(max_repetitions, 1u))));
  auto us = timer.time_us(rec, n);
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  return us[us.size() / 2];
}

}  // namespace vkattn::tool
