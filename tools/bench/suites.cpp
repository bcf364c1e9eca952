#include "bench/suites.hpp"

#include "bench/ceilings.hpp"

namespace vkattn::tool {


const std::vector<Suite>& suites() {
  static const std::vector<Suite> all = {
      {"ceilings", "copy bandwidth and the f16 (and bf16) matrix rate of the best path", "GB/s",
       [](Context& ctx, bool quick) { return ceiling_ops(ctx, quick); }},
      {"gather", "random 32 KiB blocks read from 1..64 GiB: allocation sizes, dedicated allocations, chunk table / precomputed addresses / bound buffers", "GB/s",
       gather_cases},
      {"write-kv-cache", "write_kv_cache: 256..32768 tokens x 8 heads x 128, f16 and fp8 caches", "GB/s",
       write_kv_cache_cases},
      {"decode", "paged attention decode: B 1..256 x ctx 512..32768, 32/8 heads x 128, f16 NHD cache of block 16 unless flags say otherwise; one varlen batch",
       "GB/s", [](Context& ctx, bool quick) { return decode_cases(ctx, quick, DecodeOptions{}); }},
      {"prefill", "paged attention prefill and chunked prefill: causal 8k and 2k, 4 chunks over 4k, 8 chunks beside 64 decode rows, chunks of 128/32/8 over 2k, one chunk of 300 over 700 and of 140 over 2000; prefix_prefill (new K/V from tensors) B=4 ctx 4k q 512, ctx 0 q 8k, B=16 ctx 2k q 128; 32/8 heads x 128 (and one case each of 64 and 256), f16 NHD block 16 unless flags say otherwise",
       "TFLOP/s", [](Context& ctx, bool quick) { return prefill_cases(ctx, quick, DecodeOptions{}); }},
      {"sparse", "block-sparse attention (FlexAttention's contract): B=4 H=32 S=8192 x 128 f16, masks causal, sliding window 1024, 8 documents, prefix-LM 2048, random 25% of blocks, dense",
       "TFLOP/s", sparse_cases},
      {"serve", "a 32-layer serving loop (write_kv_cache + paged_attention per layer), planned and replayed: host and GPU per step",
       "GB/s", nullptr},
  };
  return all;
}

const Suite* find_suite(const std::string& name) {
  for (const auto& s : suites())
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace vkattn::tool
