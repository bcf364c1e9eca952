// `vkattn bench decode`: paged attention for decode batches (one new token per
// sequence) over short to long contexts, plus one varlen mixed batch (decode
// and chunked-prefill sequences together). Memory-bound: the figure is the K/V
// (plus q and out) bytes the kernel must read and write per run.
#include <vkattn/vkattn.hpp>
#include <vkattn/paged_attention.hpp>
#include <vkattn_ref/random.hpp>
#include <vkattn_ref/tensor_data.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>

#include "bench/suites.hpp"
#include "runners/paged_attention_runner.hpp"

namespace vkattn::tool {

namespace {

using Seqs = SeqList;
using Shape = AttentionShape;

// Rotating copies: one cache holding `copies` disjoint sets of blocks, one
// block table (and one slice of q and out) per copy; the lengths, and so the
// plan, are the same for all.
struct DecodeInputs {
  std::unique_ptr<PagedKvCache> cache;
  std::unique_ptr<PagedAttentionPlan> plan;
  std::unique_ptr<PrefixPrefillPlan> prefix_plan;   // prefix_prefill cases (plan is its attention())
  std::unique_ptr<Buffer> q, out, meta, workspace, new_kv;
  std::vector<PagedAttentionArgs> args;   // per copy
  std::vector<PrefixPrefillArgs> prefix_args;
};

uint32_t cdiv(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

}  // namespace

AttentionShape DecodeOptions::shape(AttentionShape sh) const {
  if (q_heads) sh.q_heads = q_heads;
  if (kv_heads) sh.kv_heads = kv_heads;
  sh.dtype = cache_dtype;
  sh.q_dtype = dtype;
  sh.layout = layout;
  sh.prefill = prefill;
  sh.segments = segments;
  return sh;
}

std::string DecodeOptions::name_suffix() const {
  std::string variant;
  auto note = [&](const std::string& s) { variant += (variant.empty() ? " (" : ", ") + s; };
  if (head_size) note("head size " + std::to_string(head_size));
  if (q_heads || kv_heads)
    note(std::to_string(q_heads ? q_heads : 32) + "/" + std::to_string(kv_heads ? kv_heads : 8) + " heads");
  if (query_len != 1) note(std::to_string(query_len) + "-token queries");
  if (dtype != DType::f16) note(std::string(dtype_name(dtype)) + " q");
  if (cache_dtype != DType::f16) note(std::string(dtype_name(cache_dtype)) + " cache");
  if (layout != KvLayout::nhd) note(std::string(layout_name(layout)));
  if (block_size != 16) note("block " + std::to_string(block_size));
  if (prefill != PrefillKernel::automatic) note(prefill == PrefillKernel::on ? "prefill kernel" : "decode kernel");
  if (segments) note(std::to_string(segments) + (segments == 1 ? " segment" : " segments"));
  return variant.empty() ? variant : variant + ")";
}

bool attention_case(Context& ctx, std::vector<BenchOp>& ops, const std::string& name, const Seqs& seqs, const Shape& sh,
                    const Seqs& verify_seqs, std::map<std::string, std::string> params, const char* bound) {
  const uint32_t Hq = sh.q_heads, Hkv = sh.kv_heads, D = sh.head_size, bs = sh.block_size;
  const uint64_t es = dtype_size(sh.dtype);
  uint32_t tokens = 0, blocks_per_copy = 0;
  double kv_tokens = 0, pairs = 0;
  for (auto [q, s] : seqs) {
    tokens += q;
    blocks_per_copy += cdiv(s, bs);
    kv_tokens += s;
    for (uint32_t i = 0; i < q; ++i) pairs += s - q + i + 1;   // keys each causal row sees
  }
  const uint64_t kv_bytes = uint64_t(kv_tokens) * Hkv * D * 2 * es;
  const uint64_t qo_bytes = uint64_t(tokens) * Hq * D * 2;   // 16-bit q and out, each
  uint32_t copies = rotation_copies(kv_bytes + 2 * qo_bytes);
  const uint64_t block_bytes = uint64_t(bs) * Hkv * D * es;
  const uint64_t budget = ctx.capabilities().device_local_bytes * 7 / 10;
  if (budget > 0) {
    while (copies > 1 && 2 * block_bytes * blocks_per_copy * copies > budget) --copies;
    if (2 * block_bytes * blocks_per_copy > budget) {
      std::cerr << "bench: skipping '" << name << "': its cache needs "
                << (2 * block_bytes * blocks_per_copy >> 20) << " MiB, the device has "
                << (ctx.capabilities().device_local_bytes >> 20) << " MiB\n";
      return false;
    }
  }

  auto in = std::make_shared<DecodeInputs>();
  KvCacheConfig cfg{.num_blocks = blocks_per_copy * copies, .block_size = bs, .num_kv_heads = Hkv, .head_size = D,
                    .dtype = sh.dtype, .layout = sh.layout, .k_scale = 0.05f, .v_scale = 0.05f};
  in->cache = std::make_unique<PagedKvCache>(ctx, cfg);
  // Timing does not depend on the values: fill on the device with finite
  // values (about 0.2 and 0.1 in f16 or bf16) or fp8 bytes instead of uploading gigabytes.
  in->cache->fill(sh.dtype == DType::bf16 ? 0x3DCD3E4Du : es == 2 ? 0x2E663266u : 0x2A2C2A2Cu);
  // Blocks in random order across the whole cache, dealt out to the copies.
  ref::Rng rng(uint64_t(tokens) * 7919 + blocks_per_copy);
  std::vector<uint32_t> perm = ref::random_permutation(rng, cfg.num_blocks);
  uint32_t max_blocks = 1;
  std::vector<int32_t> qsl{0}, lens;
  for (auto [q, s] : seqs) {
    max_blocks = std::max(max_blocks, cdiv(s, bs));
    qsl.push_back(qsl.back() + int32_t(q));
    lens.push_back(int32_t(s));
  }
  if (sh.prefix_prefill) {
    PrefixPrefillOptions o;
    o.prefill = sh.prefill;
    in->prefix_plan = std::make_unique<PrefixPrefillPlan>(ctx, cfg, Hq, sh.q_dtype, PagedAttentionLengths{qsl, lens}, o);
    in->plan = std::make_unique<PagedAttentionPlan>(in->prefix_plan->attention());
  } else {
    PagedAttentionPlanOptions popt;
    popt.prefill = sh.prefill;
    if (sh.segments == 1) {
      popt.split = SplitKv::off;   // one segment: unsplit, no reduce
    } else if (sh.segments) {   // (the plan's workspace is allocated below, as large as it says)
      popt.split = SplitKv::on;
      popt.num_segments = sh.segments;
      popt.workspace_bytes = 1ull << 31;
    }
    in->plan = std::make_unique<PagedAttentionPlan>(ctx, cfg, Hq, sh.q_dtype, PagedAttentionLengths{qsl, lens}, popt);
  }
  const int64_t S = int64_t(seqs.size()), T = tokens;
  // Metadata: query_start_loc and seq_lens, then one block table per copy.
  const uint64_t table_words = uint64_t(S) * max_blocks;
  std::vector<int32_t> words(qsl.begin(), qsl.end());
  words.insert(words.end(), lens.begin(), lens.end());
  for (uint32_t c = 0; c < copies; ++c) {
    std::vector<int32_t> table(table_words, 0);
    uint64_t next = uint64_t(c) * blocks_per_copy;
    for (std::size_t i = 0; i < seqs.size(); ++i)
      for (uint32_t k = 0; k < cdiv(seqs[i].second, bs); ++k) table[i * max_blocks + k] = int32_t(perm[next++]);
    words.insert(words.end(), table.begin(), table.end());
  }
  in->meta = std::make_unique<Buffer>(ctx, words.size() * 4);
  in->meta->upload(words.data(), words.size() * 4);
  const ref::ElemType q_elem = sh.q_dtype == DType::bf16 ? ref::ElemType::bf16 : ref::ElemType::f16;
  std::vector<uint8_t> q = ref::encode_values(q_elem, ref::random_values(rng, uint64_t(tokens) * Hq * D * copies, 2.0));
  in->q = std::make_unique<Buffer>(ctx, std::max<uint64_t>(q.size(), 16));
  in->q->upload(q.data(), q.size());
  in->out = std::make_unique<Buffer>(ctx, std::max<uint64_t>(qo_bytes * copies, 16));
  // prefix_prefill: the new tokens' K and V (one pair per copy), finite values.
  const uint64_t new_kv_bytes = uint64_t(tokens) * Hkv * D * 2;
  if (sh.prefix_prefill) {
    in->new_kv = std::make_unique<Buffer>(ctx, std::max<uint64_t>(2 * new_kv_bytes * copies, 16));
    in->new_kv->fill(sh.q_dtype == DType::bf16 ? 0x3DCD3E4Du : 0x2E663266u);
  }
  if (in->plan->split()) {
    in->workspace = std::make_unique<Buffer>(ctx, in->plan->workspace_bytes());
    in->workspace->fill(0u, 0, std::min(in->plan->workspace_bytes(), kPagedAttentionWorkspaceCounterBytes));   // its arrival counters
  }
  for (uint32_t c = 0; c < copies; ++c) {
    PagedAttentionArgs a;
    a.q = TensorView::contiguous(*in->q, sh.q_dtype, {T, Hq, D}, c * qo_bytes);
    a.out = TensorView::contiguous(*in->out, sh.q_dtype, {T, Hq, D}, c * qo_bytes);
    a.batch.query_start_loc = TensorView::contiguous(*in->meta, DType::i32, {S + 1});
    a.batch.seq_lens = TensorView::contiguous(*in->meta, DType::i32, {S}, (S + 1) * 4);
    a.batch.block_table = TensorView::contiguous(*in->meta, DType::i32, {S, max_blocks}, (2 * S + 1 + c * table_words) * 4);
    a.params.scale = static_cast<float>(1.0 / std::sqrt(double(D)));
    if (in->workspace) a.workspace = TensorView::contiguous(*in->workspace, DType::f32, {int64_t(in->workspace->size() / 4)});
    in->args.push_back(a);
    if (sh.prefix_prefill) {
      in->prefix_args.push_back(
          PrefixPrefillArgs::from(a, TensorView::contiguous(*in->new_kv, sh.q_dtype, {T, Hkv, D}, 2 * c * new_kv_bytes),
                                  TensorView::contiguous(*in->new_kv, sh.q_dtype, {T, Hkv, D}, (2 * c + 1) * new_kv_bytes)));
    }
  }

  const PagedAttentionPlan& p0 = *in->plan;
  params.insert({{"q_heads", std::to_string(Hq)}, {"kv_heads", std::to_string(Hkv)}, {"head_size", std::to_string(D)},
                 {"block_size", std::to_string(bs)}, {"cache", std::string(dtype_name(sh.dtype))},
                 {"layout", std::string(layout_name(sh.layout))}, {"dtype", std::string(dtype_name(sh.q_dtype))}, {"copies", std::to_string(copies)},
                 {"split", p0.split() ? "on" : "off"}, {"segments", std::to_string(p0.num_segments())},
                 {"workgroups", std::to_string(p0.num_workgroups())}, {"path", std::string(path_name(p0.path()))},
                 {"workgroup_size", std::to_string(p0.workgroup_size())},
                 {"prefill_kernel", p0.routes_prefill() ? "rows >= " + std::to_string(p0.prefill_min_rows()) : "no"}});
  // The float64 reference checks a smaller proxy of the same shape: which one.
  std::string proxy;
  for (auto [q, s] : verify_seqs) proxy += (proxy.empty() ? "" : " ") + std::to_string(q) + "/" + std::to_string(s);
  params.insert({"verified_on", "q/seq_len " + proxy});
  BenchOp op;
  op.info.name = name;
  // Asked for the prefill kernel, but it does not run here (the scalar path, or
  // a head size with no tile of it, 256): say so.
  if (sh.prefill == PrefillKernel::on && !p0.routes_prefill()) op.info.name += " [prefill kernel not used here]";
  if (sh.says_decode_kernel && sh.prefill == PrefillKernel::automatic && !p0.routes_prefill())
    op.info.name += " [decode kernel]";
  op.info.params = std::move(params);
  op.info.bytes = double(kv_bytes) + 2.0 * qo_bytes;
  op.info.flops = 4.0 * Hq * D * pairs;
  op.info.bound = bound;
  op.record = [&ctx, in, copies](VkCommandBuffer cmd, uint32_t rep) {
    if (in->prefix_plan) prefix_prefill(ctx, *in->prefix_plan, *in->cache, in->prefix_args[rep % copies], cmd);
    else paged_attention(ctx, *in->plan, *in->cache, in->args[rep % copies], cmd);
  };
  // Checked once against the float64 reference at a size it handles quickly,
  // with the same shape and the same split decision as the timed plan.
  const bool split = p0.split();
  const uint32_t segments = p0.num_segments();
  const bool p0_prefill = p0.routes_prefill();
  op.verify = [&ctx, sh, verify_seqs, split, segments, p0_prefill]() {
    PagedAttentionCase pc;
    pc.seqs = verify_seqs;
    pc.num_q_heads = sh.q_heads;
    pc.num_kv_heads = sh.kv_heads;
    pc.head_size = sh.head_size;
    pc.block_size = sh.block_size;
    pc.cache_dtype = sh.dtype;
    pc.q_dtype = pc.out_dtype = sh.q_dtype;
    pc.layout = sh.layout;
    pc.prefix_prefill = sh.prefix_prefill;
    // The timed plan's kernels: the proxy is smaller, and automatic would choose by its size.
    pc.prefill = p0_prefill ? PrefillKernel::on : PrefillKernel::off;
    if (!sh.prefix_prefill) {   // (prefix_prefill's 2 segments are its own)
      pc.split = split ? SplitKv::on : SplitKv::off;
      pc.num_segments = split ? std::min<uint32_t>(segments, 8) : 0;
    }
    pc.timing_repetitions = 0;
    auto r = run_paged_attention(ctx, pc);
    return Verification{r.pass, r.max_abs_err, r.max_rel_err, r.failure};
  };
  ops.push_back(std::move(op));
  return true;
}

std::vector<BenchOp> decode_cases(Context& ctx, bool quick, const DecodeOptions& o) {
  std::vector<BenchOp> ops;
  // quick: tiny sizes a CPU device runs in a blink; otherwise the sweep.
  const uint32_t d = o.head_size ? o.head_size : quick ? 64 : 128;
  const Shape sh = o.shape(quick ? Shape{8, 2, d, o.block_size} : Shape{32, 8, d, o.block_size});
  const std::string variant = o.name_suffix();
  std::vector<uint32_t> batches = quick ? std::vector<uint32_t>{1, 4}
                                        : std::vector<uint32_t>(std::begin(o.kSweepBatches), std::end(o.kSweepBatches));
  std::vector<uint32_t> ctxs = quick ? std::vector<uint32_t>{100, 300}
                                     : std::vector<uint32_t>(std::begin(o.kSweepContexts), std::end(o.kSweepContexts));
  if (!o.batches.empty()) batches = o.batches;
  if (!o.contexts.empty()) ctxs = o.contexts;
  const uint32_t verify_len = quick ? 150 : 1100;
  const uint32_t ql = o.query_len;   // each sequence's new tokens, among its L
  for (uint32_t B : batches)
    for (uint32_t L : ctxs) {
      if (L < ql) continue;   // (the flags' check says so before)
      Seqs seqs(B, {ql, L});
      // Verification: up to three sequences of (capped) lengths around L.
      const uint32_t v = std::max(ql, std::min(L, verify_len));
      Seqs vs = {{ql, v}};
      if (B > 1) vs.push_back({ql, std::max(ql, v - 7)});
      if (B > 2) vs.push_back({ql, std::max(ql, v / 2 + 3)});
      attention_case(ctx, ops, "B=" + std::to_string(B) + " ctx=" + std::to_string(L) + variant, seqs, sh, vs,
                  {{"batch", std::to_string(B)}, {"ctx", std::to_string(L)}, {"query_len", std::to_string(ql)}}, "memory");
    }
  // A varlen batch: decode rows next to chunked-prefill rows.
  const Seqs mixed = quick ? Seqs{{1, 133}, {5, 18}, {17, 63}, {1, 250}}
                           : Seqs{{1, 1328}, {5, 18}, {129, 463}, {1, 4096}, {64, 2048}};
  const Seqs mixed_verify = quick ? mixed : Seqs{{1, 1328}, {5, 18}, {33, 463}, {1, 1100}, {16, 600}};
  uint32_t max_ctx = 0;
  for (auto [q, s] : mixed) max_ctx = std::max(max_ctx, s);
  DecodeOptions varlen = o;   // (its own query lengths)
  varlen.query_len = 1;
  attention_case(ctx, ops, "varlen " + std::to_string(mixed.size()) + " seqs" + varlen.name_suffix(), mixed, sh, mixed_verify,
              {{"batch", std::to_string(mixed.size())}, {"ctx", std::to_string(max_ctx)}, {"query_len", "mixed"}}, "memory");
  return ops;
}

}  // namespace vkattn::tool
