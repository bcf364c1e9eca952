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
// Measures ceiling_ops and turns them into the figures other suites compare with.
report::Ceilings measure_ceilings(Context& ctx, const MeasureOptions& options, std::vector<report::BenchCase>* cases);

}  // namespace vkattn::tool
