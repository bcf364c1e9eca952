#include "runners/block_sparse_runner.hpp"

#include <vkattn/block_sparse_variant.hpp>
#include <vkattn/buffer.hpp>
#include <vkattn/error.hpp>
#include <vkattn/kv_cache.hpp>
#include <vkattn_ref/block_sparse_ref.hpp>
#include <vkattn_ref/random.hpp>
#include <vkattn_ref/tensor_data.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>

#include "gpu_timer.hpp"

namespace vkattn::tool {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr uint64_t kGuard = 256;   // poisoned bytes past each output, which must stay so

[[noreturn]] void bad(const std::string& what) { throw Error("block-sparse: " + what); }

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s + ",") {
    if (ch == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  return out;
}

// "name" or "name:value".
std::pair<std::string, std::string> split_arg(const std::string& item) {
  const auto at = item.find(':');
  return at == std::string::npos ? std::pair{item, std::string()} : std::pair{item.substr(0, at), item.substr(at + 1)};
}

double number(const std::string& item, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end) bad("'" + item + "' needs a number after ':'");
  return v;
}

// The case's mask: the library's mods and values, the host predicate the
// reference and the block-mask builder use, and random block choices.
struct MaskPlan {
  BlockSparseMods mods;
  int32_t window = 0, prefix_len = 0;
  uint32_t documents = 0;
  double random_density = -1;   // >= 0: a random block mask, no mask mod
  bool full = false;            // every block, full
  float softcap = 0;
  bool alibi = false, rel_bias = false, bias = false;
};

MaskPlan parse(const BlockSparseCase& c) {
  MaskPlan m;
  const auto masks = split_list(c.mask);
  for (const auto& item : masks) {
    const auto [name, arg] = split_arg(item);
    if (name == "causal") m.mods.all |= kMaskCausal;
    else if (name == "window") m.mods.all |= kMaskWindow, m.window = static_cast<int32_t>(number(item, arg));
    else if (name == "document") m.mods.all |= kMaskDocument, m.documents = static_cast<uint32_t>(number(item, arg));
    else if (name == "prefix") m.mods.any |= kMaskCausal | kMaskPrefix, m.prefix_len = static_cast<int32_t>(number(item, arg));
    else if (name == "random") m.random_density = number(item, arg);
    else if (name == "full") m.full = true;
    else bad("unknown mask '" + item + "': expected causal, window:N, document:N, prefix:N, random:DENSITY or full");
  }
  if ((m.mods.any || m.random_density >= 0 || m.full) && masks.size() > 1)
    bad("prefix:N, random:DENSITY and full combine with no other mask");
  if (m.documents == 0 && (m.mods.all & kMaskDocument)) bad("document:N needs N >= 1");
  for (const auto& item : split_list(c.score)) {
    const auto [name, arg] = split_arg(item);
    if (name == "softcap") m.mods.score |= kScoreSoftcap, m.softcap = static_cast<float>(number(item, arg));
    else if (name == "alibi") m.mods.score |= kScoreAlibi, m.alibi = true;
    else if (name == "relbias") m.mods.score |= kScoreRelBias, m.rel_bias = true;
    else if (name == "bias") m.mods.score |= kScoreBias, m.bias = true;
    else bad("unknown score mod '" + item + "': expected softcap:C, alibi, relbias or bias");
  }
  return m;
}

// The mask builder's mods and values: the attention's mask mods alone (score
// mods and their values do not shape a block mask; the builder refuses them).
void set_mask_mods(BlockMaskBuild& b, const MaskPlan& mp, const BlockSparseModValues& values) {
  b.mods = mp.mods;
  b.mods.score = 0;
  b.values = values;
  b.values.softcap = 0;
  b.values.alibi_slopes.reset();
  b.values.rel_bias.reset();
  b.values.bias.reset();
}

double unit(DType t) { return t == DType::bf16 ? 0x1p-8 : t == DType::f32 ? 0x1p-24 : 0x1p-11; }

}  // namespace

// q, K and V are stored exactly (the reference takes the stored values); the
// kernel's error comes from P rounded to the element type for P V, the
// accumulation in f32 and the output's rounding: a few units of the element
// type times the row's magnitude, plus half a unit of the output type. Score
// mods add rounded terms to the logits (f32), which a softcap's tanh and the
// bias tables stretch by little.
BlockSparseTolerance block_sparse_tolerance(const BlockSparseCase& c) {
  const double uc = unit(c.dtype);
  BlockSparseTolerance t;
  t.row_atol = 3 * uc + (c.score.empty() ? 0 : uc);
  t.rtol = 1.5 * unit(c.out_dtype);
  t.lse_atol = 3 * uc + (c.score.empty() ? 0 : uc);
  return t;
}

BlockSparseMods block_sparse_mods(const BlockSparseCase& c) { return parse(c).mods; }

namespace {

// Everything of a case but the device: its tables, its block mask, the mods
// as the reference applies them, and (when verified) q, K and V as stored.
// The mods read the tables through `this`: a CaseData stays where it was made.
struct CaseData {
  MaskPlan mp;
  uint32_t B = 0, Hq = 0, Hkv = 0, D = 0, Dv = 0, Bkv = 0;
  int64_t Lq = 0, Lkv = 0;
  int32_t q_offset = 0;
  std::vector<int32_t> doc;
  std::vector<float> alibi, rel_bias, bias;
  ref::BlockMaskRef mask;
  ref::MaskMod mask_mod;
  ref::ScoreMod score_mod;
  std::vector<double> q, k, v;
  double counted = 0;   // (q, kv) pairs that count, over every (b, h)

  CaseData(const BlockSparseCase& c, bool with_values);
  CaseData(const CaseData&) = delete;
};

CaseData::CaseData(const BlockSparseCase& c, bool with_values) {
  mp = parse(c);
  B = c.batch, Hq = c.q_heads, Hkv = c.kv_heads, D = c.head_size;
  Dv = c.v_head_size ? c.v_head_size : D;
  Bkv = c.kv_batch ? c.kv_batch : B;
  Lq = c.q_len, Lkv = c.kv_len;
  if (!B || !Hq || !Hkv || !D || !c.q_block || !c.kv_block || !c.mask_batch || !c.mask_heads)
    bad("batch, heads, head size, block sizes and mask extents must be >= 1");
  q_offset = c.q_offset ? *c.q_offset : static_cast<int32_t>(Lkv - Lq);
  ref::Rng rng(c.seed);

  // Document ids: N documents of random lengths over the kv positions.
  doc.assign(Lkv, 0);
  if (mp.documents) {
    std::vector<int64_t> cuts;
    for (uint32_t i = 1; i < mp.documents; ++i) cuts.push_back(int64_t(rng.below(uint32_t(std::max<int64_t>(Lkv, 1)))));
    std::sort(cuts.begin(), cuts.end());
    for (int64_t k = 0; k < Lkv; ++k)
      doc[k] = static_cast<int32_t>(std::upper_bound(cuts.begin(), cuts.end(), k) - cuts.begin());
  }
  auto admits = [this](uint32_t bit, int64_t q_pos, int64_t kv) {
    switch (bit) {
      case kMaskCausal: return kv <= q_pos;
      case kMaskWindow: return q_pos - kv < mp.window;
      case kMaskPrefix: return kv < mp.prefix_len;
      default: return q_pos >= 0 && q_pos < Lkv && doc[q_pos] == doc[kv];
    }
  };
  if (mp.mods.all || mp.mods.any || c.custom_mask)
    mask_mod = [this, admits, mods = mp.mods, custom = c.custom_mask](uint32_t b, uint32_t h, int64_t q, int64_t kv) {
      const int64_t q_pos = q + q_offset;
      bool all = mods.all != 0, any = false;
      for (uint32_t bit = 1; bit <= kMaskDocument; bit <<= 1) {
        if (mods.all & bit) all = all && admits(bit, q_pos, kv);
        if (mods.any & bit) any = any || admits(bit, q_pos, kv);
      }
      const bool builtin = (mods.all == 0 && mods.any == 0) || all || any;
      return builtin && (!custom || custom(b, h, q, kv));
    };

  // Score mods' tables.
  if (mp.alibi)
    for (uint32_t h = 0; h < Hq; ++h) alibi.push_back(static_cast<float>(std::exp2(rng.uniform(-8, -2))));
  if (mp.rel_bias) {
    rel_bias.resize(uint64_t(Hq) * (Lq + Lkv - 1));
    for (auto& x : rel_bias) x = static_cast<float>(rng.uniform(-1, 1));
  }
  if (mp.bias) {
    bias.resize(uint64_t(Hq) * Lq * Lkv);
    for (auto& x : bias) x = static_cast<float>(rng.uniform(-1, 1));
  }
  if (mp.mods.score || c.custom_score)
    score_mod = [this, custom = c.custom_score](double s, uint32_t b, uint32_t h, int64_t q, int64_t kv) {
      if (mp.softcap > 0) s = double(mp.softcap) * std::tanh(s / double(mp.softcap));
      if (mp.alibi) s += double(alibi[h]) * double(kv - (q + q_offset));
      if (mp.rel_bias) s += rel_bias[uint64_t(h) * (Lq + Lkv - 1) + uint64_t(kv - q + Lq - 1)];
      if (mp.bias) s += bias[(uint64_t(h) * Lq + uint64_t(q)) * Lkv + uint64_t(kv)];
      return custom ? custom(s, b, h, q, kv) : s;
    };

  // The block mask.
  if (mp.random_density >= 0 || mp.full) {
    mask.sz = c.mask_batch;
    mask.sh = c.mask_heads;
    mask.q_block_size = c.q_block;
    mask.kv_block_size = c.kv_block;
    mask.q_blocks = static_cast<uint32_t>((Lq + c.q_block - 1) / c.q_block);
    mask.kv_blocks = static_cast<uint32_t>(std::max<int64_t>((Lkv + c.kv_block - 1) / c.kv_block, 1));
    const uint64_t rows = uint64_t(mask.sz) * mask.sh * mask.q_blocks;
    mask.kv_num_blocks.assign(rows, 0);
    mask.kv_indices.assign(rows * mask.kv_blocks, 0);
    mask.full_kv_num_blocks.assign(rows, 0);
    mask.full_kv_indices.assign(rows * mask.kv_blocks, 0);
    const uint32_t n = static_cast<uint32_t>((Lkv + c.kv_block - 1) / c.kv_block);
    for (uint64_t r = 0; r < rows; ++r) {
      // Each block in with the density's probability; in a random mask,
      // half of them listed as partial (no mask mod: every pair counts).
      for (uint32_t j = 0; j < n; ++j) {
        if (!mp.full && !(rng.uniform(0, 1) < mp.random_density)) continue;
        const bool as_full = mp.full || !c.separate_full || rng.below(2);
        auto& num = as_full && c.separate_full ? mask.full_kv_num_blocks : mask.kv_num_blocks;
        auto& idx = as_full && c.separate_full ? mask.full_kv_indices : mask.kv_indices;
        idx[r * mask.kv_blocks + uint32_t(num[r]++)] = int32_t(j);
      }
    }
    if (!c.separate_full) mask.full_kv_num_blocks.clear(), mask.full_kv_indices.clear();
  } else {
    mask = ref::build_block_mask(mask_mod ? mask_mod : ref::MaskMod([](uint32_t, uint32_t, int64_t, int64_t) { return true; }),
                                 c.mask_batch, c.mask_heads, Lq, Lkv, c.q_block, c.kv_block, c.separate_full);
    if (mask.kv_blocks == 0) {   // Lkv = 0: the lists keep one (unused) column, as the op asks
      mask.kv_blocks = 1;
      mask.kv_indices.assign(mask.kv_num_blocks.size(), 0);
      if (!mask.full_kv_num_blocks.empty()) mask.full_kv_indices.assign(mask.full_kv_num_blocks.size(), 0);
    }
  }

  if (with_values) {
    const ref::ElemType et = ref::elem_type(dtype_name(c.dtype));
    q = ref::round_to(et, ref::random_values(rng, uint64_t(B) * Hq * uint64_t(Lq) * D, 2.0));
    k = ref::round_to(et, ref::random_values(rng, uint64_t(Bkv) * Hkv * uint64_t(Lkv) * D, 2.0));
    v = ref::round_to(et, ref::random_values(rng, uint64_t(Bkv) * Hkv * uint64_t(Lkv) * Dv, 1.0));
    if (c.paged_kv_dtype && *c.paged_kv_dtype != c.dtype) {   // an fp8 cache's values: fp8 times the scale
      const ref::ElemType ct = ref::elem_type(dtype_name(*c.paged_kv_dtype));
      for (auto [values, s] : {std::pair{&k, double(c.k_scale)}, std::pair{&v, double(c.v_scale)}}) {
        for (double& x : *values) x /= s;
        *values = ref::round_to(ct, *values);
        for (double& x : *values) x *= s;
      }
    }
  }
  // Counted pairs, from the lists and the mask mod: once per mask row, times
  // the (b, h) that broadcast to it (the built-in mods ask neither).
  for (uint32_t z = 0; z < mask.sz; ++z)
    for (uint32_t hh = 0; hh < mask.sh; ++hh) {
      const double users = double((B + mask.sz - 1 - z) / mask.sz) * double((Hq + mask.sh - 1 - hh) / mask.sh);
      if (users == 0) continue;
      for (uint32_t qb = 0; qb < mask.q_blocks; ++qb) {
        const uint64_t rrow = (uint64_t(z) * mask.sh + hh) * mask.q_blocks + qb;
        const int64_t q0 = int64_t(qb) * c.q_block, q1 = std::min<int64_t>(Lq, q0 + c.q_block);
        auto visit = [&](int32_t blk, bool partial) {
          const int64_t k0 = int64_t(blk) * c.kv_block, k1 = std::min<int64_t>(Lkv, k0 + c.kv_block);
          if (!partial || !mask_mod) return void(counted += users * double(std::max<int64_t>(k1 - k0, 0)) * double(q1 - q0));
          uint64_t n = 0;
          for (int64_t qi = q0; qi < q1; ++qi)
            for (int64_t kv = k0; kv < k1; ++kv) n += mask_mod(z, hh, qi, kv);
          counted += users * double(n);
        };
        for (int32_t j = 0; j < mask.kv_num_blocks[rrow]; ++j) visit(mask.kv_indices[rrow * mask.kv_blocks + j], true);
        if (!mask.full_kv_num_blocks.empty())
          for (int32_t j = 0; j < mask.full_kv_num_blocks[rrow]; ++j) visit(mask.full_kv_indices[rrow * mask.kv_blocks + j], false);
      }
    }
}

// A case's device buffers and arguments. With the stored values (d.q, ...)
// they are uploaded, rows padded apart; without, q, K and V are filled on the
// device with a constant pattern (timing does not depend on the values).
struct DeviceCase {
  Buffer qb, kb, vb, meta, ob, lb, mb;
  std::unique_ptr<PagedKvCache> cache;   // the case's K/V with paged_kv, in the chunks below
  std::vector<Buffer> cache_memory;
  std::vector<Buffer> custom;   // a variant's buffers, one each (they start on a binding)
  BlockSparseArgs a;
  uint64_t out_bytes = 0, stat_bytes = 0, row = 0;
};

void make_device_case(Context& ctx, const BlockSparseCase& c, const CaseData& d, DeviceCase& dc) {
  const uint32_t B = d.B, Hq = d.Hq, Hkv = d.Hkv, D = d.D, Dv = d.Dv, Bkv = d.Bkv;
  const int64_t Lq = d.Lq, Lkv = d.Lkv;
  const auto& mp = d.mp;
  const auto& mask = d.mask;
  // q, K, V as stored (random, rounded to the dtype), rows padded apart.
  const ref::ElemType et = ref::elem_type(dtype_name(c.dtype));
  // Rows of q and K (D elements) and of V and out (Dv), padded apart
  // (token_padding, for the views padded_views names).
  auto padding = [&](char view) { return c.padded_views.find(view) == std::string::npos ? 0u : c.token_padding; };
  const uint64_t esz = dtype_size(c.dtype), row = Dv + padding('o');
  dc.row = row;
  auto make = [&](Buffer& buf, char view, uint64_t batches, uint64_t heads, int64_t len, const std::vector<double>& exact, uint32_t dims) {
    const uint64_t rows_ = batches * heads * uint64_t(len), drow = dims + padding(view);
    buf = Buffer(ctx, std::max<uint64_t>(rows_ * drow * esz, 16));
    if (exact.empty()) {   // about 0.1 and 0.2 in f16 or bf16
      buf.fill(c.dtype == DType::bf16 ? 0x3DCD3E4Du : 0x2E663266u);
      return;
    }
    std::vector<double> padded(rows_ * drow, 0.0);
    for (uint64_t r = 0; r < rows_; ++r) std::copy_n(&exact[r * dims], dims, &padded[r * drow]);
    const auto bytes = ref::encode_values(et, padded);
    if (!bytes.empty()) buf.upload(bytes.data(), bytes.size());
  };
  make(dc.qb, 'q', B, Hq, Lq, d.q, D);
  std::vector<int32_t> table;   // with paged_kv: [B, columns + 1]
  uint32_t columns = 0;
  if (c.paged_kv.empty()) {
    make(dc.kb, 'k', Bkv, Hkv, Lkv, d.k, D);
    make(dc.vb, 'v', Bkv, Hkv, Lkv, d.v, Dv);
  } else {
    if (Bkv != B || Dv != D)
      throw Error("paged_kv: the case needs K/V per batch (no broadcast) and one head size");
    const uint32_t bs = c.paged_kv_block_size, nc = std::max<uint32_t>(c.paged_kv_chunks, 1);
    columns = static_cast<uint32_t>((Lkv + bs - 1) / bs);
    const DType cache_dtype = c.paged_kv_dtype.value_or(c.dtype);
    const bool fp8 = cache_dtype != c.dtype;
    const uint32_t per_chunk = (B * columns + 3 + nc - 1) / nc;   // nc chunks of per_chunk blocks, 3 blocks spare at least
    KvCacheConfig cfg{.num_blocks = per_chunk * nc, .block_size = bs, .num_kv_heads = Hkv,
                      .head_size = D, .dtype = cache_dtype, .layout = parse_layout(c.paged_kv),
                      .k_scale = fp8 ? c.k_scale : 1.0f, .v_scale = fp8 ? c.v_scale : 1.0f};
    // The chunks each in a buffer of its own, so that blocks are found
    // through the chunk table and its division, as in a cache larger than
    // one allocation.
    const uint64_t block_bytes = uint64_t(bs) * Hkv * D * dtype_size(cache_dtype);
    std::vector<KvCacheChunk> chunks;
    dc.cache_memory.reserve(nc);
    for (uint32_t i = 0; i < nc; ++i) {
      dc.cache_memory.emplace_back(ctx, 2 * per_chunk * block_bytes);
      chunks.push_back({.k_buffer = dc.cache_memory.back(), .v_buffer = dc.cache_memory.back(), .k_offset = 0,
                        .v_offset = per_chunk * block_bytes, .num_blocks = per_chunk});
    }
    dc.cache = std::make_unique<PagedKvCache>(ctx, cfg, chunks);
    std::vector<int32_t> order(cfg.num_blocks);
    for (uint32_t i = 0; i < cfg.num_blocks; ++i) order[i] = int32_t(i);
    ref::Rng rng(c.seed * 7 + 3);
    for (uint32_t i = cfg.num_blocks; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    table.assign(size_t(B) * (columns + 1), -1);   // the extra column is never read
    for (uint32_t b = 0; b < B; ++b)
      for (uint32_t j = 0; j < columns; ++j) table[b * (columns + 1) + j] = order[b * columns + j];
    // A timed case without values (BlockSparseTimed): every element one
    // finite value of the cache's dtype (0.5 in fp8, about 0.1 in f16 and bf16).
    if (d.k.empty()) dc.cache->fill(fp8 ? 0x38383838u : cache_dtype == DType::bf16 ? 0x3DCD3DCDu : 0x2E662E66u);
    for (const auto& [part, values] : {std::pair{KvPart::key, &d.k}, std::pair{KvPart::value, &d.v}}) {
      if (values->empty()) continue;
      const double stored = fp8 ? double(part == KvPart::key ? cfg.k_scale : cfg.v_scale) : 1.0;   // value / scale, exact in fp8
      std::vector<double> elems(size_t(cfg.num_blocks) * bs * Hkv * D, 0.0);
      for (uint32_t b = 0; b < B; ++b)
        for (uint32_t h = 0; h < Hkv; ++h)
          for (int64_t t = 0; t < Lkv; ++t)
            for (uint32_t e = 0; e < D; ++e)
              elems[size_t(table[b * (columns + 1) + t / bs]) * bs * Hkv * D + dc.cache->element_in_block(part, uint32_t(t % bs), h, e)] =
                  (*values)[((size_t(b) * Hkv + h) * Lkv + t) * D + e] / stored;
      dc.cache->write_blocks(part, 0, ref::encode_values(ref::elem_type(dtype_name(cache_dtype)), elems));
    }
  }
  auto strided = [&](const Buffer& buf, char v, DType t, int64_t b, int64_t h, int64_t len, uint32_t dims) {
    const int64_t r = dims + padding(v);
    TensorView view = TensorView::contiguous(buf, t, {b, h, len, int64_t(dims)});
    view.strides = {h * len * r, len * r, r, 1};
    return view;
  };

  // The mask lists and the mods' tables in one buffer, each one word past a
  // 16-byte boundary, as an engine may keep them.
  PackedWords packed;
  auto place = [&](const void* data, std::size_t count) { return packed.place(data, count); };
  const VkDeviceSize num_at = place(mask.kv_num_blocks.data(), mask.kv_num_blocks.size());
  const VkDeviceSize idx_at = place(mask.kv_indices.data(), mask.kv_indices.size());
  const VkDeviceSize fnum_at = place(mask.full_kv_num_blocks.data(), mask.full_kv_num_blocks.size());
  const VkDeviceSize fidx_at = place(mask.full_kv_indices.data(), mask.full_kv_indices.size());
  const VkDeviceSize doc_at = place(d.doc.data(), d.doc.size()), alibi_at = place(d.alibi.data(), d.alibi.size());
  const VkDeviceSize rel_at = place(d.rel_bias.data(), d.rel_bias.size()), bias_at = place(d.bias.data(), d.bias.size());
  const VkDeviceSize table_at = place(table.data(), table.size());
  dc.meta = packed.upload(ctx);
  const Buffer& meta = dc.meta;

  // Outputs: NaN-poisoned, guard bytes past them.
  const uint64_t oes = dtype_size(c.out_dtype), rows = uint64_t(B) * Hq * uint64_t(Lq);
  const uint64_t out_bytes = rows * row * oes, stat_bytes = rows * 4;
  dc.out_bytes = out_bytes;
  dc.stat_bytes = stat_bytes;
  dc.ob = Buffer(ctx, out_bytes + kGuard);
  dc.lb = Buffer(ctx, stat_bytes + kGuard);
  dc.mb = Buffer(ctx, stat_bytes + kGuard);
  for (Buffer* b : {&dc.ob, &dc.lb, &dc.mb}) b->fill(0xFFFFFFFFu);

  BlockSparseArgs& a = dc.a;
  a.q = strided(dc.qb, 'q', c.dtype, B, Hq, Lq, D);
  if (dc.cache) {
    BlockSparsePagedKv p;
    p.cache = dc.cache.get();
    p.block_table = TensorView::contiguous(meta, DType::i32, {int64_t(B), int64_t(columns)}, table_at);
    p.block_table.strides = {int64_t(columns) + 1, 1};
    p.kv_len = Lkv;
    a.paged_kv = p;
  } else {
    a.k = strided(dc.kb, 'k', c.dtype, Bkv, Hkv, Lkv, D);
    a.v = strided(dc.vb, 'v', c.dtype, Bkv, Hkv, Lkv, Dv);
  }
  a.out = strided(dc.ob, 'o', c.out_dtype, B, Hq, Lq, Dv);
  if (c.lse) a.lse = TensorView::contiguous(dc.lb, DType::f32, {B, Hq, Lq});
  if (c.row_max) a.row_max = TensorView::contiguous(dc.mb, DType::f32, {B, Hq, Lq});
  const int64_t QB = mask.q_blocks, KB = mask.kv_blocks, Sz = mask.sz, Sh = mask.sh;
  a.mask.kv_num_blocks = TensorView::contiguous(meta, DType::i32, {Sz, Sh, QB}, num_at);
  a.mask.kv_indices = TensorView::contiguous(meta, DType::i32, {Sz, Sh, QB, KB}, idx_at);
  if (!mask.full_kv_num_blocks.empty()) {
    a.mask.full_kv_num_blocks = TensorView::contiguous(meta, DType::i32, {Sz, Sh, QB}, fnum_at);
    a.mask.full_kv_indices = TensorView::contiguous(meta, DType::i32, {Sz, Sh, QB, KB}, fidx_at);
  }
  a.mask.q_block_size = c.q_block;
  a.mask.kv_block_size = c.kv_block;
  a.mods = mp.mods;
  a.values.window = mp.window;
  a.values.prefix_len = mp.prefix_len;
  a.values.softcap = mp.softcap;
  if (mp.documents) a.values.document_ids = TensorView::contiguous(meta, DType::i32, {Lkv}, doc_at);
  if (mp.alibi) a.values.alibi_slopes = TensorView::contiguous(meta, DType::f32, {Hq}, alibi_at);
  if (mp.rel_bias) a.values.rel_bias = TensorView::contiguous(meta, DType::f32, {Hq, Lq + Lkv - 1}, rel_at);
  if (mp.bias) a.values.bias = TensorView::contiguous(meta, DType::f32, {Hq, Lq, Lkv}, bias_at);
  a.scale = c.scale;
  a.q_offset = c.q_offset;
  a.custom_mods = c.custom_mods;
  const auto declared = c.custom_buffers.empty() || c.custom_mods.empty() ? std::vector<BlockSparseVariantBuffer>{}
                                                 : block_sparse_variant_buffers(c.custom_mods);
  for (const auto& [name, words] : c.custom_buffers) {
    Buffer& b = dc.custom.emplace_back(ctx, std::max<uint64_t>(words.size() * 4, 16));
    if (!words.empty()) b.upload(words.data(), words.size() * 4);
    DType dtype = DType::i32;   // a name the variant does not declare: left for the op to refuse
    for (const auto& d : declared)
      if (d.name == name) dtype = d.dtype;
    if (dtype_size(dtype) != 4)
      throw Error("custom buffer '" + name + "' is " + std::string(dtype_name(dtype)) + ": the runner passes 32-bit words");
    a.custom_buffers.push_back({name, TensorView::contiguous(b, dtype, {int64_t(words.size())})});
  }
}

// Builds the case's mask on the device from its mods into fresh buffers
// (entries past the counts poisoned) and compares it with the host's lists;
// returns the first difference, or "".
std::string check_device_mask(Context& ctx, const BlockSparseCase& c, const CaseData& d, const DeviceCase& dc) {
  const auto& m = d.mask;
  const uint64_t rows = uint64_t(m.sz) * m.sh * m.q_blocks, list = rows * m.kv_blocks;
  const bool full = !m.full_kv_num_blocks.empty();
  Buffer lists(ctx, 4 * (2 * rows + 2 * list) + 16);
  lists.fill(0xDEADBEEFu);
  const int64_t Sz = m.sz, Sh = m.sh, QB = m.q_blocks, KB = m.kv_blocks;
  BlockMaskBuild b;
  set_mask_mods(b, d.mp, dc.a.values);
  b.q_len = d.Lq;
  b.kv_len = d.Lkv;
  b.q_offset = c.q_offset;
  b.custom_mods = c.custom_mods;
  b.custom_buffers = dc.a.custom_buffers;
  b.mask.q_block_size = c.q_block;
  b.mask.kv_block_size = c.kv_block;
  b.mask.kv_num_blocks = TensorView::contiguous(lists, DType::i32, {Sz, Sh, QB});
  b.mask.kv_indices = TensorView::contiguous(lists, DType::i32, {Sz, Sh, QB, KB}, 4 * rows);
  if (full) {
    b.mask.full_kv_num_blocks = TensorView::contiguous(lists, DType::i32, {Sz, Sh, QB}, 4 * (rows + list));
    b.mask.full_kv_indices = TensorView::contiguous(lists, DType::i32, {Sz, Sh, QB, KB}, 4 * (2 * rows + list));
  }
  build_block_mask(ctx, b);
  std::vector<int32_t> got(2 * rows + 2 * list);
  lists.download(got.data(), got.size() * 4);
  auto compare = [&](const char* name, const int32_t* num, const int32_t* idx, const std::vector<int32_t>& want_num,
                     const std::vector<int32_t>& want_idx) -> std::string {
    for (uint64_t r = 0; r < rows; ++r) {
      if (num[r] != want_num[r])
        return std::string("build_block_mask: ") + name + " count of mask row " + std::to_string(r) + " = " +
               std::to_string(num[r]) + ", the host builder's " + std::to_string(want_num[r]);
      for (int32_t j = 0; j < num[r]; ++j)
        if (idx[r * m.kv_blocks + j] != want_idx[r * m.kv_blocks + j])
          return std::string("build_block_mask: ") + name + " row " + std::to_string(r) + " entry " + std::to_string(j) +
                 " = " + std::to_string(idx[r * m.kv_blocks + j]) + ", the host builder's " +
                 std::to_string(want_idx[r * m.kv_blocks + j]);
    }
    return "";
  };
  std::string e = compare("kv_indices", &got[0], &got[rows], m.kv_num_blocks, m.kv_indices);
  if (e.empty() && full) e = compare("full_kv_indices", &got[rows + list], &got[2 * rows + list], m.full_kv_num_blocks, m.full_kv_indices);
  return e;
}

}  // namespace

struct BlockSparseTimed::State {
  CaseData data;
  DeviceCase device;
  Context& ctx;
  Buffer lists;   // the mask builder's output
  BlockMaskBuild build;
  bool builds = false;
  State(Context& ctx_, const BlockSparseCase& c) : data(c, false), ctx(ctx_) {
    make_device_case(ctx_, c, data, device);
    if (data.mp.random_density >= 0 || data.mp.full) return;
    builds = true;
    const auto& m = data.mask;
    const int64_t Sz = m.sz, Sh = m.sh, QB = m.q_blocks, KB = m.kv_blocks, rows = Sz * Sh * QB;
    lists = Buffer(ctx_, 4 * (2 * rows + 2 * rows * KB));
    set_mask_mods(build, data.mp, device.a.values);
    build.q_len = data.Lq;
    build.kv_len = data.Lkv;
    build.q_offset = c.q_offset;
    build.mask.q_block_size = c.q_block;
    build.mask.kv_block_size = c.kv_block;
    build.mask.kv_num_blocks = TensorView::contiguous(lists, DType::i32, {Sz, Sh, QB});
    build.mask.kv_indices = TensorView::contiguous(lists, DType::i32, {Sz, Sh, QB, KB}, 4 * rows);
    build.mask.full_kv_num_blocks = TensorView::contiguous(lists, DType::i32, {Sz, Sh, QB}, 4 * (rows + rows * KB));
    build.mask.full_kv_indices = TensorView::contiguous(lists, DType::i32, {Sz, Sh, QB, KB}, 4 * (2 * rows + rows * KB));
  }
};

bool BlockSparseTimed::record_mask_build(VkCommandBuffer cmd) const {
  if (!s_->builds) return false;
  build_block_mask(s_->ctx, s_->build, cmd);
  return true;
}

BlockSparseTimed::BlockSparseTimed(Context& ctx, const BlockSparseCase& c) : s_(std::make_unique<State>(ctx, c)) {}
BlockSparseTimed::~BlockSparseTimed() = default;
void BlockSparseTimed::record(VkCommandBuffer cmd) const { block_sparse_attention(s_->ctx, s_->device.a, cmd); }
double BlockSparseTimed::flops() const { return 2.0 * (s_->data.D + s_->data.Dv) * s_->data.counted; }
double BlockSparseTimed::density() const {
  const auto& d = s_->data;
  return d.counted / (double(d.B) * d.Hq * double(d.Lq) * double(std::max<int64_t>(d.Lkv, 1)));
}
const BlockSparseArgs& BlockSparseTimed::args() const { return s_->device.a; }

RunResult run_block_sparse(Context& ctx, const BlockSparseCase& c, BlockSparseOutputs* outputs) {
  const CaseData d(c, true);
  DeviceCase dc;
  make_device_case(ctx, c, d, dc);
  const uint32_t B = d.B, Hq = d.Hq, D = d.D, Dv = d.Dv;
  const int64_t Lq = d.Lq;
  const auto& mask = d.mask;
  const BlockSparseArgs& a = dc.a;
  const uint64_t out_bytes = dc.out_bytes, stat_bytes = dc.stat_bytes, row = dc.row, oes = dtype_size(c.out_dtype);
  const uint64_t rows = uint64_t(B) * Hq * uint64_t(Lq);
  const int64_t Sz = mask.sz, Sh = mask.sh;
  RunResult r;
  r.pass = true;
  auto fail = [&](const std::string& what) {
    if (r.pass) r.pass = false, r.failure = what;
  };
  // A mask made from mods is also built on the device (build_block_mask), and
  // its lists must be the host builder's.
  if (d.mp.random_density < 0 && !d.mp.full) {
    const std::string e = check_device_mask(ctx, c, d, dc);
    if (!e.empty()) fail(e);
  }
  block_sparse_attention(ctx, a);

  std::vector<uint8_t> out_raw(out_bytes + kGuard), lse_raw(stat_bytes + kGuard), max_raw(stat_bytes + kGuard);
  dc.ob.download(out_raw.data(), out_raw.size());
  dc.lb.download(lse_raw.data(), lse_raw.size());
  dc.mb.download(max_raw.data(), max_raw.size());

  // The reference.
  ref::BlockSparseProblem p;
  p.batch = B;
  p.q_heads = Hq;
  p.kv_batch = d.Bkv;
  p.kv_heads = d.Hkv;
  p.q_len = Lq;
  p.kv_len = d.Lkv;
  p.qk_head_size = D;
  p.v_head_size = Dv;
  p.q = d.q;
  p.k = d.k;
  p.v = d.v;
  p.scale = c.scale != 0 ? double(c.scale) : double(static_cast<float>(1.0 / std::sqrt(double(D))));
  p.mask = mask;
  p.mask_mod = d.mask_mod;
  p.score_mod = d.score_mod;
  const ref::BlockSparseResult want = ref::block_sparse_attention(p);

  // Compare.
  const BlockSparseTolerance tol = block_sparse_tolerance(c);
  const ref::ElemType ot = ref::elem_type(dtype_name(c.out_dtype));
  const std::vector<double> got_all = ref::decode_values(ot, std::vector<uint8_t>(out_raw.begin(), out_raw.begin() + out_bytes));
  auto f32_at = [](const std::vector<uint8_t>& raw, uint64_t i) {
    float f;
    std::memcpy(&f, &raw[i * 4], 4);
    return double(f);
  };
  auto where = [&](uint64_t rw, int64_t d) {
    std::ostringstream o;
    o << "batch " << rw / (uint64_t(Hq) * Lq) << ", head " << (rw / Lq) % Hq << ", query " << rw % Lq;
    if (d >= 0) o << ", dim " << d;
    return o.str();
  };
  auto check_stat = [&](const char* name, double got, double want_v) {
    std::ostringstream o;
    if (want_v == -kInf) {
      if (!(got == -kInf)) return o << name << " = " << got << ", expected -inf (no counted key)", o.str();
      return std::string();
    }
    const double allowed = tol.lse_atol + 0x1p-20 * std::fabs(want_v);
    if (!(std::fabs(got - want_v) <= allowed))
      return o << name << " = " << got << ", reference " << want_v << " (allowed error " << allowed << ")", o.str();
    return std::string();
  };
  std::vector<double> got(rows * Dv);
  for (uint64_t rw = 0; rw < rows; ++rw) {
    const double* w = &want.out[rw * Dv];
    double maxabs = 0;
    for (uint32_t d = 0; d < Dv; ++d) maxabs = std::max(maxabs, std::fabs(w[d]));
    const bool empty = want.lse[rw] == -kInf;
    for (uint32_t d = 0; d < Dv; ++d) {
      const double g = got_all[rw * row + d];
      got[rw * Dv + d] = g;
      const double err = std::fabs(g - w[d]);
      std::ostringstream o;
      if (empty) {
        if (g != 0) fail((o << where(rw, d) << ": out = " << g << ", expected exactly 0 (no counted key)", o.str()));
        continue;
      }
      const double allowed = tol.row_atol * maxabs + tol.rtol * std::fabs(w[d]);
      if (std::isfinite(err)) {
        r.max_abs_err = std::max(r.max_abs_err, err);
        if (maxabs > 0) r.max_rel_err = std::max(r.max_rel_err, err / maxabs);
      }
      if (!(err <= allowed))
        fail((o << where(rw, d) << ": out = " << g << ", reference " << w[d] << " (error " << err << ", allowed " << allowed << ")",
              o.str()));
    }
    // Padding between rows stays as poisoned.
    for (uint64_t i = (rw * row + Dv) * oes; i < (rw + 1) * row * oes; ++i)
      if (out_raw[i] != 0xFF) {
        fail(where(rw, -1) + ": the padding after the row was written");
        break;
      }
    if (c.lse) {
      const std::string e = check_stat("lse", f32_at(lse_raw, rw), want.lse[rw]);
      if (!e.empty()) fail(where(rw, -1) + ": " + e);
    }
    if (c.row_max) {
      const std::string e = check_stat("row_max", f32_at(max_raw, rw), want.row_max[rw]);
      if (!e.empty()) fail(where(rw, -1) + ": " + e);
    }
  }
  for (auto [raw, from, name] : {std::tuple{&out_raw, out_bytes, "out"}, std::tuple{&lse_raw, c.lse ? stat_bytes : 0, "lse"},
                                 std::tuple{&max_raw, c.row_max ? stat_bytes : 0, "row_max"}})
    for (uint64_t i = from; i < raw->size(); ++i)
      if ((*raw)[i] != 0xFF) {
        fail(std::string(name) + " buffer byte " + std::to_string(i) + " past the output was written");
        break;
      }
  const double density = d.counted / (double(B) * Hq * double(Lq) * double(std::max<int64_t>(d.Lkv, 1)));

  std::ostringstream tt;
  tt << "|out - ref| <= " << tol.row_atol << " * max|ref row| + " << tol.rtol << " * |ref|";
  if (c.lse || c.row_max) tt << "; |lse or row_max - ref| <= " << tol.lse_atol << " + 2^-20 |ref|";
  tt << "; rows with no counted key exactly 0";
  r.tolerance = tt.str();

  if (c.timing_repetitions > 0 && ctx.capabilities().timestamp_period_ns > 0) {
    if (c.before_timing) c.before_timing();
    r.gpu_us = median_time_us(ctx, [&](VkCommandBuffer cmd) { block_sparse_attention(ctx, a, cmd); }, c.timing_repetitions);
  }
  // FLOPs, not bytes: 4 * D per counted pair (q.k and p.v).
  r.bytes = 0;
  r.flops = 2.0 * (D + Dv) * d.counted;

  std::ostringstream s;
  s << "block_sparse_attention: B " << B << (d.Bkv != B ? " (K/V broadcast)" : "") << ", heads " << Hq << "/" << d.Hkv << " x " << D << (Dv != D ? " (V " + std::to_string(Dv) + ")" : std::string())
    << ", Lq " << Lq << ", Lkv " << d.Lkv << ", blocks " << c.q_block << "x" << c.kv_block << ", mask " << c.mask
    << (c.score.empty() ? "" : ", score " + c.score) << " (mask " << Sz << "x" << Sh << ", density " << density << ")"
    << ", " << dtype_name(c.dtype) << " -> " << dtype_name(c.out_dtype) << (c.lse ? ", lse" : "")
    << (c.row_max ? ", row max" : "") << ", seed " << c.seed;
  r.path = path_name(block_sparse_attention_path(ctx, BlockSparseVariant{.q_dtype = c.dtype, .out_dtype = c.out_dtype,
                                                                          .num_q_heads = Hq, .num_kv_heads = d.Hkv,
                                                                          .head_size = D, .v_head_size = Dv == D ? 0 : Dv,
                                                                          .q_block_size = c.q_block, .kv_block_size = c.kv_block,
                                                                          .mods = d.mp.mods, .custom_mods = c.custom_mods}));
  s << ", path " << r.path;
  r.summary = s.str();
  if (outputs) {
    outputs->out = std::move(got);
    outputs->ref_out = want.out;
    for (uint64_t rw = 0; rw < rows; ++rw) {
      if (c.lse) outputs->lse.push_back(f32_at(lse_raw, rw));
      if (c.row_max) outputs->row_max.push_back(f32_at(max_raw, rw));
    }
    outputs->ref_lse = want.lse;
    outputs->ref_row_max = want.row_max;
    outputs->density = density;
  }
  return r;
}

}  // namespace vkattn::tool
