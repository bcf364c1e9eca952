// `vkattn run paged-attention` and `vkattn run prefix-prefill`: a random
// varlen batch over a random paged cache (permuted blocks, shared prefixes,
// NaN in every cache slot no sequence uses), run through PagedAttentionPlan +
// paged_attention (or PrefixPrefillPlan + prefix_prefill, whose new tokens'
// K/V come from their own tensors and whose cache slots stay NaN) into
// NaN-poisoned outputs, and every output (and LSE) checked against the
// float64 reference. The batch's metadata and the layer's parameters sit in
// device buffers at unaligned offsets, as an engine's may.
#pragma once
#include <functional>
#include <vkattn/context.hpp>
#include <vkattn/kv_cache.hpp>
#include <vkattn/paged_attention.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cli/flags.hpp"
#include "runners/op_runner.hpp"

namespace vkattn::tool {

struct PagedAttentionCase {
  // One (query_len, seq_len) pair per sequence: query_len new tokens (already
  // in the cache) at the end of seq_len tokens. seq_len 0 with query_len > 0
  // is a padding sequence (its rows see no key).
  std::vector<std::pair<uint32_t, uint32_t>> seqs = {{1, 1328}, {5, 18}, {129, 463}};
  // prefix_prefill instead of paged_attention: the new tokens' K/V are
  // tensors of q's dtype (token rows kv_token_padding elements apart beyond
  // num_kv_heads * head_size), not in the cache.
  bool prefix_prefill = false;
  uint32_t kv_token_padding = 0;
  bool skip_decode = false;    // prefix_prefill: sequences of one new token stay untouched
  bool write_cache = false;    // prefix_prefill: also write the new K/V into the cache (checked slot by slot)
  uint32_t num_q_heads = 32;
  uint32_t num_kv_heads = 8;
  uint32_t head_size = 128;
  uint32_t block_size = 16;
  // Blocks in the cache: 0 = just enough (plus a few spare, poisoned ones);
  // otherwise this many, with the used blocks at the highest indices.
  uint32_t num_blocks = 0;
  DType cache_dtype = DType::f16;
  KvLayout layout = KvLayout::nhd;
  DType q_dtype = DType::f16;
  DType out_dtype = DType::f16;
  float k_scale = 0.05f;        // fp8 caches only (stored = value / scale)
  float v_scale = 0.03f;
  float out_scale = 1.0f;       // fp8 output only (stored = out / out_scale)
  float scale = 0;              // 0 = 1 / sqrt(head_size)
  int32_t sliding_window = 0;   // 0 = none
  float softcap = 0;            // 0 = none
  bool alibi = false;           // random slopes in [2^-8, 2^-2]
  bool sinks = false;           // random sinks in [-2, 6]
  bool qq_bias = false;         // random [max_query_len, max_query_len] in [-1, 1]
  std::vector<uint32_t> qq_bias_masked_rows;   // with qq_bias: these rows are all -inf
  bool with_lse = false;
  SplitKv split = SplitKv::automatic;
  uint32_t num_segments = 0;
  PrefillKernel prefill = PrefillKernel::automatic;
  // Plan for limits rather than this batch (PagedAttentionLimits), with this
  // many spare tokens past the batch (their out rows must stay untouched).
  bool replay = false;
  uint32_t spare_tokens = 0;
  bool shared_prefixes = true;    // later sequences may start with an earlier one's full blocks
  uint32_t table_slack = 2;       // block-table entries past the longest sequence's blocks
  bool junk_table_tail = true;    // unused table entries hold out-of-range junk (never read)
  uint32_t q_token_padding = 0;   // elements between q token rows (a strided view)
  uint32_t out_token_padding = 0; // elements between out token rows (never written)
  double q_amplitude = 2.0;       // q, K uniform in [-a, a]: logits of spread ~1.3 at scale 1/sqrt(D)
  double k_amplitude = 2.0;
  double v_amplitude = 1.0;
  uint64_t seed = 1;
  // Runs of the plan before the check, the outputs poisoned again before each:
  // the last run's must be right (a plan is reusable; split-KV reuses its scratch).
  uint32_t runs = 1;
  // The checked runs are recorded (the engine's form, not the synchronous
  // one) with a workspace of their own whose every word is random before each
  // run but the arrival counters, which are 0 (abi/paged_attention.h), or
  // with junk_counters not.
  bool garbage_workspace = false;
  bool junk_counters = false;
  // With garbage_workspace: the first run's command buffer is submitted again
  // for every later run (a replayed command buffer), the workspace as the run
  // before left it.
  bool resubmit = false;
  // With garbage_workspace: the workspace view starts this many floats into
  // its buffer (an offset the kernels' 16-byte loads must align past), and
  // the words around it, random too, must be as they were after the runs.
  uint32_t workspace_offset_words = 0;
  uint32_t timing_repetitions = 20;
  // Runs after verification, just before timing (vkattn run: spin_up, bench/ceilings.hpp).
  std::function<void()> before_timing;
};

// Registers the case's flags on `flags`; call apply() after parsing (it throws
// cli::UsageError for a malformed --seqs).
class PagedAttentionFlags {
 public:
  // prefix: `vkattn run prefix-prefill`'s flags (--skip-decode, --write-cache,
  // --kv-token-padding; no --qq-bias or --split).
  explicit PagedAttentionFlags(cli::Flags& flags, bool prefix = false);
  PagedAttentionCase apply() const;

 private:
  bool prefix_;
  std::string& seqs_;
  int64_t &q_heads_, &kv_heads_, &head_size_, &block_size_, &num_blocks_, &window_, &seed_, &reps_;
  std::string &cache_dtype_, &layout_, &q_dtype_, &out_dtype_, &prefill_;
  double &softcap_, &scale_, &k_scale_, &v_scale_, &out_scale_;
  bool &alibi_, &sinks_, &lse_;
  // paged-attention only:
  int64_t* segments_ = nullptr;
  std::string* split_ = nullptr;
  bool* qq_bias_ = nullptr;
  // prefix-prefill only:
  bool* skip_decode_ = nullptr;
  bool* write_cache_ = nullptr;
  int64_t* kv_padding_ = nullptr;
};

// Parses "1:1328,5:18,129:463" (query_len:seq_len pairs); throws cli::UsageError.
std::vector<std::pair<uint32_t, uint32_t>> parse_seqs(const std::string& text);

// What the device wrote and what the reference says, decoded to doubles
// (out [num_tokens, num_q_heads, head_size] in value units, i.e. fp8 outputs
// times out_scale; lse [num_tokens, num_q_heads], empty without with_lse).
struct PagedAttentionOutputs {
  std::vector<double> out, lse, ref_out, ref_lse;
  bool split = false;
  uint32_t num_segments = 1;
  bool merge_last = false;   // the attention kernel merged the segments (no reduce dispatch)
};

// The tolerance of a case (see the .cpp for the reasoning):
//   out:  |got - ref| <= row_atol * max|ref row| + rtol * |ref| + floor
//   fp8 out: |got - ref| / out_scale <= one ulp of the fp8 format at ref / out_scale
//         + row_atol * max|ref row| / out_scale
//   lse:  |got - ref| <= lse_atol + 2^-20 |ref|
//   rows that see no key: out exactly 0; lse -inf (or the sink).
struct PagedAttentionTolerance {
  double row_atol = 0, rtol = 0, floor = 0, lse_atol = 0;
};
PagedAttentionTolerance paged_attention_tolerance(const PagedAttentionCase& c);

RunResult run_paged_attention(Context& ctx, const PagedAttentionCase& c, PagedAttentionOutputs* outputs = nullptr);

}  // namespace vkattn::tool
