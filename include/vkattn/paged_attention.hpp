// Paged attention over a PagedKvCache, as vLLM's unified_attention: decode,
// chunked prefill and mixed batches, with split-KV ("segmented") decoding for
// long contexts.
//
// Like FlashInfer, work is planned once per batch and run as often as needed:
// the plan checks the batch on the host (every block-table entry, every
// sequence length), uploads its metadata, lists the tiles that have work and
// decides whether to split the KV range; running it records the dispatches.
//
// Semantics: sequence s has query_len = query_start_loc[s+1] - query_start_loc[s]
// new tokens (already written to the cache) and seq_len context + new tokens.
// Its token i sits at absolute position ctx + i, ctx = seq_len - query_len,
// and attends to cache positions k <= ctx + i (causal). Then, per query head h
// (kv head h / (num_q_heads / num_kv_heads)):
//   logit = scale * q.k; softcap: c * tanh(logit / c); window W: keep only
//   q_pos - k_pos < W; ALiBi: + slope[h] * (k_pos - ctx); qq_bias: +
//   bias[i, k_pos - ctx] for keys among the new tokens; sinks: one extra logit
//   sink[h] in the softmax denominator. A row that sees no key (a sequence of
//   length 0, or every key masked) gives 0, never NaN.
#pragma once
#include <vkattn/buffer.hpp>
#include <vkattn/capabilities.hpp>
#include <vkattn/dtype.hpp>
#include <vkattn/kv_cache.hpp>
#include <vkattn/tensor.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace vkattn {

class Context;

// The batch, described on the host.
struct PagedAttentionBatch {
  std::vector<int32_t> query_start_loc;   // [num_seqs + 1], non-decreasing, starting at 0
  std::vector<int32_t> seq_lens;          // [num_seqs]: context + new tokens; >= query_len, or 0 for a
                                          // padding sequence (its rows see no key and give 0)
  std::vector<int32_t> block_table;       // [num_seqs * max_blocks_per_seq]: physical blocks in order
  uint32_t max_blocks_per_seq = 0;
};

enum class SplitKv {
  automatic,   // split when the batch gives too few workgroups to fill the GPU
  off,
  on,          // always split (num_segments, or a chosen count)
};

struct PagedAttentionOptions {
  float scale = 0;                        // softmax scale, > 0 (usually 1 / sqrt(head_size))
  int32_t sliding_window = 0;             // 0: none
  float softcap = 0;                      // 0: none
  std::vector<float> alibi_slopes;        // [num_q_heads] or empty
  std::vector<float> sinks;               // [num_q_heads] or empty
  std::vector<float> qq_bias;             // [rows, qq_bias_stride] or empty
  uint32_t qq_bias_stride = 0;
  SplitKv split = SplitKv::automatic;
  uint32_t num_segments = 0;              // with SplitKv::on; 0 = chosen from the batch
  float out_scale = 1.0f;                 // fp8 output: stored = out / out_scale (saturating)
};

namespace detail { struct PagedAttentionPlanData; }

class PagedAttentionPlan {
 public:
  // Checks everything it can on the host and throws vkattn::Error naming the
  // field: shapes, q heads divisible by kv heads, head_size of the cache, every
  // block-table entry < num_blocks for the blocks a sequence uses, seq_len
  // within the table, query_len <= seq_len (unless seq_len is 0), option sizes
  // (qq_bias needs a row per token of the longest query).
  PagedAttentionPlan(Context& ctx, const PagedKvCache& cache, uint32_t num_q_heads, DType q_dtype,
                     const PagedAttentionBatch& batch, const PagedAttentionOptions& options);
  ~PagedAttentionPlan();
  PagedAttentionPlan(PagedAttentionPlan&&) noexcept;
  PagedAttentionPlan& operator=(PagedAttentionPlan&&) noexcept;

  uint32_t num_tokens() const;
  uint32_t num_seqs() const;
  uint32_t num_q_heads() const;
  uint32_t head_size() const;
  bool split() const;             // whether the KV range is split into segments
  uint32_t num_segments() const;  // 1 when not split
  uint32_t num_work_items() const;
  uint32_t workgroup_size() const;  // invocations per workgroup of the attention kernel
  Path path() const;              // the kernel path it runs on (bf16 inputs run the scalar one)
  const detail::PagedAttentionPlanData& data() const { return *data_; }

 private:
  std::unique_ptr<detail::PagedAttentionPlanData> data_;
};

// q: [num_tokens, num_q_heads, head_size] f16 or bf16 (last dim contiguous).
// out: same shape, f16, bf16, f32, fp8_e4m3 or fp8_e5m2.
// lse: optional [num_tokens, num_q_heads] f32, natural-log sum of exponentials
// of the logits (sink included); -inf for a row that sees no key and has no sink.
void paged_attention(Context& ctx, const PagedAttentionPlan& plan, const PagedKvCache& cache, const TensorView& q,
                     const TensorView& out, const std::optional<TensorView>& lse, VkCommandBuffer cmd);
void paged_attention(Context& ctx, const PagedAttentionPlan& plan, const PagedKvCache& cache, const TensorView& q,
                     const TensorView& out, const std::optional<TensorView>& lse = std::nullopt);

}  // namespace vkattn
