// prefix_prefill against the float64 reference (seed 000's semantics): new
// tokens over a paged context and causally over their own K/V tensors. The
// runner (tools/runners/paged_attention_runner.cpp) leaves the new tokens'
// cache slots NaN, so a kernel that read them from the cache would fail; it
// poisons the outputs and checks them, skip_decode rows byte for byte.
// Covered: layouts nhd, hnd and split; fp8 caches (their scales apply to the
// context only); window, sinks, ALiBi, softcap, LSE; skip_decode; the fused
// cache write; block size 48; GQA 12/3, 1 and 8; head sizes 64 to 256;
// contexts of 0 and ending mid-block; query_len 0; new K/V rows that are not
// 16-byte aligned; replay plans; agreement with paged_attention after the new
// tokens are written; bad input; device-side reports of the recorded form
// naming prefix_prefill.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "attention_cases.hpp"
#include "device_batch.hpp"
#include "own_commands.hpp"
#include "runners/paged_attention_runner.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

using tool::PagedAttentionCase;
using Seqs = std::vector<std::pair<uint32_t, uint32_t>>;

// A decode row, a short chunk over a context that ends mid-block, a longer
// one, a padding sequence, a prompt with no context and a sequence with no
// new token.
const Seqs kBatch = {{1, 40}, {5, 18}, {37, 100}, {4, 0}, {3, 3}, {0, 9}};

bool on_cpu(Context& ctx) { return ctx.capabilities().device_type == "CPU"; }

PagedAttentionCase make(const Seqs& seqs, uint32_t hq, uint32_t hkv, uint32_t d, uint32_t bs, DType cache,
                        KvLayout layout, uint64_t seed) {
  PagedAttentionCase c = attention_case(seqs, hq, hkv, d, bs, cache, layout, seed);
  c.prefix_prefill = true;
  return c;
}

struct Combo {
  std::string name;
  PagedAttentionCase c;
  bool gpu_only = false;
};
void PrintTo(const Combo& c, std::ostream* os) { *os << c.name; }

std::vector<Combo> combos() {
  std::vector<Combo> v;
  auto add = [&](std::string name, PagedAttentionCase c, bool gpu_only = false) {
    v.push_back({std::move(name), std::move(c), gpu_only});
  };
  add("nhd_f16_h8x2_d64", make(kBatch, 8, 2, 64, 16, DType::f16, KvLayout::nhd, 1));
  {
    auto c = make(kBatch, 12, 3, 64, 48, DType::fp8_e4m3, KvLayout::split, 2);
    c.sinks = true;
    c.with_lse = true;
    add("split_fp8e4m3_h12x3_bs48_sinks_lse", c);
  }
  {
    auto c = make(kBatch, 8, 1, 128, 16, DType::fp8_e5m2, KvLayout::hnd, 3);
    c.sliding_window = 20;
    c.alibi = true;
    c.softcap = 20;
    c.skip_decode = true;
    c.with_lse = true;
    add("hnd_fp8e5m2_gqa8_d128_window_alibi_softcap_skip_decode", c);
  }
  {
    auto c = make(kBatch, 4, 4, 256, 16, DType::bf16, KvLayout::nhd, 4);
    c.q_dtype = DType::bf16;
    c.write_cache = true;
    c.kv_token_padding = 3;   // rows not on 16-byte words: narrow loads
    c.out_dtype = DType::fp8_e4m3;
    c.out_scale = 0.5f;
    add("bf16_gqa1_d256_fused_write_unaligned_kv_fp8_out", c);
  }
  {
    auto c = make(kBatch, 8, 2, 64, 48, DType::fp8_e4m3, KvLayout::split, 5);
    c.write_cache = true;
    c.skip_decode = true;
    c.replay = true;
    c.spare_tokens = 7;
    add("split_fp8e4m3_bs48_fused_write_skip_decode_replay", c);
  }
  // Full-size shapes: the prefill kernel (automatic on coopmat2: 136
  // 128-row workgroups; asked for on KHR) and the decode kernel in one batch.
  {
    const Seqs seqs = {{300, 700}, {129, 129}, {1, 2000}, {64, 1500}, {1, 33}, {40, 300}};
    auto c = make(seqs, 32, 8, 128, 16, DType::f16, KvLayout::nhd, 6);
    c.sliding_window = 256;
    c.with_lse = true;
    add("gpu_h32x8_d128_window_lse", c, true);
    c.prefill = PrefillKernel::on;
    c.cache_dtype = DType::fp8_e4m3;
    c.layout = KvLayout::split;
    c.sinks = true;
    c.seed = 7;
    add("gpu_prefill_kernel_fp8_split_sinks", c, true);
    c.prefill = PrefillKernel::on;
    c.cache_dtype = DType::bf16;
    c.q_dtype = c.out_dtype = DType::bf16;
    c.layout = KvLayout::hnd;
    c.sinks = false;
    c.skip_decode = true;
    c.write_cache = true;
    c.seed = 8;
    add("gpu_prefill_kernel_bf16_hnd_skip_decode_fused_write", c, true);
    // bf16 q over an fp8 cache: the new-token pass's tiles (bf16, in a module
    // specialized for the fp8 cache) staged as loaded, the context pass's
    // converted (paged_prefill.comp's STAGE_PART); either staged as the other
    // gives garbage.
    c.cache_dtype = DType::fp8_e4m3;
    c.seed = 12;
    add("gpu_prefill_kernel_bf16_q_e4m3_cache_hnd_skip_decode_fused_write", c, true);
    // bf16 q over e4m3 on NHD: the sinks, ALiBi, softcap and the LSE, with
    // scales far from 1 (keys mostly e4m3 subnormals at k_scale 300), in the
    // context pass's partial results and their merge.
    c.layout = KvLayout::nhd;
    c.skip_decode = false;
    c.write_cache = false;
    c.sinks = true;
    c.alibi = true;
    c.softcap = 30;
    c.k_scale = 300.0f;
    c.v_scale = 0.003f;
    c.seed = 13;
    add("gpu_prefill_kernel_bf16_q_e4m3_cache_nhd_sinks_alibi_softcap_lse_scales", c, true);
  }
  // The prefill kernel's two passes (the context's keys, then the new
  // tokens' merged with them) with narrow new-K/V loads, a block size that
  // is no power of two, GQA 5, and contexts that end on a 64-key tile's edge
  // (256), inside a tile (1001, 15) or at 0, beside a decode row.
  {
    const Seqs seqs = {{200, 456}, {130, 1131}, {96, 96}, {1, 700}, {45, 60}};
    auto c = make(seqs, 20, 4, 128, 48, DType::f16, KvLayout::nhd, 9);
    c.prefill = PrefillKernel::on;
    c.kv_token_padding = 3;
    c.alibi = true;
    c.softcap = 30;
    c.sinks = true;
    c.with_lse = true;
    add("gpu_prefill_kernel_passes_gqa5_bs48_unaligned_kv_alibi_softcap_sinks_lse", c, true);
    // The same over an fp8 cache, whose context pass decodes it; the new
    // tokens' narrow loads are staged in the prefill kernel's rolled loop.
    c.cache_dtype = DType::fp8_e5m2;
    c.kv_token_padding = 5;
    c.alibi = false;
    c.seed = 10;
    add("gpu_prefill_kernel_e5m2_passes_unaligned_kv", c, true);
    // Head size 256 (pairs of subgroups, 16-key tiles), two passes.
    c = make(seqs, 16, 4, 256, 16, DType::f16, KvLayout::hnd, 11);
    c.prefill = PrefillKernel::on;
    c.kv_token_padding = 3;
    c.sliding_window = 500;
    c.write_cache = true;
    c.with_lse = true;
    add("gpu_prefill_kernel_passes_d256_hnd_unaligned_kv_window_fused_write_lse", c, true);
  }
  return v;
}

class PrefixPrefillCombos : public VkTest, public ::testing::WithParamInterface<Combo> {};

TEST_P(PrefixPrefillCombos, MatchesReference) {
  const Combo& p = GetParam();
  if (p.gpu_only && on_cpu(ctx())) GTEST_SKIP() << "full-size shape: GPUs only";
  auto r = tool::run_paged_attention(ctx(), p.c);
  EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure << "\ntolerance: " << r.tolerance;
  EXPECT_NE(r.summary.find("prefix_prefill"), std::string::npos) << r.summary;
}

INSTANTIATE_TEST_SUITE_P(Shapes, PrefixPrefillCombos, ::testing::ValuesIn(combos()),
                         [](const auto& info) { return info.param.name; });

// ---- a small batch built by hand: agreement, the fused write, bad input ----

// Two sequences over an f16 cache of 8 blocks of 16 (2 kv heads, head size
// 64, 4 q heads): sequence 0 has 20 cached tokens (blocks 3, 4) and 3 new
// ones; sequence 1 has 5 cached (block 6) and 4 new. The new tokens' slots
// follow their context in the same blocks.
class PrefixPrefillSmall : public VkTest {
 protected:
  static constexpr int64_t T = 7, Hq = 4, Hkv = 2, D = 64;
  void SetUp() override {
    VkTest::SetUp();
    cache_ = std::make_unique<PagedKvCache>(ctx(), cfg_);
    // Finite, varied values: the bytes of a counter, as f16 in [0.5, 2).
    std::vector<uint16_t> k(uint64_t(cfg_.num_blocks) * 16 * Hkv * D), v(k.size());
    for (size_t i = 0; i < k.size(); ++i) {
      k[i] = uint16_t(0x3800 + (i * 37) % 0x800);
      v[i] = uint16_t(0x3800 + (i * 91) % 0x800);
    }
    cache_->write_blocks(KvPart::key, 0, {reinterpret_cast<const uint8_t*>(k.data()), k.size() * 2});
    cache_->write_blocks(KvPart::value, 0, {reinterpret_cast<const uint8_t*>(v.data()), v.size() * 2});
    q_ = Buffer(ctx(), T * Hq * D * 2);
    new_k_ = Buffer(ctx(), T * Hkv * D * 2);
    new_v_ = Buffer(ctx(), T * Hkv * D * 2);
    std::vector<uint16_t> words(T * Hq * D);
    for (size_t i = 0; i < words.size(); ++i) words[i] = uint16_t(0x3400 + (i * 53) % 0xC00);
    q_.upload(words.data(), words.size() * 2);
    words.resize(T * Hkv * D);
    for (size_t i = 0; i < words.size(); ++i) words[i] = uint16_t(0xB800 + (i * 29) % 0x900);
    new_k_.upload(words.data(), words.size() * 2);
    for (size_t i = 0; i < words.size(); ++i) words[i] = uint16_t(0x3A00 + (i * 71) % 0x700);
    new_v_.upload(words.data(), words.size() * 2);
    out_ = Buffer(ctx(), T * Hq * D * 4);
    out_.fill(0xFFFFFFFFu);
    slots_ = Buffer(ctx(), T * 4);
    // The new tokens' slots: sequence 0's positions 20-22 in block 4,
    // sequence 1's 5-8 in block 6.
    const int32_t slots[T] = {4 * 16 + 4, 4 * 16 + 5, 4 * 16 + 6, 6 * 16 + 5, 6 * 16 + 6, 6 * 16 + 7, 6 * 16 + 8};
    slots_.upload(slots, sizeof(slots));
    batch_ = std::make_unique<DeviceBatch>(ctx(), std::vector<int32_t>{0, 3, 7}, std::vector<int32_t>{23, 9},
                                           std::vector<int32_t>{3, 4, 6, 0}, 2);
  }
  void TearDown() override {
    batch_.reset();
    cache_.reset();
    for (Buffer* b : {&q_, &new_k_, &new_v_, &out_, &slots_}) *b = Buffer();
    VkTest::TearDown();
  }
  PrefixPrefillPlan plan() { return PrefixPrefillPlan(ctx(), cfg_, Hq, DType::f16, batch_->lengths()); }
  PrefixPrefillArgs args(DType out = DType::f16) {
    PrefixPrefillArgs a;
    a.q = TensorView::contiguous(q_, DType::f16, {T, Hq, D});
    a.key = TensorView::contiguous(new_k_, DType::f16, {T, Hkv, D});
    a.value = TensorView::contiguous(new_v_, DType::f16, {T, Hkv, D});
    a.out = TensorView::contiguous(out_, out, {T, Hq, D});
    a.batch = batch_->view();
    a.params.scale = 0.125f;
    return a;
  }
  TensorView slots() { return TensorView::contiguous(slots_, DType::i32, {T}); }

  KvCacheConfig cfg_{.num_blocks = 8, .block_size = 16, .num_kv_heads = 2, .head_size = 64};
  std::unique_ptr<PagedKvCache> cache_;
  std::unique_ptr<DeviceBatch> batch_;
  Buffer q_, new_k_, new_v_, out_, slots_;
};

TEST_F(PrefixPrefillSmall, FusedWriteStoresWhatWriteKvCacheStoresAndAgreesWithPagedAttention) {
  // Cache A: prefix_prefill with the fused write. Cache B: the same start,
  // then write_kv_cache.
  PagedKvCache other(ctx(), cfg_);
  for (KvPart part : {KvPart::key, KvPart::value}) other.write_blocks(part, 0, cache_->read_blocks(part, 0, 8));
  auto a = args(DType::f32);
  a.slot_mapping = slots();
  const auto p = plan();
  prefix_prefill(ctx(), p, *cache_, a);
  const auto prefix_out = out_.download_as<float>(T * Hq * D);
  write_kv_cache(ctx(), other, a.key, a.value, slots());
  for (KvPart part : {KvPart::key, KvPart::value})
    ASSERT_EQ(cache_->read_blocks(part, 0, 8), other.read_blocks(part, 0, 8)) << "the fused write differs from write_kv_cache";

  // paged_attention over the cache that now holds the new tokens: the same
  // attention, through one segment instead of two (f32 out: only the
  // kernels' own roundings differ, P in f16).
  out_.fill(0xFFFFFFFFu);
  PagedAttentionPlan pa(ctx(), cfg_, Hq, DType::f16, batch_->lengths());
  PagedAttentionArgs pargs = a.attention_args();
  pargs.workspace.reset();
  paged_attention(ctx(), pa, other, pargs);
  const auto paged_out = out_.download_as<float>(T * Hq * D);
  for (int64_t row = 0; row < T * Hq; ++row) {
    float peak = 0;
    for (int64_t d = 0; d < D; ++d) peak = std::max(peak, std::fabs(paged_out[row * D + d]));
    for (int64_t d = 0; d < D; ++d)
      ASSERT_NEAR(prefix_out[row * D + d], paged_out[row * D + d], 3 * 0x1p-11 * peak) << "row " << row << ", dim " << d;
  }
}

// Over a cache of q's dtype the prefill kernel's items are whole, one
// workgroup per q tile and kv head (the context and the new tokens in one key
// walk); an fp8 cache's keep the two segments, whose scales differ.
TEST_F(PrefixPrefillSmall, PrefillKernelItemsRunInTwoPassesOverEveryCache) {
  const std::vector<int32_t> qsl = {0, 300}, lens = {1000};
  PrefixPrefillOptions o;
  o.prefill = PrefillKernel::on;
  PrefixPrefillPlan same(ctx(), cfg_, Hq, DType::f16, PagedAttentionLengths{qsl, lens}, o);
  if (!same.attention().routes_prefill()) GTEST_SKIP() << "no prefill kernel on this path";
  KvCacheConfig fp8 = cfg_;
  fp8.dtype = DType::fp8_e4m3;
  PrefixPrefillPlan scaled(ctx(), fp8, Hq, DType::f16, PagedAttentionLengths{qsl, lens}, o);
  ASSERT_TRUE(scaled.attention().routes_prefill());
  // 300 tokens x GQA 2 = 600 rows: a few q tiles for each of 2 kv heads, an
  // item each per pass (the context's, the new tokens'), whatever the cache's
  // dtype.
  EXPECT_GT(same.attention().num_workgroups(), 0u);
  EXPECT_EQ(same.attention().num_workgroups() % Hkv, 0u);
  EXPECT_EQ(scaled.attention().num_workgroups(), same.attention().num_workgroups());
}

TEST_F(PrefixPrefillSmall, PrepareMakesEveryPipelineARunNeeds) {
  PagedAttentionVariant variant;
  variant.lse = true;
  prepare_prefix_prefill(ctx(), cfg_, Hq, DType::f16, std::span<const PagedAttentionVariant>(&variant, 1));
  prepare_write_kv_cache(ctx(), cfg_, DType::f16, DType::i32);
  const size_t prepared = ctx().pipelines_created();
  Buffer lse(ctx(), T * Hq * 4);
  auto a = args();
  a.lse = TensorView::contiguous(lse, DType::f32, {T, Hq});
  prefix_prefill(ctx(), plan(), *cache_, a);
  a.slot_mapping = slots();
  a.skip_decode = true;
  prefix_prefill(ctx(), plan(), *cache_, a);
  EXPECT_EQ(ctx().pipelines_created(), prepared);
}

TEST_F(PrefixPrefillSmall, BadInputNamesTheField) {
  const auto p = plan();
  EXPECT_NO_THROW(prefix_prefill(ctx(), p, *cache_, args()));
  {
    Buffer bias(ctx(), 64);
    auto a = args();
    a.params.qq_bias = TensorView::contiguous(bias, DType::f32, {4, 4});
    EXPECT_VKATTN_ERROR(prefix_prefill(ctx(), p, *cache_, a), "qq_bias", "not support");
  }
  {
    auto a = args();
    a.key = TensorView::contiguous(new_k_, DType::bf16, {T, Hkv, D});
    EXPECT_VKATTN_ERROR(prefix_prefill(ctx(), p, *cache_, a), "key");
    a = args();
    a.value = TensorView::contiguous(new_v_, DType::f16, {T, Hkv + 1, D - 32});
    EXPECT_VKATTN_ERROR(prefix_prefill(ctx(), p, *cache_, a), "value");
    a = args();
    a.q = TensorView::contiguous(q_, DType::f16, {T, Hq, D / 2});   // paged_attention's check, named as this op's
    EXPECT_VKATTN_ERROR(prefix_prefill(ctx(), p, *cache_, a), "prefix_prefill: q");
    a = args();
    a.key = TensorView::contiguous(new_k_, DType::f16, {T, Hkv, D});
    a.key.strides = {D, 1 << 16, 1};   // heads 65536 elements apart (and past the buffer)
    EXPECT_VKATTN_ERROR(prefix_prefill(ctx(), p, *cache_, a), "key");
  }
  {
    auto a = args();
    a.slot_mapping = TensorView::contiguous(slots_, DType::i32, {T - 1});
    EXPECT_VKATTN_ERROR(prefix_prefill(ctx(), p, *cache_, a), "slot_mapping");
  }
  {
    // The recorded form needs a workspace; paged_attention refuses the plan.
    auto a = args();
    EXPECT_VKATTN_ERROR(ctx().submit_and_wait([&](VkCommandBuffer cmd) { prefix_prefill(ctx(), p, *cache_, a, cmd); }),
                        "workspace");
    EXPECT_VKATTN_ERROR(paged_attention(ctx(), p.attention(), *cache_, a.attention_args()), "prefix_prefill");
  }
  {
    PrefixPrefillOptions o;
    o.workspace_bytes = 1000;   // 7 tokens x 4 heads need 16 KiB of counters, 12 bytes of alignment and 7 * 4 * 66 * 8 bytes
    EXPECT_VKATTN_ERROR(PrefixPrefillPlan(ctx(), cfg_, Hq, DType::f16, batch_->lengths(), o), "31180 bytes", "workspace_bytes = 1000");
  }
  {
    PagedAttentionVariant v;
    v.qq_bias = true;
    EXPECT_VKATTN_ERROR(prepare_prefix_prefill(ctx(), cfg_, Hq, DType::f16, std::span<const PagedAttentionVariant>(&v, 1)),
                        "qq_bias");
  }
  // A context longer than the block-table row on the device: reported, and
  // nothing is read past the row (the new tokens need no blocks).
  batch_->seq_lens() = {23 + 16, 9};
  batch_->upload();
  EXPECT_VKATTN_ERROR(prefix_prefill(ctx(), p, *cache_, args()), "prefix_prefill: seq_lens[0] = 39");
  batch_->seq_lens() = {23, 9};
  batch_->upload();
  batch_->block_table() = {3, 9, 6, 0};
  batch_->upload();
  EXPECT_VKATTN_ERROR(prefix_prefill(ctx(), p, *cache_, args()), "prefix_prefill: block_table[0, 1] = 9");
}

// What an adversarial pass found: a run of no tokens wanted a workspace that
// no plan needed; the fused write's checks came after the attention was
// recorded, under write_kv_cache's name; and neither its slot_mapping nor the
// attention's inputs were kept apart from what it writes.
TEST_F(PrefixPrefillSmall, NoTokensRunWithoutAWorkspace) {
  DeviceBatch none(ctx(), {0, 0}, {5}, {3}, 1);
  const PrefixPrefillPlan p(ctx(), cfg_, Hq, DType::f16, none.lengths());
  EXPECT_EQ(p.attention().workspace_bytes(), 0u);
  PrefixPrefillArgs a;
  a.q = TensorView::contiguous(q_, DType::f16, {0, Hq, D});
  a.key = TensorView::contiguous(new_k_, DType::f16, {0, Hkv, D});
  a.value = TensorView::contiguous(new_v_, DType::f16, {0, Hkv, D});
  a.out = TensorView::contiguous(out_, DType::f16, {0, Hq, D});
  a.batch = none.view();
  a.params.scale = 0.125f;
  EXPECT_NO_THROW(prefix_prefill(ctx(), p, *cache_, a));   // the first synchronous run of this Context
  EXPECT_NO_THROW(ctx().submit_and_wait([&](VkCommandBuffer cmd) { prefix_prefill(ctx(), p, *cache_, a, cmd); }));
}

// A fourth adversarial pass (prefix_prefill): the header's workspace formula
// left out the arrival counters, so a capacity of that size was refused, with
// paged_attention's advice (fewer segments), which prefix_prefill cannot take;
// a batch beyond one binding was told the same; and a too-small capacity was
// reported before lengths that were wrong. prefix_prefill_workspace_bytes is
// now what a plan needs, and the limits are checked in that order.
TEST_F(PrefixPrefillSmall, WorkspaceOfItsOwnFormulaIsEnough) {
  const uint64_t need = prefix_prefill_workspace_bytes(T, Hq, D);
  EXPECT_EQ(need, kPagedAttentionWorkspaceCounterBytes + 12 + uint64_t(T) * Hq * (D + 2) * 8);
  PrefixPrefillOptions o;
  o.workspace_bytes = need;
  const PrefixPrefillPlan p(ctx(), cfg_, Hq, DType::f16, batch_->lengths(), o);
  EXPECT_EQ(p.workspace_bytes(), need);
  const PrefixPrefillPlan r(ctx(), cfg_, Hq, DType::f16, PagedAttentionLimits{2, uint32_t(T), 0, 0}, o);
  EXPECT_EQ(r.workspace_bytes(), need);
  o.workspace_bytes = need - 1;
  const std::string bytes = std::to_string(need) + " bytes";
  EXPECT_VKATTN_ERROR(PrefixPrefillPlan(ctx(), cfg_, Hq, DType::f16, batch_->lengths(), o), "prefix_prefill:",
                      bytes.c_str(), "prefix_prefill_workspace_bytes", "options.workspace_bytes");
}

TEST_F(PrefixPrefillSmall, ABatchBeyondOneBindingSaysHowManyTokensFit) {
  const uint64_t bindable = std::min<uint64_t>(1ull << 31, ctx().capabilities().max_storage_buffer_range);
  const uint64_t fit = (bindable - kPagedAttentionWorkspaceCounterBytes - 12) / (uint64_t(Hq) * (D + 2) * 8);
  const std::string at_most = "at most " + std::to_string(fit) + " tokens per call";
  EXPECT_VKATTN_ERROR(PrefixPrefillPlan(ctx(), cfg_, Hq, DType::f16, PagedAttentionLimits{1, 1u << 30, 0, 0}),
                      "prefix_prefill:", "more than one call can bind", "maxStorageBufferRange", at_most.c_str());
  EXPECT_NO_THROW(PrefixPrefillPlan(ctx(), cfg_, Hq, DType::f16, PagedAttentionLimits{1, uint32_t(fit), 0, 0}));
  EXPECT_VKATTN_ERROR(PrefixPrefillPlan(ctx(), cfg_, Hq, DType::f16, PagedAttentionLimits{1, uint32_t(fit) + 1, 0, 0}),
                      at_most.c_str());
}

TEST_F(PrefixPrefillSmall, WrongLengthsAreReportedBeforeASmallWorkspace) {
  PrefixPrefillOptions o;
  o.workspace_bytes = 100;
  const std::vector<int32_t> qsl{0, 2, 3}, lens{1, 5};   // sequence 0: 2 new tokens, seq_len 1
  try {
    PrefixPrefillPlan p(ctx(), cfg_, Hq, DType::f16, PagedAttentionLengths{qsl, lens}, o);
    ADD_FAILURE() << "expected vkattn::Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("exceeds seq_lens[0]"), std::string::npos) << what;
    EXPECT_EQ(what.find("workspace"), std::string::npos) << what;
  }
}

TEST_F(PrefixPrefillSmall, FusedWriteIsCheckedWholeBeforeAnythingIsRecorded) {
  const auto p = plan();
  Buffer workspace(ctx(), p.attention().workspace_bytes());
  auto recorded = [&] {
    auto a = args(DType::f32);
    a.workspace = TensorView::contiguous(workspace, DType::f32, {int64_t(p.attention().workspace_bytes() / 4)});
    a.slot_mapping = slots();
    return a;
  };
  {
    auto a = recorded();   // slot_mapping in out's bytes: the write would take slots from what the attention writes
    a.slot_mapping = TensorView::contiguous(out_, DType::i32, {T});
    EXPECT_VKATTN_ERROR(prefix_prefill(ctx(), p, *cache_, a), "prefix_prefill: out", "overlaps slot_mapping");
  }
  {
    auto a = recorded();   // q read from the cache that the write writes
    a.q = TensorView::contiguous(cache_->chunk(0).k_buffer, DType::f16, {T, Hq, D});
    EXPECT_VKATTN_ERROR(prefix_prefill(ctx(), p, *cache_, a), "prefix_prefill: q", "the cache that slot_mapping writes");
    a.slot_mapping.reset();   // read only: allowed
    EXPECT_NO_THROW(prefix_prefill(ctx(), p, *cache_, a));
  }
  // A slot_mapping the write cannot bind fails before the attention is
  // recorded, named prefix_prefill: out keeps its poison.
  out_.fill(0xFFFFFFFFu);
  Buffer small(ctx(), 16);
  ctx().submit_and_wait([&](VkCommandBuffer cmd) {
    auto a = recorded();
    a.slot_mapping = TensorView::contiguous(small, DType::i32, {T});
    EXPECT_VKATTN_ERROR(prefix_prefill(ctx(), p, *cache_, a, cmd), "prefix_prefill: slot_mapping", "holds 16");
  });
  std::vector<uint32_t> words(T * Hq * D);
  out_.download(words.data(), words.size() * 4);
  EXPECT_EQ(std::count(words.begin(), words.end(), 0xFFFFFFFFu), int64_t(words.size()));
  ctx().submit_and_wait([&](VkCommandBuffer cmd) { prefix_prefill(ctx(), p, *cache_, recorded(), cmd); });
  out_.download(words.data(), words.size() * 4);
  EXPECT_EQ(std::count(words.begin(), words.end(), 0xFFFFFFFFu), 0);
}

// Device-side reports of recorded ops name the op the engine recorded: a
// prefix_prefill's attention and fused cache write report as prefix_prefill,
// a paged_attention over the same bad batch as paged_attention, and a
// write_kv_cache as itself; each check_device_status throws one report and
// clears it. A synchronous submission of several ops names them all.
TEST_F(PrefixPrefillSmall, RecordedReportsNameTheirOp) {
  const auto p = plan();
  OwnCommands own(ctx());
  Buffer workspace(ctx(), std::max<uint64_t>(p.workspace_bytes(), 16));
  auto a = args();
  a.workspace = TensorView::contiguous(workspace, DType::f32, {int64_t(workspace.size() / 4)});
  batch_->block_table() = {3, 9, 6, 0};   // 9: not a block of the 8-block cache
  batch_->upload();
  own.run([&](VkCommandBuffer cmd) { prefix_prefill(ctx(), p, *cache_, a, cmd); });
  EXPECT_VKATTN_ERROR(ctx().check_device_status(), "prefix_prefill: block_table[0, 1] = 9");
  EXPECT_NO_THROW(ctx().check_device_status());

  PagedAttentionPlan pa(ctx(), cfg_, Hq, DType::f16, batch_->lengths());
  PagedAttentionArgs pargs = a.attention_args();
  own.run([&](VkCommandBuffer cmd) { paged_attention(ctx(), pa, *cache_, pargs, cmd); });
  EXPECT_VKATTN_ERROR(ctx().check_device_status(), "paged_attention: block_table[0, 1] = 9");
  batch_->block_table() = {3, 4, 6, 0};
  batch_->upload();

  // A slot beyond the cache in the fused write, and in write_kv_cache, in one submission.
  const int32_t bad[T] = {4 * 16 + 4, 4 * 16 + 5, 8 * 16, 6 * 16 + 5, 6 * 16 + 6, 6 * 16 + 7, 6 * 16 + 8};
  slots_.upload(bad, sizeof(bad));
  a.slot_mapping = slots();
  own.run([&](VkCommandBuffer cmd) {
    prefix_prefill(ctx(), p, *cache_, a, cmd);
    write_kv_cache(ctx(), *cache_, a.key, a.value, slots(), cmd);
  });
  std::string first, second;
  try {
    ctx().check_device_status();
  } catch (const Error& e) {
    first = e.what();
  }
  try {
    ctx().check_device_status();
  } catch (const Error& e) {
    second = e.what();
  }
  const std::string both = first + " | " + second;
  EXPECT_NE(both.find("prefix_prefill: slot_mapping[2] = 128"), std::string::npos) << both;
  EXPECT_NE(both.find("write_kv_cache: slot_mapping[2] = 128"), std::string::npos) << both;
  EXPECT_NO_THROW(ctx().check_device_status());
  // One synchronous submission of both: its report names both ops.
  EXPECT_VKATTN_ERROR(ctx().submit_and_wait([&](VkCommandBuffer cmd) {
                        prefix_prefill(ctx(), p, *cache_, a, cmd);
                        write_kv_cache(ctx(), *cache_, a.key, a.value, slots(), cmd);
                      }),
                      "prefix_prefill or write_kv_cache: slot_mapping[2] = 128");
  for (const auto& m : ctx().validation_messages()) ADD_FAILURE() << "validation error: " << m;
}

}  // namespace
}  // namespace vkattn::test
