// The named sweeps of `vkattn bench SUITE`.
#pragma once
#include <vkattn/context.hpp>
#include <vkattn/dtype.hpp>
#include <vkattn/kv_cache.hpp>
#include <vkattn/paged_attention.hpp>

#include <functional>
#include <map>
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
std::vector<BenchOp> sparse_cases(Context& ctx, bool quick);   // suite_sparse.cpp
std::vector<BenchOp> gather_cases(Context& ctx, bool quick);   // suite_gather.cpp

struct AttentionShape;

// `vkattn bench decode`'s and `prefill`'s flags: the cache and q the sweep runs with.
struct DecodeOptions {
  DType dtype = DType::f16;         // q and out: f16 or bf16
  DType cache_dtype = DType::f16;   // f16, bf16, fp8_e4m3 or fp8_e5m2
  uint32_t block_size = 16;
  KvLayout layout = KvLayout::nhd;
  PrefillKernel prefill = PrefillKernel::automatic;
  uint32_t segments = 0;   // 0: the plan's split; 1: SplitKv::off; N: SplitKv::on with N segments (schedule experiments)
  uint32_t head_size = 0;  // every case at this head size (0: each case's own)
  // Every case's q and kv heads (0: the suite's own, 32 and 8), e.g. 64/8
  // for GQA 8; and for `bench decode`, each decoding sequence's new tokens
  // (2 or more: speculative decoding's verification rows).
  uint32_t q_heads = 0, kv_heads = 0;
  uint32_t query_len = 1;
  // `bench decode`'s grid (empty: the sweep below, or --quick's small one).
  static constexpr uint32_t kSweepBatches[] = {1, 16, 64, 256};
  static constexpr uint32_t kSweepContexts[] = {512, 4096, 32768};
  std::vector<uint32_t> batches, contexts;
  // `heads` (the suite's own) with these heads, dtypes, layout and kernel choice.
  AttentionShape shape(AttentionShape heads) const;
  // What the case names add: how the run differs from the default sweep
  // (f16 q and cache, NHD, block 16, the automatic kernel), e.g. " (bf16 q, block 32)".
  std::string name_suffix() const;
};
std::vector<BenchOp> decode_cases(Context& ctx, bool quick, const DecodeOptions& o);   // suite_decode.cpp
std::vector<BenchOp> prefill_cases(Context& ctx, bool quick, const DecodeOptions& o);  // suite_prefill.cpp

// One paged_attention case of the decode and prefill suites (suite_decode.cpp):
// sequences of (query_len, seq_len) with this shape, rotated over copies of
// the cache, verified against the float64 reference on `verify_seqs` (a
// smaller proxy of the same shape). `bound`: "memory" or "compute". Returns
// false (and says why on stderr) when the case does not fit the device.
using SeqList = std::vector<std::pair<uint32_t, uint32_t>>;
struct AttentionShape {
  uint32_t q_heads, kv_heads, head_size, block_size;
  DType dtype = DType::f16;     // the cache's
  KvLayout layout = KvLayout::nhd;
  DType q_dtype = DType::f16;   // q's and out's
  PrefillKernel prefill = PrefillKernel::automatic;
  uint32_t segments = 0;        // DecodeOptions::segments
  // prefix_prefill: each sequence's last query_len tokens are new, their K/V
  // in tensors of q's dtype rather than in the cache.
  bool prefix_prefill = false;
  // The prefill suite's cases: one that automatic routing keeps on the
  // decode kernel (every case off coopmat2; short chunks on it) says so in
  // its name, so that its figure is not read as the prefill kernel's.
  bool says_decode_kernel = false;
};
bool attention_case(Context& ctx, std::vector<BenchOp>& ops, const std::string& name, const SeqList& seqs,
                    const AttentionShape& sh, const SeqList& verify_seqs, std::map<std::string, std::string> params,
                    const char* bound);

}  // namespace vkattn::tool
