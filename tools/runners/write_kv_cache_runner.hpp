// `vkattn run write-kv-cache`: random K/V written into a poisoned cache, then
// every byte of the cache checked against the float64 reference.
#pragma once
#include <functional>
#include <vkattn/context.hpp>
#include <vkattn/kv_cache.hpp>

#include <cstdint>
#include <string>

#include "cli/flags.hpp"
#include "runners/op_runner.hpp"

namespace vkattn::tool {

struct WriteKvCacheCase {
  uint32_t num_tokens = 37;
  uint32_t num_blocks = 64;
  uint32_t padding_tokens = 3;   // slots of -1 among the tokens
  KvCacheConfig cache{.num_blocks = 64, .block_size = 16, .num_kv_heads = 4, .head_size = 128};
  DType input_dtype = DType::f16;
  DType slot_dtype = DType::i64;
  double amplitude = 4.0;        // inputs uniform in [-amplitude, amplitude]
  uint64_t seed = 1;
  uint32_t timing_repetitions = 20;
  // Runs after verification, just before timing (vkattn run: spin_up, bench/ceilings.hpp).
  std::function<void()> before_timing;
  // Inputs as strided views: each token row padded by this many elements, and
  // the view starting this many elements into its buffer (exercises the
  // kernel's unaligned, element-wise loads).
  uint32_t row_padding = 0;
  uint32_t view_offset = 0;
};

// Registers the case's flags on `flags`; call apply() after parsing.
class WriteKvCacheFlags {
 public:
  explicit WriteKvCacheFlags(cli::Flags& flags);
  WriteKvCacheCase apply() const;

 private:
  int64_t &tokens_, &blocks_, &block_size_, &heads_, &head_size_, &padding_, &reps_;
  std::string &cache_dtype_, &input_dtype_, &slot_dtype_, &layout_;
  double &k_scale_, &v_scale_, &amplitude_;
  int64_t& seed_;
};

// Throws cli::UsageError unless the tokens that are not padding (each written
// to a slot of its own) fit the cache's slots.
void check_tokens_fit(uint64_t num_tokens, uint64_t padding_tokens, uint64_t num_slots);

RunResult run_write_kv_cache(Context& ctx, const WriteKvCacheCase& c);

}  // namespace vkattn::tool
