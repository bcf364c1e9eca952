// The named sweeps of `vkattn bench SUITE`.
#pragma once
#include <vkattn/context.hpp>

#include <functional>
#include <string>
#include <vector>

#include "bench/bench_op.hpp"

namespace vkattn::tool {

struct Suite {
  std::string name;
  std::string description;
  std::string metric;   // "GB/s" or "TFLOP/s": what the plot shows
  // The suite's cases; `quick` picks small sizes (CPU devices, tests).
  std::function<std::vector<BenchOp>(Context&, bool quick)> cases;
};

const std::vector<Suite>& suites();
const Suite* find_suite(const std::string& name);

std::vector<BenchOp> write_kv_cache_cases(Context& ctx, bool quick);

}  // namespace vkattn::tool
