#include "bench/bench_op.hpp"

#include <vkattn/error.hpp>

#include <algorithm>
#include <numeric>

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
  if (!v.pass) throw Error("benchmark case '" + op.info.name + "' failed verification: " + v.failure);

  GpuTimer timer(ctx);
  // Pipelines are created in the first warm-up repetition, outside the timing.
  double warm_us = 0;
  for (uint32_t done = 0; done < o.warmup || (warm_us < o.warmup_time_s * 1e6 && done < 100000);) {
    uint32_t n = done < o.warmup ? o.warmup : std::max<uint32_t>(1, std::min<uint32_t>(done, 256));
    for (double x : timer.time_us(op.record, n)) warm_us += x;
    done += n;
  }
  op.info.samples_us.clear();
  double total_us = 0;
  uint32_t batch = std::max<uint32_t>(1, std::min(o.repeat, 64u));
  while (op.info.samples_us.size() < o.repeat || (total_us < o.min_time_s * 1e6 && op.info.samples_us.size() < o.max_repeat)) {
    auto base = static_cast<uint32_t>(op.info.samples_us.size());
    auto us = timer.time_us([&](VkCommandBuffer cmd, uint32_t rep) { op.record(cmd, base + rep); }, batch);
    for (double x : us) total_us += x;
    op.info.samples_us.insert(op.info.samples_us.end(), us.begin(), us.end());
  }
}

}  // namespace vkattn::tool
