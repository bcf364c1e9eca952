// `vkattn bench serve`: the serving loop as a benchmark (serve_bench.cpp).
#pragma once
#include <vkattn/context.hpp>

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "report/bench_report.hpp"

namespace vkattn::tool {

struct ServeOptions {
  bool quick = false;                   // small heads and few layers (CPU devices, smoke tests)
  bool host_only = false;               // plan and record only: nothing is submitted
  uint32_t layers = 32, context = 4096, prefill_chunk = 256;
  std::vector<int64_t> batches = {1, 16, 64, 256};
  uint32_t warmup_steps = 3, steps = 20;
  std::string filter;                   // cases whose name matches
  std::function<void()> before_timing;  // GPU spin-up (bench/ceilings.hpp)
};

// Every case: planned and replay modes x batches x {decode, decode + prefill chunk}.
std::vector<report::BenchCase> serve_cases(Context& ctx, const ServeOptions& options);
// The serving figures of each case (host, GPU, overhead, tokens/s) as a table.
void write_serve_table(std::ostream& os, const std::vector<report::BenchCase>& cases, bool host_only);

}  // namespace vkattn::tool
