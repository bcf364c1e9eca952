// Float64 reference of paged attention with vLLM unified_attention semantics
// (seeds 001 kernel_unified_attention_3d and 003 kernel_paged_attention_2d),
// and of prefix prefill (seed 000 context_attention_fwd: new_k / new_v).
//
// Every logit, softmax weight and output is computed in double from the exact
// values the cache holds; the reference adds no rounding of its own (the
// kernels' own roundings, e.g. fp8 K/V dequantised to the query dtype or P
// cast to V's dtype before P.V, are theirs to account for in tolerances).
//
// For query token i (0 <= i < query_len_s) of sequence s:
//   ctx_s  = seq_len_s - query_len_s, q_pos = ctx_s + i
//   keys   k_pos in [0, seq_len_s) with k_pos <= q_pos (causal) and, when
//          sliding_window W > 0, q_pos - k_pos < W. Masked keys are removed
//          outright (seed 001 uses -inf; seeds 000/003 write -10000 instead,
//          which is the same unless a whole row is masked, impossible there).
//   kv head of q head h: h / (num_q_heads / num_kv_heads)
//   key k_pos of sequence s: physical block block_table[s, k_pos / block_size],
//          slot k_pos % block_size, addressed by kv_element_index.
//   K, V   as stored; fp8 caches only: times k_scale / v_scale (the seeds
//          apply the scales to fp8 loads only, as write_kv_cache divides only
//          for fp8).
//   logit  s = scale * dot(q, k)
//          s = softcap * tanh(s / softcap)            if softcap > 0
//          s += alibi_slope[h] * (k_pos - ctx_s)       if alibi_slopes given
//          s += qq_bias[i * qq_bias_stride + j]        if qq_bias given, for
//               keys among the new tokens: j = k_pos - ctx_s with
//               0 <= j < qq_bias_stride (else nothing is added).
//          This is seed 001's order: softcap acts on the scaled dot product
//          only; ALiBi and qq_bias are added after it (and after masking).
//          ALiBi note: seed 001 biases by (k_pos - ctx_s), not (k_pos - q_pos).
//          The two differ by the per-row constant slope * i, so outputs agree
//          unless a sink is present, and LSE differs by slope * i. For decode
//          (query_len 1, seed 003: k_pos - (seq_len - 1)) both are the same.
//   sink   sinks[h], when given, is one more logit in the softmax denominator
//          with no value (not scaled, not softcapped, no bias); -inf = none.
//   out    sum_k exp(s_k - lse) * v_k;  lse = log(exp(sink) + sum_k exp(s_k)).
//
// A row that sees no key (e.g. every token of a sequence with seq_len 0, a
// padding sequence as in seed 003, or keys all biased to -inf by qq_bias)
// gets output 0 and lse = sink (the seeds' M = sink, L = 1 state), or -inf
// without a sink. Never NaN.
#pragma once
#include <cstdint>
#include <vector>

#include "kv_cache_ref.hpp"

namespace vkattn::ref {

struct PagedAttentionProblem {
  // [num_tokens, num_q_heads, head_size]: values as the kernel reads them
  // (already rounded to the query dtype by the caller).
  std::vector<double> q;
  uint32_t num_tokens = 0, num_q_heads = 0, num_kv_heads = 0, head_size = 0;
  // [num_seqs + 1], starting at 0, non-decreasing, ending at num_tokens.
  std::vector<int32_t> query_start_loc;
  // [num_seqs]: context + new tokens (the new tokens are already in the
  // cache). seq_len >= query_len, or seq_len == 0 (padding: no keys at all).
  std::vector<int32_t> seq_lens;
  // [num_seqs, max_blocks_per_seq]: only the entries that cover
  // [0, seq_len) are read (and checked); the rest may hold anything.
  std::vector<int32_t> block_table;
  uint32_t max_blocks_per_seq = 0;
  KvGeometry cache;                        // num_kv_heads and head_size must match the above
  std::vector<uint8_t> k_cache, v_cache;   // whole caches as stored: num_blocks * block_elems elements each
  double k_scale = 1, v_scale = 1;         // fp8 caches: value = stored * scale; ignored otherwise
  double scale = 1;                        // softmax scale applied to q.k
  int32_t sliding_window = 0;              // 0 = none; else keep q_pos - k_pos < W
  std::vector<double> alibi_slopes;        // [num_q_heads] or empty
  double softcap = 0;                      // 0 = none; else s = c * tanh(s / c)
  std::vector<double> sinks;               // [num_q_heads] or empty (entries may be -inf)
  // [rows, qq_bias_stride] row-major or empty; rows >= the longest query_len.
  // Entries may be -inf (a mask); NaN and +inf are rejected.
  std::vector<double> qq_bias;
  uint32_t qq_bias_stride = 0;
  // Prefix prefill (seed 000): when given ([num_tokens, num_kv_heads,
  // head_size] each), the new tokens are not in the cache: key k_pos >= ctx_s
  // of sequence s is new token query_start_loc[s] + k_pos - ctx_s, with these
  // values exactly (no fp8 scale), and the block table needs to cover only
  // [0, ctx_s).
  std::vector<double> new_k, new_v;
};

struct PagedAttentionResult {
  std::vector<double> out;   // [num_tokens, num_q_heads, head_size]
  std::vector<double> lse;   // [num_tokens, num_q_heads], natural log, sink included; see above for empty rows
};

// Throws std::invalid_argument (naming the field) for inconsistent input.
PagedAttentionResult paged_attention(const PagedAttentionProblem& p);
// The checks paged_attention does, alone.
void validate(const PagedAttentionProblem& p);

// ---- Split-KV ("segmented") decomposition, for testing reductions ----------

// Unnormalised partial softmax over a subset of each row's keys.
struct SegmentPartials {
  uint32_t num_tokens = 0, num_q_heads = 0, head_size = 0;
  std::vector<double> acc;   // [num_tokens, num_q_heads, head_size]: sum_k exp(s_k - max) * v_k
  std::vector<double> max;   // [num_tokens, num_q_heads]: largest logit (sink included where it belongs); -inf if none
  std::vector<double> sum;   // [num_tokens, num_q_heads]: sum_k exp(s_k - max) (+ sink term); 0 if none
};

// Seed 001's split of a sequence's keys: tiles_per_segment =
// cdiv(seq_len, num_segments * tile_size); segment j holds cache positions
// [j * tiles_per_segment * tile_size, min((j + 1) * ..., seq_len)), which is
// empty for segments the kernel skips (it does not write them).
struct KeyRange { int64_t begin, end; };
KeyRange segment_key_range(int64_t seq_len, uint32_t num_segments, uint32_t tile_size, uint32_t segment);

// Exact partials for every segment (the sink goes to segment 0, as in seed
// 001). Rows see only their visible keys inside the segment's range; a
// segment with none of them has max -inf, sum 0, acc 0 (the kernel stores
// other placeholders there: M -inf/L 1 or M 0/L 0, all with no weight).
std::vector<SegmentPartials> paged_attention_segments(const PagedAttentionProblem& p, uint32_t num_segments,
                                                      uint32_t tile_size);
// The reduce step: rescale every segment to the overall max and normalise;
// rows with total sum 0 give output 0 and lse -inf (a lone sink gives lse =
// sink, as paged_attention does). All segments must have the same shape.
PagedAttentionResult combine_segments(const std::vector<SegmentPartials>& segments);

}  // namespace vkattn::ref
