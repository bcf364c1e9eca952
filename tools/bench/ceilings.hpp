// `vkattn bench ceilings`: the device's copy bandwidth and matrix rate, which
// every other suite measures in the same run and reports fractions of.
#pragma once
#include <vkattn/context.hpp>

#include <vector>

#include "bench/bench_op.hpp"

namespace vkattn::tool {

// The copy case and the matrix-peak case (f16; bf16 needs GL_EXT_bfloat16,
// which glslang 15 lacks, so its ceiling is reported as unknown).
std::vector<BenchOp> ceiling_ops(Context& ctx, bool quick);
// Runs the matrix-peak kernel for about 0.3 s, untimed. Seen on an H200: after
// a few seconds of host-side setup, memory-bound kernels ran at 41% of their
// speed, with the SM clock at its maximum, until compute-heavy work ran; plain
// warm-up with the memory-bound kernel itself did not end that state.
void spin_up(Context& ctx, bool quick);
// Measures ceiling_ops and turns them into the figures other suites compare with.
report::Ceilings measure_ceilings(Context& ctx, const MeasureOptions& options, std::vector<report::BenchCase>* cases);

}  // namespace vkattn::tool
