#include "vkattn_ref/attention_ref.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace vkattn::ref {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("paged_attention: " + what); }

std::string num(int64_t v) { return std::to_string(v); }

bool is_fp8(ElemType t) { return t == ElemType::fp8_e4m3 || t == ElemType::fp8_e5m2; }

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One stored cache element, decoded exactly.
double load(ElemType t, const std::vector<uint8_t>& bytes, uint64_t elem) {
  const std::size_t es = elem_size(t);
  if (t == ElemType::f32) {
    float f;
    std::memcpy(&f, &bytes[elem * 4], 4);
    return f;
  }
  uint32_t bits = 0;
  std::memcpy(&bits, &bytes[elem * es], es);   // little-endian: the low bytes
  return decode(format_of(t), bits);
}

// Computes partial softmax sums for one (token, q head) row over the row's
// visible keys inside [key_begin, key_end).
class RowEvaluator {
 public:
  explicit RowEvaluator(const PagedAttentionProblem& p)
      : p_(p),
        group_(p.num_q_heads / p.num_kv_heads),
        ks_(is_fp8(p.cache.dtype) ? p.k_scale : 1.0),
        vs_(is_fp8(p.cache.dtype) ? p.v_scale : 1.0) {}

  // seq: sequence index; i: token index within the sequence's new tokens.
  // acc must hold head_size doubles; it is overwritten.
  void row(uint32_t seq, int64_t i, uint32_t h, int64_t key_begin, int64_t key_end, bool with_sink, double* acc,
           double& max_out, double& sum_out) {
    const uint32_t D = p_.head_size;
    const int64_t q_begin = p_.query_start_loc[seq];
    const int64_t q_len = p_.query_start_loc[seq + 1] - q_begin;
    const int64_t seq_len = p_.seq_lens[seq];
    const int64_t ctx = seq_len - q_len;
    const int64_t q_pos = ctx + i;
    const uint32_t kvh = h / group_;
    const double* q = &p_.q[((uint64_t(q_begin + i)) * p_.num_q_heads + h) * D];

    int64_t lo = std::max<int64_t>(key_begin, 0);
    int64_t hi = std::min<int64_t>({key_end, q_pos + 1, seq_len});
    if (p_.sliding_window > 0) lo = std::max<int64_t>(lo, q_pos - p_.sliding_window + 1);

    keys_.clear();
    logits_.clear();
    double mx = -kInf;
    if (with_sink && !p_.sinks.empty()) mx = p_.sinks[h];
    for (int64_t k = lo; k < hi; ++k) {
      double dot = 0;
      for (uint32_t d = 0; d < D; ++d) dot += q[d] * key(false, seq, q_begin, ctx, k, kvh, d);
      double s = p_.scale * dot;
      if (p_.softcap > 0) s = p_.softcap * std::tanh(s / p_.softcap);
      if (!p_.alibi_slopes.empty()) s += p_.alibi_slopes[h] * double(k - ctx);
      if (!p_.qq_bias.empty()) {
        const int64_t j = k - ctx;   // key index among the new tokens
        if (j >= 0 && j < int64_t(p_.qq_bias_stride)) s += p_.qq_bias[uint64_t(i) * p_.qq_bias_stride + j];
      }
      if (s == -kInf) continue;   // masked by a -inf bias: no weight
      keys_.push_back(k);
      logits_.push_back(s);
      if (!(s <= mx)) mx = s;     // NaN propagates
    }

    std::fill(acc, acc + D, 0.0);
    if (mx == -kInf) {            // nothing visible, no sink
      max_out = -kInf;
      sum_out = 0;
      return;
    }
    double sum = (with_sink && !p_.sinks.empty() && p_.sinks[h] != -kInf) ? std::exp(p_.sinks[h] - mx) : 0.0;
    for (std::size_t n = 0; n < keys_.size(); ++n) {
      const int64_t k = keys_[n];
      const double w = std::exp(logits_[n] - mx);
      sum += w;
      for (uint32_t d = 0; d < D; ++d) acc[d] += w * key(true, seq, q_begin, ctx, k, kvh, d);
    }
    max_out = mx;
    sum_out = sum;
  }

 private:
  // Element d of key k_pos's K (or V) for kv head kvh: from the cache, or a
  // new token's (prefix prefill) at and after ctx.
  double key(bool is_value, uint32_t seq, int64_t q_begin, int64_t ctx, int64_t k, uint32_t kvh, uint32_t d) const {
    if (!p_.new_k.empty() && k >= ctx) {
      const uint64_t at = (uint64_t(q_begin + k - ctx) * p_.num_kv_heads + kvh) * p_.head_size + d;
      return is_value ? p_.new_v[at] : p_.new_k[at];
    }
    const int32_t block = p_.block_table[uint64_t(seq) * p_.max_blocks_per_seq + k / p_.cache.block_size];
    const uint32_t slot = static_cast<uint32_t>(k % p_.cache.block_size);
    const uint64_t e = kv_element_index(p_.cache, is_value, block, slot, kvh, d);
    return is_value ? load(p_.cache.dtype, p_.v_cache, e) * vs_ : load(p_.cache.dtype, p_.k_cache, e) * ks_;
  }

  const PagedAttentionProblem& p_;
  uint32_t group_;
  double ks_, vs_;
  std::vector<int64_t> keys_;
  std::vector<double> logits_;
};

}  // namespace

void validate(const PagedAttentionProblem& p) {
  if (p.num_q_heads == 0 || p.num_kv_heads == 0 || p.head_size == 0)
    fail("num_q_heads, num_kv_heads and head_size must be positive (got " + num(p.num_q_heads) + ", " +
         num(p.num_kv_heads) + ", " + num(p.head_size) + ")");
  if (p.num_q_heads % p.num_kv_heads != 0)
    fail("num_q_heads (" + num(p.num_q_heads) + ") is not a multiple of num_kv_heads (" + num(p.num_kv_heads) + ")");
  const uint64_t q_elems = uint64_t(p.num_tokens) * p.num_q_heads * p.head_size;
  if (p.q.size() != q_elems)
    fail("q has " + num(int64_t(p.q.size())) + " values, expected num_tokens * num_q_heads * head_size = " +
         num(int64_t(q_elems)));

  const KvGeometry& g = p.cache;
  if (g.num_kv_heads != p.num_kv_heads || g.head_size != p.head_size)
    fail("cache geometry has " + num(g.num_kv_heads) + " kv heads of size " + num(g.head_size) + ", the problem " +
         num(p.num_kv_heads) + " of size " + num(p.head_size));
  if (g.block_size == 0) fail("cache block_size is 0");
  if (g.layout == KvLayoutRef::split) {
    const uint32_t x = 16 / uint32_t(elem_size(g.dtype));
    if (p.head_size % x != 0)
      fail("split layout needs head_size (" + num(p.head_size) + ") to be a multiple of x = " + num(x));
  }
  const uint64_t cache_bytes = uint64_t(g.num_blocks) * g.block_elems() * elem_size(g.dtype);
  if (p.k_cache.size() != cache_bytes || p.v_cache.size() != cache_bytes)
    fail("k_cache/v_cache hold " + num(int64_t(p.k_cache.size())) + "/" + num(int64_t(p.v_cache.size())) +
         " bytes, the geometry needs " + num(int64_t(cache_bytes)));

  const std::size_t num_seqs = p.seq_lens.size();
  if (p.query_start_loc.size() != num_seqs + 1)
    fail("query_start_loc has " + num(int64_t(p.query_start_loc.size())) + " entries, expected num_seqs + 1 = " +
         num(int64_t(num_seqs + 1)));
  if (p.query_start_loc[0] != 0) fail("query_start_loc[0] is " + num(p.query_start_loc[0]) + ", expected 0");
  if (p.query_start_loc[num_seqs] != int64_t(p.num_tokens))
    fail("query_start_loc ends at " + num(p.query_start_loc[num_seqs]) + ", expected num_tokens = " + num(p.num_tokens));
  if (p.block_table.size() != uint64_t(num_seqs) * p.max_blocks_per_seq)
    fail("block_table has " + num(int64_t(p.block_table.size())) + " entries, expected num_seqs * max_blocks_per_seq = " +
         num(int64_t(uint64_t(num_seqs) * p.max_blocks_per_seq)));
  int64_t max_query_len = 0;
  for (std::size_t s = 0; s < num_seqs; ++s) {
    const int64_t q_len = int64_t(p.query_start_loc[s + 1]) - p.query_start_loc[s];
    const int64_t seq_len = p.seq_lens[s];
    const std::string who = "sequence " + num(int64_t(s)) + ": ";
    if (q_len < 0) fail(who + "query_start_loc decreases");
    if (seq_len < 0) fail(who + "seq_len " + num(seq_len) + " is negative");
    if (seq_len != 0 && seq_len < q_len)
      fail(who + "seq_len " + num(seq_len) + " is shorter than its query_len " + num(q_len) +
           " (the new tokens must already be in the cache; seq_len 0 marks a padding sequence)");
    max_query_len = std::max(max_query_len, q_len);
    const int64_t cached = !p.new_k.empty() && seq_len > 0 ? seq_len - q_len : seq_len;   // prefix prefill: the context
    const int64_t blocks = cdiv(cached, g.block_size);
    if (blocks > int64_t(p.max_blocks_per_seq))
      fail(who + "seq_len " + num(seq_len) + " needs " + num(blocks) + " blocks, max_blocks_per_seq is " +
           num(p.max_blocks_per_seq));
    for (int64_t b = 0; b < blocks; ++b) {
      const int32_t phys = p.block_table[s * p.max_blocks_per_seq + b];
      if (phys < 0 || uint32_t(phys) >= g.num_blocks)
        fail(who + "block_table[" + num(b) + "] = " + num(phys) + " is outside the cache's " + num(g.num_blocks) +
             " blocks");
    }
  }

  const uint64_t new_elems = uint64_t(p.num_tokens) * p.num_kv_heads * p.head_size;
  if ((!p.new_k.empty() || !p.new_v.empty()) && (p.new_k.size() != new_elems || p.new_v.size() != new_elems))
    fail("new_k/new_v hold " + num(int64_t(p.new_k.size())) + "/" + num(int64_t(p.new_v.size())) +
         " values, expected num_tokens * num_kv_heads * head_size = " + num(int64_t(new_elems)) + " each (or none)");
  if (!std::isfinite(p.scale)) fail("scale is not finite");
  if (is_fp8(g.dtype) && (!std::isfinite(p.k_scale) || !std::isfinite(p.v_scale)))
    fail("k_scale/v_scale are not finite");
  if (p.sliding_window < 0) fail("sliding_window " + num(p.sliding_window) + " is negative (0 = none)");
  if (!std::isfinite(p.softcap) || p.softcap < 0) fail("softcap must be finite and >= 0 (0 = none)");
  if (!p.alibi_slopes.empty()) {
    if (p.alibi_slopes.size() != p.num_q_heads)
      fail("alibi_slopes has " + num(int64_t(p.alibi_slopes.size())) + " entries, expected num_q_heads = " +
           num(p.num_q_heads) + " (or none)");
    for (double a : p.alibi_slopes)
      if (!std::isfinite(a)) fail("alibi_slopes holds a non-finite value");
  }
  if (!p.sinks.empty()) {
    if (p.sinks.size() != p.num_q_heads)
      fail("sinks has " + num(int64_t(p.sinks.size())) + " entries, expected num_q_heads = " + num(p.num_q_heads) +
           " (or none)");
    for (double s : p.sinks)
      if (std::isnan(s) || s == kInf) fail("sinks holds NaN or +inf");
  }
  if (!p.qq_bias.empty()) {
    if (p.qq_bias_stride == 0) fail("qq_bias is given but qq_bias_stride is 0");
    if (p.qq_bias.size() % p.qq_bias_stride != 0)
      fail("qq_bias has " + num(int64_t(p.qq_bias.size())) + " values, not whole rows of qq_bias_stride = " +
           num(p.qq_bias_stride));
    const int64_t rows = int64_t(p.qq_bias.size() / p.qq_bias_stride);
    if (rows < max_query_len)
      fail("qq_bias has " + num(rows) + " rows, the longest query_len is " + num(max_query_len));
    for (double b : p.qq_bias)
      if (std::isnan(b) || b == kInf) fail("qq_bias holds NaN or +inf");
  }
}

// Runs rows(first_token, end_token) over the problem's tokens, split among
// threads where the work is large (a `vkattn run` of 64 sequences of 4096
// keys at 64 heads took over a minute on one core). Each token's rows are
// computed by one thread, in the same order, so the result does not depend on
// the split; small problems (about half a second's work or less) stay on the
// calling thread.
namespace {
template <class Rows>
void for_token_ranges(const PagedAttentionProblem& p, Rows rows) {
  double work = 0;   // key-dims of dot products, about
  for (uint32_t s = 0; s < p.seq_lens.size(); ++s)
    work += double(p.query_start_loc[s + 1] - p.query_start_loc[s]) * double(std::max<int64_t>(p.seq_lens[s], 0));
  work *= double(p.num_q_heads) * p.head_size;
  const uint32_t cores = std::max(1u, std::thread::hardware_concurrency());
  const uint32_t n = work < 5e7 ? 1u : std::min({cores, 64u, std::max(1u, p.num_tokens)});
  if (n == 1) {
    rows(0u, p.num_tokens);
    return;
  }
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(n);
  for (uint32_t t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      try {
        rows(uint32_t(uint64_t(p.num_tokens) * t / n), uint32_t(uint64_t(p.num_tokens) * (t + 1) / n));
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  for (auto& th : threads) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

PagedAttentionResult paged_attention(const PagedAttentionProblem& p) {
  validate(p);
  const uint32_t H = p.num_q_heads, D = p.head_size;
  PagedAttentionResult r;
  r.out.assign(uint64_t(p.num_tokens) * H * D, 0.0);
  r.lse.assign(uint64_t(p.num_tokens) * H, -kInf);
  for_token_ranges(p, [&](uint32_t first, uint32_t end) {
    RowEvaluator eval(p);
    // The sequence of token `first` (query_start_loc is non-decreasing).
    uint32_t s = uint32_t(std::upper_bound(p.query_start_loc.begin(), p.query_start_loc.end(), int64_t(first)) -
                          p.query_start_loc.begin()) - 1;
    for (uint32_t t = first; t < end; ++t) {
      while (int64_t(t) >= p.query_start_loc[s + 1]) ++s;
      const int64_t i = int64_t(t) - p.query_start_loc[s];
      for (uint32_t h = 0; h < H; ++h) {
        const uint64_t row = uint64_t(t) * H + h;
        double* out = &r.out[row * D];
        double mx, sum;
        eval.row(s, i, h, 0, p.seq_lens[s], true, out, mx, sum);
        if (sum > 0) {
          for (uint32_t d = 0; d < D; ++d) out[d] /= sum;
          r.lse[row] = mx + std::log(sum);
        } else if (std::isnan(sum)) {
          for (uint32_t d = 0; d < D; ++d) out[d] = sum;
          r.lse[row] = sum;
        }   // else: no key, no sink: out stays 0, lse -inf
      }
    }
  });
  return r;
}

KeyRange segment_key_range(int64_t seq_len, uint32_t num_segments, uint32_t tile_size, uint32_t segment) {
  if (num_segments == 0 || tile_size == 0) fail("segments: num_segments and tile_size must be positive");
  if (seq_len <= 0) return {0, 0};
  const int64_t per = cdiv(seq_len, int64_t(num_segments) * tile_size) * tile_size;   // keys per segment
  return {std::min(seq_len, int64_t(segment) * per), std::min(seq_len, (int64_t(segment) + 1) * per)};
}

std::vector<SegmentPartials> paged_attention_segments(const PagedAttentionProblem& p, uint32_t num_segments,
                                                      uint32_t tile_size) {
  validate(p);
  if (num_segments == 0 || tile_size == 0) fail("segments: num_segments and tile_size must be positive");
  const uint32_t H = p.num_q_heads, D = p.head_size;
  std::vector<SegmentPartials> segs(num_segments);
  for (auto& sp : segs) {
    sp.num_tokens = p.num_tokens;
    sp.num_q_heads = H;
    sp.head_size = D;
    sp.acc.assign(uint64_t(p.num_tokens) * H * D, 0.0);
    sp.max.assign(uint64_t(p.num_tokens) * H, -kInf);
    sp.sum.assign(uint64_t(p.num_tokens) * H, 0.0);
  }
  RowEvaluator eval(p);
  for (uint32_t s = 0; s < p.seq_lens.size(); ++s) {
    const int64_t q_begin = p.query_start_loc[s], q_len = p.query_start_loc[s + 1] - q_begin;
    for (uint32_t j = 0; j < num_segments; ++j) {
      const KeyRange kr = segment_key_range(p.seq_lens[s], num_segments, tile_size, j);
      SegmentPartials& sp = segs[j];
      for (int64_t i = 0; i < q_len; ++i)
        for (uint32_t h = 0; h < H; ++h) {
          const uint64_t row = uint64_t(q_begin + i) * H + h;
          eval.row(s, i, h, kr.begin, kr.end, j == 0, &sp.acc[row * D], sp.max[row], sp.sum[row]);
        }
    }
  }
  return segs;
}

PagedAttentionResult combine_segments(const std::vector<SegmentPartials>& segments) {
  PagedAttentionResult r;
  if (segments.empty()) return r;
  const SegmentPartials& first = segments[0];
  const uint64_t rows = uint64_t(first.num_tokens) * first.num_q_heads;
  const uint32_t D = first.head_size;
  for (const auto& sp : segments)
    if (sp.num_tokens != first.num_tokens || sp.num_q_heads != first.num_q_heads || sp.head_size != D ||
        sp.acc.size() != rows * D || sp.max.size() != rows || sp.sum.size() != rows)
      fail("combine_segments: segments differ in shape");
  r.out.assign(rows * D, 0.0);
  r.lse.assign(rows, -kInf);
  for (uint64_t row = 0; row < rows; ++row) {
    double mx = -kInf;
    for (const auto& sp : segments)
      if (sp.sum[row] != 0 && !(sp.max[row] <= mx)) mx = sp.max[row];
    if (mx == -kInf) continue;
    double sum = 0;
    double* out = &r.out[row * D];
    for (const auto& sp : segments) {
      if (sp.sum[row] == 0) continue;
      const double f = std::exp(sp.max[row] - mx);
      sum += sp.sum[row] * f;
      for (uint32_t d = 0; d < D; ++d) out[d] += sp.acc[row * D + d] * f;
    }
    for (uint32_t d = 0; d < D; ++d) out[d] /= sum;
    r.lse[row] = mx + std::log(sum);
  }
  return r;
}

}  // namespace vkattn::ref
