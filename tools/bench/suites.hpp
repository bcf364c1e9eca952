// The named sweeps of `vkattn bench SUITE`.
#pragma once
#include <vkattn/context.hpp>
#include <vkattn/dtype.hpp>
#include <vkattn/kv_cache.hpp>

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

// `vkattn bench decode`'s flags: the cache and q the sweep runs with.
struct DecodeOptions {
  DType dtype = DType::f16;         // q and out: f16 or bf16
  DType cache_dtype = DType::f16;   // f16, bf16, fp8_e4m3 or fp8_e5m2
  uint32_t block_size = 16;
  KvLayout layout = KvLayout::nhd;
};
std::vector<BenchOp> decode_cases(Context& ctx, bool quick, const DecodeOptions& o);   // suite_decode.cpp

}  // namespace vkattn::tool
