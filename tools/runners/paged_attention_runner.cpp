#include "runners/paged_attention_runner.hpp"

#include <vkattn/vkattn.hpp>
#include <vkattn/paged_attention.hpp>
#include <vkattn_ref/attention_ref.hpp>
#include <vkattn_ref/kv_cache_ref.hpp>
#include <vkattn_ref/number_formats.hpp>
#include <vkattn_ref/random.hpp>
#include <vkattn_ref/tensor_data.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>

#include "context_impl.hpp"
#include "gpu_timer.hpp"
#include "ops/paged_attention_plan.hpp"   // (the plan's schedule, for the summary)

namespace vkattn::tool {

// ---- flags ------------------------------------------------------------------

PagedAttentionFlags::PagedAttentionFlags(cli::Flags& f, bool prefix)
    : prefix_(prefix),
      seqs_(f.add_string("seqs", "1:1328,5:18,129:463",
                         prefix ? "sequences as query_len:seq_len pairs (seq_len = cached context + new tokens; 0 = padding)"
                                : "sequences as query_len:seq_len pairs (seq_len = context + new tokens; 0 = padding)")),
      q_heads_(f.add_int("q-heads", 32, "query heads", 1, 1024)),
      kv_heads_(f.add_int("kv-heads", 8, "KV heads (must divide --q-heads)", 1, 1024)),
      head_size_(f.add_int("head-size", 128, "head size (multiple of 16, 16..256)", 1, 4096)),
      block_size_(f.add_int("block-size", 16, "tokens per cache block (1..1024)", 1, 1024)),
      num_blocks_(f.add_int("num-blocks", 0, "blocks in the cache; 0 = just enough (used blocks go to the top)", 0,
                            int64_t(1) << 31)),
      window_(f.add_int("window", 0, "sliding window (0 = none)", 0, int64_t(1) << 30)),
      seed_(f.add_int("seed", 1, "random seed", 0)),
      reps_(f.add_int("repeat", 20, "timed repetitions (at most; fewer when they would take over 2 s)", 0, 100000)),
      cache_dtype_(f.add_choice("cache-dtype", "f16", {"f16", "bf16", "fp8_e4m3", "fp8_e5m2"}, "KV cache dtype")),
      layout_(f.add_choice("layout", "nhd", {"nhd", "hnd", "split"}, "KV cache layout")),
      q_dtype_(f.add_choice("dtype", "f16", {"f16", "bf16"}, prefix ? "query and new K/V dtype" : "query dtype")),
      out_dtype_(f.add_choice("out-dtype", "f16", {"f16", "bf16", "f32", "fp8_e4m3", "fp8_e5m2"}, "output dtype")),
      prefill_(f.add_choice("prefill-kernel", "auto", {"auto", "on", "off"}, "run long sequences on the prefill kernel")),
      softcap_(f.add_double("softcap", 0.0, "logit soft cap (0 = none)", 0.0)),
      scale_(f.add_double("scale", 0.0, "softmax scale (0 = 1/sqrt(head size))", 0.0)),
      k_scale_(f.add_double("k-scale", 0.05, "fp8 K scale (stored = k / k_scale)", 0.0)),
      v_scale_(f.add_double("v-scale", 0.03, "fp8 V scale", 0.0)),
      out_scale_(f.add_double("out-scale", 1.0, "fp8 output scale (stored = out / out_scale)", 0.0)),
      alibi_(f.add_bool("alibi", false, "random ALiBi slopes")),
      sinks_(f.add_bool("sinks", false, "random attention sinks")),
      lse_(f.add_bool("lse", false, "also write and check the log-sum-exp")) {
  if (prefix) {
    skip_decode_ = &f.add_bool("skip-decode", false, "leave sequences of one new token untouched (checked)");
    write_cache_ = &f.add_bool("write-cache", false, "also write the new K/V into the cache (fused write; checked slot by slot)");
    kv_padding_ = &f.add_int("kv-token-padding", 0, "elements between the new K/V's token rows (a strided view)", 0, 4096);
  } else {
    segments_ = &f.add_int("segments", 0, "KV segments with --split on (0 = chosen by the plan)", 0, 4096);
    split_ = &f.add_choice("split", "auto", {"auto", "on", "off"}, "split-KV (segmented) mode");
    qq_bias_ = &f.add_bool("qq-bias", false, "random query-query bias [max_query_len, max_query_len]");
  }
}

std::vector<std::pair<uint32_t, uint32_t>> parse_seqs(const std::string& text) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  auto bad = [&](const std::string& item, const std::string& why) {
    return cli::UsageError("--seqs: '" + item + "' " + why + " (expected query_len:seq_len pairs, e.g. 1:1328,5:18)");
  };
  auto number = [&](std::string_view s, const std::string& item) {
    uint32_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size())
      throw bad(item, ec == std::errc::result_out_of_range ? "has a number out of range" : "is not two integers");
    return v;
  };
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(pos, comma - pos);
    const std::size_t colon = item.find(':');
    if (colon == std::string::npos) throw bad(item, "has no ':'");
    const uint32_t q = number(std::string_view(item).substr(0, colon), item);
    const uint32_t s = number(std::string_view(item).substr(colon + 1), item);
    if (s != 0 && q > s) throw bad(item, "has query_len > seq_len (seq_len counts the new tokens too)");
    out.emplace_back(q, s);
    pos = comma + 1;
  }
  if (out.empty()) throw cli::UsageError("--seqs: no sequences");
  return out;
}

PagedAttentionCase PagedAttentionFlags::apply() const {
  PagedAttentionCase c;
  c.seqs = parse_seqs(seqs_);
  c.num_q_heads = static_cast<uint32_t>(q_heads_);
  c.num_kv_heads = static_cast<uint32_t>(kv_heads_);
  c.head_size = static_cast<uint32_t>(head_size_);
  c.block_size = static_cast<uint32_t>(block_size_);
  c.num_blocks = static_cast<uint32_t>(num_blocks_);
  c.cache_dtype = parse_dtype(cache_dtype_);
  c.layout = parse_layout(layout_);
  c.q_dtype = parse_dtype(q_dtype_);
  c.out_dtype = parse_dtype(out_dtype_);
  c.k_scale = static_cast<float>(k_scale_);
  c.v_scale = static_cast<float>(v_scale_);
  c.out_scale = static_cast<float>(out_scale_);
  c.scale = static_cast<float>(scale_);
  c.sliding_window = static_cast<int32_t>(window_);
  c.softcap = static_cast<float>(softcap_);
  c.alibi = alibi_;
  c.sinks = sinks_;
  c.with_lse = lse_;
  c.prefill = prefill_ == "on" ? PrefillKernel::on : prefill_ == "off" ? PrefillKernel::off : PrefillKernel::automatic;
  if (prefix_) {
    c.prefix_prefill = true;
    c.skip_decode = *skip_decode_;
    c.write_cache = *write_cache_;
    c.kv_token_padding = static_cast<uint32_t>(*kv_padding_);
  } else {
    c.qq_bias = *qq_bias_;
    c.split = *split_ == "on" ? SplitKv::on : *split_ == "off" ? SplitKv::off : SplitKv::automatic;
    c.num_segments = static_cast<uint32_t>(*segments_);
  }
  c.seed = static_cast<uint64_t>(seed_);
  c.timing_repetitions = static_cast<uint32_t>(reps_);
  return c;
}

// ---- tolerance ----------------------------------------------------------------
//
// The kernels compute in f32, but the matrix paths round operands before their
// products: Q is already in its dtype; fp8 K/V are dequantised (times the scale)
// into the query dtype (seed 001: (K * k_scale).to(Q.dtype)); P = exp(s - m) is
// rounded to V's dtype before P.V. Let u_c be the unit roundoff of that compute
// dtype: 2^-11 for f16, 2^-8 when bf16 is involved (q or cache).
//
//  * P rounding: each p_k gets a relative error <= u_c, so the output error is
//    sum_k p_k e_k v_k. For our random, zero-mean V its rms is ~(u_c/sqrt 3) *
//    sqrt(sum_k p_k^2 v_k^2), which is also how the output itself scales
//    (o_d = sum_k p_k v_kd has rms sqrt(sum_k p_k^2) * rms(v)). So the natural
//    unit of the error is the size of the output row, not the largest V: a
//    tolerance of a * max|ref row| stays tight for long rows (where max|v|
//    would hide a missing or extra key: p_k ~ 1/N) yet robust for short ones.
//    With max|row| ~ 2.5-3 rms, a = 3 u_c is ~15 sigma of the statistical error.
//  * Rounded inputs to the logits (fp8 K dequantised to the compute dtype, a
//    cache dtype other than q's, softcap's tanh in f32 on the GPU, which may be
//    approximate to ~2^-11) and fp8 V dequantised into the compute dtype add
//    errors of the same shape and size: another 3 u_c.
//  * Rounding to the output dtype: at most half an ulp, u_out |o| (+ the
//    subnormal spacing for f16): rtol = 1.5 u_out, floor 2^-25 for f16.
//  * fp8 output (e4m3 has 3 mantissa bits) dwarfs everything above except near
//    zero: compare the raw value ref / out_scale (clamped to the format's
//    range: the kernel saturates) with one ulp of slack plus the row term
//    scaled to the stored units.
//  * LSE = m + log L: logit errors average into it, P rounding does not (or,
//    if L is summed from rounded P, by <= u_c): 3 u_c, plus 4 u_c when the
//    logits' inputs are rounded, plus 2^-20 |lse| for f32 arithmetic on large
//    (ALiBi-biased) logits. f16: 1.5e-3; bf16: 1.2e-2 (fp8 cache: 2.9e-3 / 2.7e-2).
//  * Rows that see no key must be exactly 0 with lse -inf (or the sink).
PagedAttentionTolerance paged_attention_tolerance(const PagedAttentionCase& c) {
  auto unit = [](DType t) {
    switch (t) {
      case DType::f16: return 0x1p-11;
      case DType::bf16: return 0x1p-8;
      case DType::f32: return 0x1p-24;
      case DType::fp8_e4m3: return 0x1p-4;
      case DType::fp8_e5m2: return 0x1p-3;
      default: return 0.0;
    }
  };
  const bool bf16 = c.q_dtype == DType::bf16 || c.cache_dtype == DType::bf16;
  const double uc = bf16 ? 0x1p-8 : 0x1p-11;
  const bool rounded_inputs = is_fp8(c.cache_dtype) || c.cache_dtype != c.q_dtype || c.softcap > 0;
  PagedAttentionTolerance t;
  t.row_atol = 3 * uc + (rounded_inputs ? 3 * uc : 0);
  t.rtol = is_fp8(c.out_dtype) ? 0 : 1.5 * unit(c.out_dtype);
  t.floor = c.out_dtype == DType::f16 ? 0x1p-25 : 1e-30;
  t.lse_atol = 3 * uc + (rounded_inputs ? 4 * uc : 0);
  return t;
}

// ---- the run --------------------------------------------------------------------

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

ref::ElemType ref_type(DType t) { return ref::elem_type(dtype_name(t)); }

uint32_t cdiv(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

// A NaN of the cache dtype, as stored bits, and a 32-bit word repeating it.
uint32_t nan_bits(DType t) {
  switch (t) {
    case DType::f16: return 0x7E00;
    case DType::bf16: return 0x7FC0;
    case DType::fp8_e4m3: return 0x7F;
    case DType::fp8_e5m2: return 0x7E;
    default: return 0xFFFFFFFFu;
  }
}
uint32_t nan_word(DType t) {
  const uint32_t b = nan_bits(t);
  return dtype_size(t) == 1 ? b * 0x01010101u : b * 0x00010001u;
}

std::string seqs_text(const std::vector<std::pair<uint32_t, uint32_t>>& seqs) {
  std::string s;
  const std::size_t shown = std::min<std::size_t>(seqs.size(), 8);
  for (std::size_t i = 0; i < shown; ++i)
    s += (i ? "," : "") + std::to_string(seqs[i].first) + ":" + std::to_string(seqs[i].second);
  if (shown < seqs.size()) s += ",... (" + std::to_string(seqs.size()) + " in all)";
  return s;
}

// PagedAttentionCase::garbage_workspace's runs (and resubmit's).
void run_on_garbage_workspace(Context& ctx, const PagedAttentionCase& c, uint64_t bytes, Buffer& obuf, Buffer& lbuf,
                              const std::function<void(const std::optional<TensorView>&, VkCommandBuffer)>& run_once) {
  using detail::vk_check;
  // The view, with random guard words on both sides (checked after the runs).
  constexpr uint64_t kGuardWords = 64;
  const uint64_t first = uint64_t(c.workspace_offset_words), view_words = bytes / 4;
  Buffer wbuf(ctx, (first + view_words + kGuardWords) * 4);
  std::optional<TensorView> ws;
  if (bytes) {
    ws = TensorView::contiguous(wbuf, DType::f32, {int64_t(view_words)});
    ws->offset = first * 4;
  }
  ref::Rng rng(c.seed ^ 0x5eedu);
  std::vector<uint32_t> words(wbuf.size() / 4);
  auto scribble = [&] {
    for (size_t i = 0; i < words.size(); ++i) {
      const uint32_t r = uint32_t(rng.next());
      // The counters: 0, or junk that no segment count reaches.
      const bool counter = i >= first && i - first < kPagedAttentionWorkspaceCounterBytes / 4;
      words[i] = !counter ? r : c.junk_counters ? r | 0x10000u : 0u;
    }
    wbuf.upload(std::span<const uint32_t>(words));
  };
  // Whether a run wrote outside the view.
  auto check_guards = [&] {
    std::vector<uint32_t> now(words.size());
    wbuf.download(now.data(), now.size() * 4);
    for (size_t i = 0; i < now.size(); ++i)
      if ((i < first || i >= first + view_words) && now[i] != words[i])
        throw Error("paged-attention: the split workspace's word " + std::to_string(i) + " (the view holds words " +
                    std::to_string(first) + " to " + std::to_string(first + view_words - 1) + ") was written");
  };
  const auto& vk = ctx.impl().vk;
  // resubmit's command buffer of its own, released however the runs end.
  struct OwnSubmission {
    Context& ctx;
    VkCommandPool pool = VK_NULL_HANDLE;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    ~OwnSubmission() {
      const auto& v = ctx.impl().vk;
      if (fence) v.vkDestroyFence(ctx.device(), fence, nullptr);
      if (!pool) return;
      v.vkDestroyCommandPool(ctx.device(), pool, nullptr);
      ctx.release_recorded_descriptor_sets();
    }
  } own{ctx};
  VkCommandPool& pool = own.pool;
  VkCommandBuffer& cmd = own.cmd;
  VkFence& fence = own.fence;
  if (c.resubmit) {
    VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pci.queueFamilyIndex = ctx.queue_family();
    vk_check(vk.vkCreateCommandPool(ctx.device(), &pci, nullptr, &pool), "vkCreateCommandPool");
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    vk_check(vk.vkAllocateCommandBuffers(ctx.device(), &ai, &cmd), "vkAllocateCommandBuffers");
    VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    vk_check(vk.vkCreateFence(ctx.device(), &fci, nullptr, &fence), "vkCreateFence");
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    vk.vkBeginCommandBuffer(cmd, &bi);
    run_once(ws, cmd);
    vk.vkEndCommandBuffer(cmd);
  }
  for (uint32_t run = 0; run < std::max<uint32_t>(c.runs, 1); ++run) {
    if (run > 0) {
      obuf.fill(0xFFFFFFFFu);
      lbuf.fill(0xFFFFFFFFu);
    }
    if (!c.resubmit) {
      scribble();
      ctx.submit_and_wait([&](VkCommandBuffer cb) { run_once(ws, cb); });
      continue;
    }
    if (run == 0) scribble();
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd;
    vk_check(vk.vkQueueSubmit(ctx.queue(), 1, &si, fence), "vkQueueSubmit");
    vk_check(vk.vkWaitForFences(ctx.device(), 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    vk.vkResetFences(ctx.device(), 1, &fence);
    ctx.check_device_status();
  }
  check_guards();
}

}  // namespace

RunResult run_paged_attention(Context& ctx, const PagedAttentionCase& c, PagedAttentionOutputs* outputs) {
  if (c.seqs.empty()) throw Error("paged-attention: the batch has no sequences");
  if (c.block_size == 0) throw Error("paged-attention: block_size is 0");
  const uint32_t S = static_cast<uint32_t>(c.seqs.size());
  const uint32_t Hq = c.num_q_heads, Hkv = c.num_kv_heads, D = c.head_size, bs = c.block_size;
  const bool prefix = c.prefix_prefill;
  const char* op_name = prefix ? "prefix_prefill" : "paged_attention";
  if (!prefix && (c.skip_decode || c.write_cache || c.kv_token_padding))
    throw Error("paged-attention: skip_decode, write_cache and kv_token_padding are prefix_prefill's");
  ref::Rng rng(c.seed);
  // Tokens each sequence has in the cache: all, or (prefix prefill) its context.
  auto cached = [&](uint32_t s) {
    const auto [q, len] = c.seqs[s];
    return prefix && len > 0 ? len - q : len;
  };

  // Batch geometry.
  std::vector<int32_t> qsl(S + 1, 0), seq_lens(S);
  uint32_t max_q = 0, max_blocks = 0;
  for (uint32_t s = 0; s < S; ++s) {
    qsl[s + 1] = qsl[s] + int32_t(c.seqs[s].first);
    seq_lens[s] = int32_t(c.seqs[s].second);
    max_q = std::max(max_q, c.seqs[s].first);
    max_blocks = std::max(max_blocks, cdiv(c.seqs[s].second, bs));
  }
  const uint32_t T = static_cast<uint32_t>(qsl[S]);

  // Which blocks each sequence uses: its own, or (shared prefixes) the first
  // full blocks of an earlier sequence followed by its own.
  std::vector<uint32_t> share(S, 0), share_from(S, 0);
  uint64_t distinct = 0;
  for (uint32_t s = 0; s < S; ++s) {
    const uint32_t nb = cdiv(c.seqs[s].second, bs);
    if (c.shared_prefixes && s > 0 && nb > 1) {
      const uint32_t t = rng.below(s);
      const uint32_t m = prefix ? std::min(cached(t) / bs, cached(s) / bs) : std::min(c.seqs[t].second / bs, nb - 1);
      if (m > 0 && rng.below(2)) {
        share[s] = 1 + rng.below(m);
        share_from[s] = t;
      }
    }
    distinct += nb - share[s];
  }
  // A pool of blocks at the top of the cache holds every used block in random
  // order, plus spare (poisoned) ones; the reference sees the pool alone.
  const uint64_t wanted_pool = distinct + distinct / 4 + 3;
  uint32_t num_blocks = c.num_blocks;
  if (num_blocks == 0) num_blocks = static_cast<uint32_t>(wanted_pool);
  if (num_blocks < distinct)
    throw Error("paged-attention: the batch uses " + std::to_string(distinct) + " distinct blocks of " +
                std::to_string(bs) + " tokens, more than --num-blocks " + std::to_string(num_blocks));
  const uint32_t pool = static_cast<uint32_t>(std::min<uint64_t>(num_blocks, wanted_pool));
  const uint32_t base = num_blocks - pool;
  std::vector<uint32_t> perm = ref::random_permutation(rng, pool);
  std::vector<std::vector<uint32_t>> blocks(S);   // pool indices
  uint32_t next = 0;
  for (uint32_t s = 0; s < S; ++s) {
    const uint32_t nb = cdiv(c.seqs[s].second, bs);
    for (uint32_t b = 0; b < share[s]; ++b) blocks[s].push_back(blocks[share_from[s]][b]);
    for (uint32_t b = share[s]; b < nb; ++b) blocks[s].push_back(perm[next++]);
  }
  const uint32_t mbps = std::max<uint32_t>(1, max_blocks + c.table_slack);
  std::vector<int32_t> block_table(uint64_t(S) * mbps, 0), ref_table(block_table.size(), 0);
  for (uint32_t s = 0; s < S; ++s)
    for (uint32_t b = 0; b < mbps; ++b) {
      const uint64_t i = uint64_t(s) * mbps + b;
      if (b < blocks[s].size()) {
        block_table[i] = int32_t(base + blocks[s][b]);
        ref_table[i] = int32_t(blocks[s][b]);
      } else if (c.junk_table_tail) {
        // Entries past a sequence's blocks are never read: make them unusable.
        const int32_t junk[] = {-1, int32_t(num_blocks), std::numeric_limits<int32_t>::max(), -123456};
        block_table[i] = junk[(s + b) % 4];
      }
    }

  // The pool's K and V bytes: NaN everywhere (slots no sequence uses must
  // never reach the output), random values in every used slot.
  const ref::ElemType cache_t = ref_type(c.cache_dtype);
  const ref::KvGeometry g{pool, bs, Hkv, D, cache_t, static_cast<ref::KvLayoutRef>(static_cast<uint32_t>(c.layout))};
  const std::size_t ces = dtype_size(c.cache_dtype);
  const ref::Format cfmt = ref::format_of(cache_t);
  const bool fp8_cache = is_fp8(c.cache_dtype);
  const double ks = fp8_cache ? double(c.k_scale) : 1.0, vs = fp8_cache ? double(c.v_scale) : 1.0;
  std::vector<uint8_t> k_img(uint64_t(pool) * g.block_elems() * ces), v_img(k_img.size());
  {
    const uint32_t nb = nan_bits(c.cache_dtype);
    for (uint64_t i = 0; i < k_img.size(); i += ces) {
      std::memcpy(&k_img[i], &nb, ces);
      std::memcpy(&v_img[i], &nb, ces);
    }
  }
  double vmax = 0;
  std::vector<uint8_t> written(uint64_t(pool) * bs, 0);
  for (uint32_t s = 0; s < S; ++s)
    for (uint32_t k = 0; k < cached(s); ++k) {
      const uint32_t p = blocks[s][k / bs], t = k % bs;
      if (written[uint64_t(p) * bs + t]) continue;
      written[uint64_t(p) * bs + t] = 1;
      for (uint32_t h = 0; h < Hkv; ++h)
        for (uint32_t d = 0; d < D; ++d) {
          double kv = 0, vv = 0;
          do kv = rng.uniform(-c.k_amplitude, c.k_amplitude); while (kv == 0);
          do vv = rng.uniform(-c.v_amplitude, c.v_amplitude); while (vv == 0);
          const uint32_t kb = ref::encode(cfmt, kv / ks), vb = ref::encode(cfmt, vv / vs);
          std::memcpy(&k_img[ref::kv_element_index(g, false, p, t, h, d) * ces], &kb, ces);
          std::memcpy(&v_img[ref::kv_element_index(g, true, p, t, h, d) * ces], &vb, ces);
          vmax = std::max(vmax, std::fabs(ref::decode(cfmt, vb) * vs));
        }
    }

  KvCacheConfig cfg{.num_blocks = num_blocks, .block_size = bs, .num_kv_heads = Hkv, .head_size = D,
                    .dtype = c.cache_dtype, .layout = c.layout, .k_scale = c.k_scale, .v_scale = c.v_scale};
  PagedKvCache cache(ctx, cfg);
  if (base > 0) cache.fill(nan_word(c.cache_dtype));
  cache.write_blocks(KvPart::key, base, k_img);
  cache.write_blocks(KvPart::value, base, v_img);

  // Token rows: the batch's, then (replay) spare ones past it.
  const uint32_t Tcap = T + (c.replay ? c.spare_tokens : 0);

  // q, rounded to its dtype, in rows of num_q_heads * head_size (+ NaN padding).
  const ref::ElemType q_t = ref_type(c.q_dtype), out_t = ref_type(c.out_dtype);
  const uint64_t row = uint64_t(Hq) * D, q_stride = row + c.q_token_padding;
  std::vector<double> q = ref::round_to(q_t, ref::random_values(rng, T * row, c.q_amplitude));
  std::vector<double> q_laid(uint64_t(Tcap) * q_stride, std::numeric_limits<double>::quiet_NaN());
  for (uint64_t i = 0; i < T; ++i) std::copy(q.begin() + i * row, q.begin() + (i + 1) * row, q_laid.begin() + i * q_stride);
  std::vector<uint8_t> q_bytes = ref::encode_values(q_t, q_laid);
  Buffer qbuf(ctx, std::max<std::size_t>(q_bytes.size(), 16));
  if (!q_bytes.empty()) qbuf.upload(q_bytes.data(), q_bytes.size());
  TensorView qv = TensorView::contiguous(qbuf, c.q_dtype, {Tcap, Hq, D});
  if (c.q_token_padding) qv.strides = {int64_t(q_stride), int64_t(D), 1};

  // Prefix prefill: the new tokens' K and V in q's dtype, token rows
  // kv_token_padding elements apart (NaN between them).
  const uint64_t kv_row = uint64_t(Hkv) * D, kv_stride = kv_row + c.kv_token_padding;
  std::vector<double> new_k, new_v;
  Buffer new_kbuf, new_vbuf;
  TensorView new_kv, new_vv;
  if (prefix) {
    new_k = ref::round_to(q_t, ref::random_values(rng, T * kv_row, c.k_amplitude));
    new_v = ref::round_to(q_t, ref::random_values(rng, T * kv_row, c.v_amplitude));
    for (double v : new_v) vmax = std::max(vmax, std::fabs(v));
    auto upload = [&](const std::vector<double>& values, Buffer& buf, TensorView& view) {
      std::vector<double> laid(uint64_t(Tcap) * kv_stride, std::numeric_limits<double>::quiet_NaN());
      for (uint64_t i = 0; i < T; ++i) std::copy_n(values.begin() + i * kv_row, kv_row, laid.begin() + i * kv_stride);
      const std::vector<uint8_t> bytes = ref::encode_values(q_t, laid);
      buf = Buffer(ctx, std::max<std::size_t>(bytes.size(), 16));
      if (!bytes.empty()) buf.upload(bytes.data(), bytes.size());
      view = TensorView::contiguous(buf, c.q_dtype, {Tcap, Hkv, D});
      view.strides = {int64_t(kv_stride), int64_t(D), 1};
    };
    upload(new_k, new_kbuf, new_kv);
    upload(new_v, new_vbuf, new_vv);
  }

  // Outputs poisoned with NaN bytes, with a guard region after them.
  constexpr uint64_t kGuard = 256;
  const std::size_t oes = dtype_size(c.out_dtype);
  // Token rows out_token_padding elements apart (a strided view).
  const uint64_t out_stride = row + c.out_token_padding;
  const uint64_t out_bytes = uint64_t(Tcap) * row * oes, lse_bytes = uint64_t(Tcap) * Hq * 4;
  // (Rounded up to words: a fill of 4-byte words leaves a buffer's last bytes
  // past its last whole word as they were, not poisoned.)
  const uint64_t out_laid_bytes = (uint64_t(Tcap) * out_stride * oes + 3) / 4 * 4;
  Buffer obuf(ctx, out_laid_bytes + kGuard), lbuf(ctx, lse_bytes + kGuard);
  obuf.fill(0xFFFFFFFFu);
  lbuf.fill(0xFFFFFFFFu);
  TensorView ov = TensorView::contiguous(obuf, c.out_dtype, {Tcap, Hq, D});
  if (c.out_token_padding) ov.strides = {int64_t(out_stride), int64_t(D), 1};
  std::optional<TensorView> lv;
  if (c.with_lse) lv = TensorView::contiguous(lbuf, DType::f32, {Tcap, Hq});

  // The layer's values (as the floats the library gets, for the reference too).
  PagedAttentionParams prm;
  prm.scale = c.scale > 0 ? c.scale : static_cast<float>(1.0 / std::sqrt(double(D)));
  prm.sliding_window = c.sliding_window;
  prm.softcap = c.softcap;
  prm.out_scale = c.out_scale;
  std::vector<float> alibi, sinks, qq_bias;
  uint32_t qq_cols = 0;
  if (c.alibi)
    for (uint32_t h = 0; h < Hq; ++h) alibi.push_back(static_cast<float>(std::exp2(rng.uniform(-8, -2))));
  if (c.sinks)
    for (uint32_t h = 0; h < Hq; ++h) sinks.push_back(static_cast<float>(rng.uniform(-2, 6)));
  if (c.qq_bias && max_q > 0) {
    qq_cols = max_q;
    qq_bias.resize(uint64_t(max_q) * max_q);
    for (auto& b : qq_bias) b = static_cast<float>(rng.uniform(-1, 1));
    for (uint32_t r : c.qq_bias_masked_rows)
      if (r < max_q) std::fill_n(qq_bias.begin() + uint64_t(r) * max_q, max_q, -std::numeric_limits<float>::infinity());
  }

  // The batch's metadata and the parameters in one buffer, each view one
  // word past a 16-byte boundary (views need not be aligned), as an engine
  // keeps them on the device.
  PackedWords packed;
  auto place = [&](const void* data, std::size_t count) { return packed.place(data, count); };
  const VkDeviceSize qsl_at = place(qsl.data(), qsl.size()), lens_at = place(seq_lens.data(), seq_lens.size());
  const VkDeviceSize table_at = place(block_table.data(), block_table.size());
  const VkDeviceSize alibi_at = place(alibi.data(), alibi.size()), sinks_at = place(sinks.data(), sinks.size());
  const VkDeviceSize qq_at = place(qq_bias.data(), qq_bias.size());
  // The fused write's slots: each new token's place in its sequence's blocks
  // (-1 for padding sequences and spare tokens).
  std::vector<int32_t> slots;
  if (c.write_cache) {
    slots.assign(Tcap, -1);
    for (uint32_t s = 0; s < S; ++s)
      for (uint32_t i = 0; i < c.seqs[s].first && c.seqs[s].second > 0; ++i) {
        const uint32_t pos = cached(s) + i;
        slots[qsl[s] + i] = int32_t((base + blocks[s][pos / bs]) * bs + pos % bs);
      }
  }
  const VkDeviceSize slots_at = place(slots.data(), slots.size());
  Buffer meta = packed.upload(ctx);
  PagedAttentionArgs args;
  args.q = qv;
  args.out = ov;
  args.lse = lv;
  args.batch.query_start_loc = TensorView::contiguous(meta, DType::i32, {S + 1}, qsl_at);
  args.batch.seq_lens = TensorView::contiguous(meta, DType::i32, {S}, lens_at);
  args.batch.block_table = TensorView::contiguous(meta, DType::i32, {S, mbps}, table_at);
  if (c.alibi) prm.alibi_slopes = TensorView::contiguous(meta, DType::f32, {Hq}, alibi_at);
  if (c.sinks) prm.sinks = TensorView::contiguous(meta, DType::f32, {Hq}, sinks_at);
  if (!qq_bias.empty()) prm.qq_bias = TensorView::contiguous(meta, DType::f32, {max_q, qq_cols}, qq_at);
  args.params = prm;

  PagedAttentionPlanOptions popt;
  popt.split = c.split;
  popt.prefill = c.prefill;
  popt.num_segments = c.num_segments;
  const PagedAttentionLengths lengths{qsl, seq_lens};
  uint32_t max_len = 0;
  for (int32_t l : seq_lens) max_len = std::max<uint32_t>(max_len, uint32_t(l));
  const PagedAttentionLimits limits{S, Tcap, std::max(max_q, 1u), max_len};
  // prefix_prefill: its own plan (whose attention() is the two-segment
  // paged-attention plan reported below) and arguments.
  std::optional<PrefixPrefillPlan> prefix_plan;
  PrefixPrefillArgs prefix_args;
  if (prefix) {
    PrefixPrefillOptions o;
    o.prefill = c.prefill;
    prefix_plan.emplace(c.replay ? PrefixPrefillPlan(ctx, cfg, Hq, c.q_dtype, limits, o)
                                 : PrefixPrefillPlan(ctx, cfg, Hq, c.q_dtype, lengths, o));
    prefix_args = PrefixPrefillArgs::from(args, new_kv, new_vv);
    prefix_args.skip_decode = c.skip_decode;
    if (c.write_cache) prefix_args.slot_mapping = TensorView::contiguous(meta, DType::i32, {Tcap}, slots_at);
  }
  const PagedAttentionPlan plan = prefix ? prefix_plan->attention()
                                  : c.replay ? PagedAttentionPlan(ctx, cfg, Hq, c.q_dtype, limits, popt)
                                             : PagedAttentionPlan(ctx, cfg, Hq, c.q_dtype, lengths, popt);
  auto run_once = [&](const std::optional<TensorView>& workspace, VkCommandBuffer cmd) {
    if (prefix) {
      PrefixPrefillArgs a = prefix_args;
      a.workspace = workspace;
      if (cmd) prefix_prefill(ctx, *prefix_plan, cache, a, cmd);
      else prefix_prefill(ctx, *prefix_plan, cache, a);
    } else {
      PagedAttentionArgs a = args;
      a.workspace = workspace;
      if (cmd) paged_attention(ctx, plan, cache, a, cmd);
      else paged_attention(ctx, plan, cache, a);
    }
  };
  if (c.garbage_workspace) {
    run_on_garbage_workspace(ctx, c, plan.workspace_bytes(), obuf, lbuf, run_once);
  } else {
    for (uint32_t run = 0; run < std::max<uint32_t>(c.runs, 1); ++run) {
      if (run > 0) {
        obuf.fill(0xFFFFFFFFu);
        lbuf.fill(0xFFFFFFFFu);
      }
      run_once(std::nullopt, VK_NULL_HANDLE);
    }
  }

  std::vector<uint8_t> out_laid(out_laid_bytes + kGuard), lse_raw(lse_bytes + kGuard);
  obuf.download(out_laid.data(), out_laid.size());
  // The rows side by side (the guard after them), and the padding between
  // them checked untouched.
  std::vector<uint8_t> out_raw(out_bytes + kGuard);
  bool padding_written = false;
  for (uint64_t t = 0; t < Tcap; ++t) {
    const auto at = out_laid.begin() + t * out_stride * oes;
    std::copy_n(at, row * oes, out_raw.begin() + t * row * oes);
    padding_written = padding_written || std::any_of(at + row * oes, at + out_stride * oes, [](uint8_t b) { return b != 0xFF; });
  }
  std::copy_n(out_laid.begin() + out_laid_bytes, kGuard, out_raw.begin() + out_bytes);
  if (c.with_lse) lbuf.download(lse_raw.data(), lse_raw.size());

  // The reference, on the pool alone.
  ref::PagedAttentionProblem p;
  p.q = q;
  p.num_tokens = T;
  p.num_q_heads = Hq;
  p.num_kv_heads = Hkv;
  p.head_size = D;
  p.query_start_loc = qsl;
  p.seq_lens = seq_lens;
  p.block_table = ref_table;
  p.max_blocks_per_seq = mbps;
  p.cache = g;
  p.k_cache = std::move(k_img);
  p.v_cache = std::move(v_img);
  p.k_scale = c.k_scale;
  p.v_scale = c.v_scale;
  p.scale = prm.scale;
  p.sliding_window = c.sliding_window;
  p.softcap = c.softcap;
  p.alibi_slopes.assign(alibi.begin(), alibi.end());
  p.sinks.assign(sinks.begin(), sinks.end());
  p.qq_bias.assign(qq_bias.begin(), qq_bias.end());
  p.qq_bias_stride = qq_cols;
  p.new_k = new_k;
  p.new_v = new_v;
  ref::PagedAttentionResult want = ref::paged_attention(p);

  // Compare.
  const PagedAttentionTolerance tol = paged_attention_tolerance(c);
  const bool fp8_out = is_fp8(c.out_dtype);
  const uint64_t batch_out_bytes = uint64_t(T) * row * oes, batch_lse_bytes = uint64_t(T) * Hq * 4;
  std::vector<double> got = ref::decode_values(out_t, std::vector<uint8_t>(out_raw.begin(), out_raw.begin() + batch_out_bytes));
  std::vector<double> got_lse;
  if (c.with_lse) {
    got_lse.resize(uint64_t(T) * Hq);
    for (uint64_t i = 0; i < got_lse.size(); ++i) {
      float f;
      std::memcpy(&f, &lse_raw[i * 4], 4);
      got_lse[i] = f;
    }
  }
  const ref::Format ofmt = fp8_out ? ref::format_of(out_t) : ref::Format::f16;
  const double omax = fp8_out ? ref::max_finite(ofmt) : 0;

  RunResult r;
  r.pass = true;
  uint64_t bad = 0;
  std::vector<uint32_t> seq_of(T);
  for (uint32_t s = 0; s < S; ++s)
    for (int32_t t = qsl[s]; t < qsl[s + 1]; ++t) seq_of[t] = s;
  auto where = [&](uint64_t r_, int64_t d) {
    const uint32_t t = static_cast<uint32_t>(r_ / Hq), h = static_cast<uint32_t>(r_ % Hq);
    const uint32_t s = seq_of[t];
    std::ostringstream o;
    o << "token " << t << " (sequence " << s << " " << c.seqs[s].first << ":" << c.seqs[s].second << ", query "
      << (t - qsl[s]) << "), head " << h;
    if (d >= 0) o << ", dim " << d;
    return o.str();
  };
  auto fail = [&](const std::string& what) {
    ++bad;
    if (r.pass) {
      r.pass = false;
      r.failure = what;
    }
  };
  for (uint64_t rw = 0; rw < uint64_t(T) * Hq; ++rw) {
    if (c.skip_decode && c.seqs[seq_of[rw / Hq]].first == 1) {   // left untouched: still the poison's bytes
      const uint64_t at = rw * D * oes;
      if (std::any_of(out_raw.begin() + at, out_raw.begin() + at + D * oes, [](uint8_t b) { return b != 0xFF; }))
        fail(where(rw, -1) + ": out was written, expected untouched (skip_decode, a sequence of one new token)");
      if (c.with_lse && std::any_of(lse_raw.begin() + rw * 4, lse_raw.begin() + rw * 4 + 4, [](uint8_t b) { return b != 0xFF; }))
        fail(where(rw, -1) + ": lse was written, expected untouched (skip_decode)");
      continue;
    }
    const double* w = &want.out[rw * D];
    const double* gv = &got[rw * D];
    double maxabs = 0;
    for (uint32_t d = 0; d < D; ++d) maxabs = std::max(maxabs, std::fabs(w[d]));
    for (uint32_t d = 0; d < D; ++d) {
      const double gval = fp8_out ? gv[d] * c.out_scale : gv[d];
      const double err = std::fabs(gval - w[d]);
      std::ostringstream o;
      if (maxabs == 0) {   // the row sees no key
        if (gv[d] != 0) {
          o << where(rw, d) << ": out = " << gval << ", expected exactly 0 (the row sees no key)";
          fail(o.str());
        }
        continue;
      }
      bool ok;
      double allowed;
      if (fp8_out) {
        const double e = std::clamp(w[d] / c.out_scale, -omax, omax);
        allowed = ref::ulp_at(ofmt, e) + tol.row_atol * maxabs / c.out_scale;
        ok = std::fabs(gv[d] - e) <= allowed;
        allowed *= c.out_scale;
      } else {
        allowed = tol.row_atol * maxabs + tol.rtol * std::fabs(w[d]) + tol.floor;
        ok = err <= allowed;
      }
      if (std::isfinite(err)) {
        r.max_abs_err = std::max(r.max_abs_err, err);
        r.max_rel_err = std::max(r.max_rel_err, err / maxabs);
      }
      if (!ok) {
        o << where(rw, d) << ": out = " << gval << ", reference " << w[d] << " (error " << err << ", allowed "
          << allowed << ")";
        fail(o.str());
      }
    }
    if (c.with_lse) {
      const double wl = want.lse[rw], gl = got_lse[rw];
      std::ostringstream o;
      if (wl == -kInf) {
        if (!(gl == -kInf)) {
          o << where(rw, -1) << ": lse = " << gl << ", expected -inf (the row sees no key and has no sink)";
          fail(o.str());
        }
      } else {
        const double allowed = tol.lse_atol + 0x1p-20 * std::fabs(wl);
        if (!(std::fabs(gl - wl) <= allowed)) {
          o << where(rw, -1) << ": lse = " << gl << ", reference " << wl << " (allowed error " << allowed << ")";
          fail(o.str());
        }
      }
    }
  }
  if (padding_written) fail("out was written between its token rows (out_token_padding)");
  // Past the batch's rows (a replay plan's spare tokens) and past the views:
  // untouched.
  for (uint64_t i = batch_out_bytes; i < out_raw.size(); ++i)
    if (out_raw[i] != 0xFF) {
      fail("out buffer byte " + std::to_string(i) + " past the batch's " + std::to_string(T) + " tokens (" +
           std::to_string(batch_out_bytes) + " bytes) was written");
      break;
    }
  for (uint64_t i = c.with_lse ? batch_lse_bytes : 0; i < lse_raw.size() && c.with_lse; ++i)
    if (lse_raw[i] != 0xFF) {
      fail("lse buffer byte " + std::to_string(i) + " past the batch's tokens was written");
      break;
    }
  // The fused write: every new token's K and V in its slot, rounded as
  // write_kv_cache rounds (ops.hpp).
  if (c.write_cache) {
    std::vector<int64_t> pool_slots(T, -1);
    for (uint32_t t = 0; t < T; ++t)
      if (slots[t] >= 0) pool_slots[t] = int64_t(slots[t]) - int64_t(base) * bs;
    const std::vector<uint8_t> got_k = cache.read_blocks(KvPart::key, base, pool);
    const std::vector<uint8_t> got_v = cache.read_blocks(KvPart::value, base, pool);
    const double slack = fp8_cache ? 0x1p-20 : 0.0;   // f32 x * (1 / scale), as write_kv_cache's runner allows
    for (const auto& e : ref::expected_kv_writes(g, new_k, new_v, pool_slots, ks, vs)) {
      uint32_t bits = 0;
      std::memcpy(&bits, &(e.is_value ? got_v : got_k)[e.byte_offset], ces);
      if (!ref::is_correct_rounding(cfmt, bits, e.exact, slack)) {
        std::ostringstream o;
        o << (e.is_value ? "V" : "K") << " cache byte " << e.byte_offset << " (fused write): stored bits 0x" << std::hex << bits
          << std::dec << ", expected " << ref::decode(cfmt, ref::encode(cfmt, e.exact)) << " from " << e.exact;
        fail(o.str());
        break;
      }
    }
  }
  if (bad > 1) r.failure += " (" + std::to_string(bad) + " mismatches in all)";

  std::ostringstream tt;
  tt << "|out - ref| <= " << tol.row_atol << " * max|ref row|";
  if (fp8_out) tt << " / out_scale + one " << dtype_name(c.out_dtype) << " ulp, in stored units";
  else tt << " + " << tol.rtol << " * |ref|";
  if (c.with_lse) tt << "; |lse - ref| <= " << tol.lse_atol << " + 2^-20 |ref|";
  tt << "; rows that see no key exactly 0";
  r.tolerance = tt.str();

  if (outputs) {
    outputs->out = got;
    if (fp8_out)
      for (auto& x : outputs->out) x *= c.out_scale;
    outputs->lse = got_lse;
    outputs->ref_out = std::move(want.out);
    outputs->ref_lse = c.with_lse ? std::move(want.lse) : std::vector<double>{};
    outputs->split = plan.split();
    outputs->num_segments = plan.num_segments();
    outputs->merge_last = plan.data().schedule.merge_last;
  }

  if (c.timing_repetitions > 0 && ctx.capabilities().timestamp_period_ns > 0) {
    if (c.before_timing) c.before_timing();
    Buffer workspace;
    std::optional<TensorView> ws;
    if (plan.split()) {
      workspace = Buffer(ctx, plan.workspace_bytes());
      workspace.fill(0u, 0, std::min(plan.workspace_bytes(), kPagedAttentionWorkspaceCounterBytes));
      ws = TensorView::contiguous(workspace, DType::f32, {int64_t(plan.workspace_bytes() / 4)});
    }
    r.gpu_us = median_time_us(ctx, [&](VkCommandBuffer cmd) { run_once(ws, cmd); }, c.timing_repetitions);
  }
  // Bytes: the K and V a kernel must read (keys some row of the sequence can
  // see: the window cuts the front), q, out and lse.
  double kv_tokens = 0;
  for (uint32_t s = 0; s < S; ++s) {
    const int64_t len = c.seqs[s].second, ctx_len = len - int64_t(c.seqs[s].first);
    int64_t first = 0;
    if (c.sliding_window > 0 && len > 0) first = std::max<int64_t>(0, ctx_len - c.sliding_window + 1);
    if (c.seqs[s].first > 0) kv_tokens += double(len - first);
  }
  r.bytes = kv_tokens * Hkv * D * 2 * ces + double(T) * row * (dtype_size(c.q_dtype) + oes) +
            (c.with_lse ? double(T) * Hq * 4 : 0);

  std::ostringstream s;
  s << op_name << ": " << S << " sequences (query_len:seq_len " << seqs_text(c.seqs) << "), " << T << " tokens, "
    << Hq << "/" << Hkv << " heads x " << D << ", " << dtype_name(c.cache_dtype) << " cache " << layout_name(c.layout)
    << " (" << distinct << " used of " << num_blocks << " blocks of " << bs << "), q " << dtype_name(c.q_dtype)
    << " -> out " << dtype_name(c.out_dtype);
  if (c.sliding_window) s << ", window " << c.sliding_window;
  if (c.softcap > 0) s << ", softcap " << c.softcap;
  if (c.alibi) s << ", alibi";
  if (c.sinks) s << ", sinks";
  if (c.qq_bias) s << ", qq_bias";
  if (c.with_lse) s << ", lse";
  if (c.skip_decode) s << ", skip_decode";
  if (c.write_cache) s << ", fused cache write";
  if (c.kv_token_padding) s << ", new K/V rows padded by " << c.kv_token_padding;
  s << ", " << (plan.split() ? "split into " + std::to_string(plan.num_segments()) + " segments" : std::string("not split"))
    << ", " << plan.num_workgroups() << " workgroups of " << plan.workgroup_size()
    << (plan.data().schedule.stage_halves ? " staging half tiles" : "")
    << (plan.routes_prefill() ? ", prefill kernel for >= " + std::to_string(plan.prefill_min_rows()) + " rows" : std::string())
    << (c.replay ? ", replay plan" : "")
    << ", seed " << c.seed;
  r.summary = s.str();
  return r;
}

}  // namespace vkattn::tool
