// A benchmark case: what to record, how to check it, and what it must move.
#pragma once
#include <vkattn/context.hpp>

#include <functional>
#include <string>
#include <vector>

#include "report/bench_report.hpp"

namespace vkattn::tool {

struct Verification {
  bool pass = false;
  double max_abs_err = 0, max_rel_err = 0;
  std::string failure;
};

struct BenchOp {
  report::BenchCase info;   // name, params, bytes, flops, bound (samples filled by measure())
  // Records one repetition; `rep` selects which rotating copy of the inputs to use.
  std::function<void(VkCommandBuffer, uint32_t rep)> record;
  // Runs the op once at a size the float64 reference checks quickly.
  std::function<Verification()> verify;
};

// The machine's f16 matrix rate (TFLOP/s) and device copy rate (GB/s); 0: not measured.
struct MachineRates {
  double matrix_tflops = 0, copy_gbps = 0;
};

struct MeasureOptions {
  uint32_t repeat = 30;        // at least this many timed repetitions
  double min_time_s = 0.05;    // and at least this much GPU time in total
  uint32_t warmup = 3;           // at least this many untimed repetitions
  double warmup_time_s = 0.1;    // and this much GPU time, until two batches agree within 2%
  double max_warmup_time_s = 3;  // but never longer than this
  uint32_t max_repeat = 5000;
  // Runs after verification and before warm-up (vkattn bench: spin_up, see ceilings.hpp).
  std::function<void()> before_timing;
  // Runs after the timing (vkattn bench: the f16 matrix-peak kernel and the
  // device copy, a few milliseconds each) and returns the machine's rates
  // now; `machine_ceiling` holds the rates the run's ceilings measured. A case
  // after which either reads under 90% of its ceiling is timed again (once):
  // its figure may have been taken on a slow machine (a low SM or memory
  // clock), not of a slow kernel. The readings go into the case's params
  // ("matrix_rate_after", "copy_rate_after"), and "machine_slow" says when the
  // retime's reading was slow too.
  std::function<MachineRates()> machine_check;
  MachineRates machine_ceiling;
};

// Verifies the op (a failed check throws: a benchmark of a wrong kernel is an
// error, not a number), warms up, then times repetitions into info.samples_us.
void measure(Context& ctx, BenchOp& op, const MeasureOptions& options);

// Whether timed samples (in the order taken) are steady: the medians of the
// first and last quarters within 3%. Fewer than 8 samples count as steady.
bool steady_samples(const std::vector<double>& samples);

// Inputs smaller than this are rotated among copies so that repetitions are not
// served from the last-level cache (an H200 has 60 MB of L2).
inline constexpr uint64_t kRotateBytes = 256ull << 20;
// How many copies of `bytes` of input make repetitions cache-cold.
uint32_t rotation_copies(uint64_t bytes);

}  // namespace vkattn::tool
