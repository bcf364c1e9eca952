// `vkattn bench ceilings`: the device's copy bandwidth and matrix rate, which
// every other suite measures in the same run and reports fractions of.
#pragma once
#include <vkattn/context.hpp>

#include <vector>

#include "bench/bench_op.hpp"

namespace vkattn::tool {

// The copy case, the matrix-peak cases (f16, and bf16 on a matrix path of a
// device with bf16 cooperative matrices), and the fixed cost of one dispatch
// and of two dependent ones.
std::vector<BenchOp> ceiling_ops(Context& ctx, bool quick);
// Runs the matrix-peak kernel for about 0.3 s, untimed. Seen on an H200: after
// a few seconds of host-side setup, memory-bound kernels ran at 41% of their
// speed, with the SM clock at its maximum, until compute-heavy work ran; plain
// warm-up with the memory-bound kernel itself did not end that state.
void spin_up(Context& ctx, bool quick);
// Takes a measured case of ceiling_ops into the figures other suites compare with.
void absorb_ceiling(report::Ceilings& ceilings, const report::BenchCase& c);

}  // namespace vkattn::tool
