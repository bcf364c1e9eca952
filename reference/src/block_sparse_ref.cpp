#include "vkattn_ref/block_sparse_ref.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace vkattn::ref {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("block_sparse_attention: " + what); }

std::string num(int64_t v) { return std::to_string(v); }

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The mask's row for (b, h, q_idx).
uint64_t mask_row(const BlockMaskRef& m, uint32_t b, uint32_t h, int64_t q_idx) {
  return (uint64_t(b % m.sz) * m.sh + h % m.sh) * m.q_blocks + uint64_t(q_idx / m.q_block_size);
}

// The tensors' sizes, and with `with_mask` the block mask's.
void validate(const BlockSparseProblem& p, bool with_mask) {
  if (!p.batch || !p.q_heads || !p.kv_heads || !p.qk_head_size || !p.v_head_size)
    fail("batch, q_heads, kv_heads and the head sizes must be positive");
  if (p.kv_batch != p.batch && p.kv_batch != 1) fail("kv_batch = " + num(p.kv_batch) + ", expected batch or 1");
  if (p.q_heads % p.kv_heads) fail("q_heads = " + num(p.q_heads) + " is not a multiple of kv_heads = " + num(p.kv_heads));
  if (p.q_len < 0 || p.kv_len < 0) fail("q_len and kv_len must be >= 0");
  auto sized = [&](const std::vector<double>& t, uint64_t n, const char* name, const char* shape) {
    if (t.size() != n) fail(std::string(name) + " has " + num(int64_t(t.size())) + " values, expected " + shape + " = " + num(int64_t(n)));
  };
  sized(p.q, uint64_t(p.batch) * p.q_heads * p.q_len * p.qk_head_size, "q", "batch * q_heads * q_len * qk_head_size");
  sized(p.k, uint64_t(p.kv_batch) * p.kv_heads * p.kv_len * p.qk_head_size, "k", "kv_batch * kv_heads * kv_len * qk_head_size");
  sized(p.v, uint64_t(p.kv_batch) * p.kv_heads * p.kv_len * p.v_head_size, "v", "kv_batch * kv_heads * kv_len * v_head_size");
  if (!with_mask) return;
  const BlockMaskRef& m = p.mask;
  if (!m.sz || !m.sh || !m.q_block_size || !m.kv_block_size) fail("the mask's sz, sh and block sizes must be positive");
  if (m.q_blocks < cdiv(p.q_len, m.q_block_size))
    fail("the mask has " + num(m.q_blocks) + " q blocks, q_len " + num(p.q_len) + " needs " + num(cdiv(p.q_len, m.q_block_size)));
  const uint64_t rows = uint64_t(m.sz) * m.sh * m.q_blocks;
  const bool full = !m.full_kv_num_blocks.empty() || !m.full_kv_indices.empty();
  for (int part = 0; part < (full ? 2 : 1); ++part) {
    const auto& counts = part ? m.full_kv_num_blocks : m.kv_num_blocks;
    const auto& idx = part ? m.full_kv_indices : m.kv_indices;
    const std::string name = part ? "full_kv_" : "kv_";
    if (counts.size() != rows) fail(name + "num_blocks has " + num(int64_t(counts.size())) + " entries, expected sz * sh * q_blocks = " + num(int64_t(rows)));
    if (idx.size() != rows * m.kv_blocks)
      fail(name + "indices has " + num(int64_t(idx.size())) + " entries, expected sz * sh * q_blocks * kv_blocks = " + num(int64_t(rows * m.kv_blocks)));
    for (uint64_t r = 0; r < rows; ++r) {
      if (counts[r] < 0 || uint32_t(counts[r]) > m.kv_blocks)
        fail(name + "num_blocks[" + num(int64_t(r)) + "] = " + num(counts[r]) + ", expected 0 to kv_blocks = " + num(m.kv_blocks));
      for (int32_t i = 0; i < counts[r]; ++i) {
        const int32_t blk = idx[r * m.kv_blocks + i];
        if (blk < 0 || int64_t(blk) * m.kv_block_size >= std::max<int64_t>(p.kv_len, 1) || uint32_t(blk) >= m.kv_blocks)
          fail(name + "indices[" + num(int64_t(r)) + ", " + num(i) + "] = " + num(blk) + " is not a block of kv_len " + num(p.kv_len));
      }
    }
  }
}

// The attention with `listed(b, h, m, n)` the number of times key n counts for row m.
template <class Listed>
BlockSparseResult attend(const BlockSparseProblem& p, Listed&& listed) {
  const uint32_t Dq = p.qk_head_size, Dv = p.v_head_size, group = p.q_heads / p.kv_heads;
  BlockSparseResult r;
  const uint64_t rows = uint64_t(p.batch) * p.q_heads * p.q_len;
  r.out.assign(rows * Dv, 0.0);
  r.lse.assign(rows, -kInf);
  r.row_max.assign(rows, -kInf);
  std::vector<double> scores;
  std::vector<std::pair<int64_t, uint32_t>> keys;   // (key, times)
  for (uint32_t b = 0; b < p.batch; ++b)
    for (uint32_t h = 0; h < p.q_heads; ++h) {
      const uint64_t kv_base = (uint64_t(b % p.kv_batch) * p.kv_heads + h / group) * p.kv_len;
      for (int64_t m = 0; m < p.q_len; ++m) {
        const uint64_t row = (uint64_t(b) * p.q_heads + h) * p.q_len + m;
        const double* q = &p.q[row * Dq];
        keys.clear();
        scores.clear();
        double mx = -kInf;
        for (int64_t n = 0; n < p.kv_len; ++n) {
          const uint32_t times = listed(b, h, m, n);
          if (!times) continue;
          double dot = 0;
          for (uint32_t d = 0; d < Dq; ++d) dot += q[d] * p.k[(kv_base + n) * Dq + d];
          double s = p.scale * dot;
          if (p.score_mod) s = p.score_mod(s, b, h, m, n);
          if (s == -kInf) continue;
          keys.emplace_back(n, times);
          scores.push_back(s);
          if (!(s <= mx)) mx = s;   // NaN propagates
        }
        if (keys.empty()) continue;   // no key: out 0, lse and row_max -inf
        double sum = 0;
        double* out = &r.out[row * Dv];
        for (std::size_t i = 0; i < keys.size(); ++i) {
          const double w = keys[i].second * std::exp(scores[i] - mx);
          sum += w;
          for (uint32_t d = 0; d < Dv; ++d) out[d] += w * p.v[(kv_base + keys[i].first) * Dv + d];
        }
        for (uint32_t d = 0; d < Dv; ++d) out[d] /= sum;
        r.lse[row] = mx + std::log(sum);
        r.row_max[row] = mx;
      }
    }
  return r;
}

}  // namespace

uint32_t BlockMaskRef::listings(const MaskMod& mask_mod, uint32_t b, uint32_t h, int64_t q_idx, int64_t kv_idx,
                                int64_t kv_len) const {
  if (kv_idx >= kv_len) return 0;
  const uint64_t row = mask_row(*this, b, h, q_idx);
  const int64_t blk = kv_idx / kv_block_size;
  uint32_t n = 0;
  for (int32_t i = 0; i < kv_num_blocks[row]; ++i)
    if (kv_indices[row * kv_blocks + i] == blk && (!mask_mod || mask_mod(b, h, q_idx, kv_idx))) ++n;
  for (int32_t i = 0; !full_kv_num_blocks.empty() && i < full_kv_num_blocks[row]; ++i)
    if (full_kv_indices[row * kv_blocks + i] == blk) ++n;
  return n;
}

BlockMaskRef build_block_mask(const MaskMod& mask_mod, uint32_t sz, uint32_t sh, int64_t q_len, int64_t kv_len,
                              uint32_t q_block_size, uint32_t kv_block_size, bool separate_full) {
  if (!sz || !sh || !q_block_size || !kv_block_size || q_len < 0 || kv_len < 0)
    throw std::invalid_argument("build_block_mask: sz, sh and the block sizes must be positive, the lengths >= 0");
  BlockMaskRef m;
  m.sz = sz;
  m.sh = sh;
  m.q_block_size = q_block_size;
  m.kv_block_size = kv_block_size;
  m.q_blocks = uint32_t(cdiv(q_len, q_block_size));
  m.kv_blocks = uint32_t(cdiv(kv_len, kv_block_size));
  const uint64_t rows = uint64_t(sz) * sh * m.q_blocks;
  m.kv_num_blocks.assign(rows, 0);
  m.kv_indices.assign(rows * m.kv_blocks, 0);
  if (separate_full) {
    m.full_kv_num_blocks.assign(rows, 0);
    m.full_kv_indices.assign(rows * m.kv_blocks, 0);
  }
  for (uint32_t z = 0; z < sz; ++z)
    for (uint32_t h = 0; h < sh; ++h)
      for (uint32_t qb = 0; qb < m.q_blocks; ++qb) {
        const uint64_t row = (uint64_t(z) * sh + h) * m.q_blocks + qb;
        for (uint32_t kb = 0; kb < m.kv_blocks; ++kb) {
          bool any = false, all = true;
          for (int64_t q = int64_t(qb) * q_block_size; q < std::min<int64_t>(q_len, int64_t(qb + 1) * q_block_size); ++q)
            for (int64_t n = int64_t(kb) * kv_block_size; n < std::min<int64_t>(kv_len, int64_t(kb + 1) * kv_block_size); ++n) {
              const bool keep = mask_mod(z, h, q, n);
              any = any || keep;
              all = all && keep;
            }
          if (!any) continue;
          if (all && separate_full) m.full_kv_indices[row * m.kv_blocks + m.full_kv_num_blocks[row]++] = int32_t(kb);
          else m.kv_indices[row * m.kv_blocks + m.kv_num_blocks[row]++] = int32_t(kb);
        }
      }
  return m;
}

BlockSparseResult block_sparse_attention(const BlockSparseProblem& p) {
  validate(p, true);
  const BlockMaskRef& m = p.mask;
  // Per row of the mask, how many times each kv block is listed as partial and as full.
  std::vector<uint32_t> partial(m.kv_blocks), full(m.kv_blocks);
  uint64_t counted_row = ~0ull;
  return attend(p, [&](uint32_t b, uint32_t h, int64_t q, int64_t n) -> uint32_t {
    const uint64_t row = mask_row(m, b, h, q);
    if (row != counted_row) {
      std::fill(partial.begin(), partial.end(), 0u);
      std::fill(full.begin(), full.end(), 0u);
      for (int32_t i = 0; i < m.kv_num_blocks[row]; ++i) ++partial[m.kv_indices[row * m.kv_blocks + i]];
      for (int32_t i = 0; !m.full_kv_num_blocks.empty() && i < m.full_kv_num_blocks[row]; ++i)
        ++full[m.full_kv_indices[row * m.kv_blocks + i]];
      counted_row = row;
    }
    const uint64_t blk = uint64_t(n) / m.kv_block_size;
    if (blk >= m.kv_blocks) return 0;
    return full[blk] + (partial[blk] && (!p.mask_mod || p.mask_mod(b, h, q, n)) ? partial[blk] : 0);
  });
}

BlockSparseResult dense_masked_attention(const BlockSparseProblem& p) {
  validate(p, false);
  return attend(p, [&](uint32_t b, uint32_t h, int64_t q, int64_t n) -> uint32_t {
    return !p.mask_mod || p.mask_mod(b, h, q, n) ? 1 : 0;
  });
}

}  // namespace vkattn::ref
