// paged_attention against the float64 reference: varlen batches mixing decode
// and chunked prefill; GQA ratios; head sizes (80, 96, 112, 192: not powers of two); every
// cache layout and dtype (fp8 included); block sizes (48: not a power of two;
// 24: a 16-key tile straddles blocks);
// sliding window, softcap, ALiBi, sinks, qq_bias, LSE; q and out dtypes (fp8
// out included); caches of 32768 blocks with the used ones at the top;
// segmented (split-KV) against unsegmented; rows that see no key; bad input.
//
// The runner (tools/runners/paged_attention_runner.cpp) poisons the outputs and
// every unused cache slot with NaN, permutes the blocks, shares prefixes between
// sequences and fills unused block-table entries with out-of-range junk; its
// tolerance is explained there.
//
// Not here: "the shader never reads outside the cache, even when a table is
// changed after the host checked it" needs a device-side edit of the plan's
// table; test_paged_attention_safety.cpp covers it.
//
// On a CPU device (lavapipe) the cases keep head counts small; the full
// shapes run only on GPUs. Cold (no Mesa shader cache) lavapipe spends most of
// this file's time compiling pipelines: keep the number of distinct
// specialisations (head size, block size, dtypes, layout, features, and the
// row tile, which prefill rows make larger) small.
#include <cmath>
#include <cstring>
#include <limits>

#include "runners/paged_attention_runner.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

using tool::PagedAttentionCase;
using Seqs = std::vector<std::pair<uint32_t, uint32_t>>;

const Seqs kMixed = {{1, 1328}, {5, 18}, {129, 463}};   // decode, short prefill, long chunked prefill
const Seqs kDecode = {{1, 523}, {1, 37}, {1, 2011}};

bool on_cpu(Context& ctx) { return ctx.capabilities().device_type == "CPU"; }

PagedAttentionCase make(const Seqs& seqs, uint32_t hq, uint32_t hkv, uint32_t d, uint32_t bs, DType cache,
                        KvLayout layout, uint64_t seed) {
  PagedAttentionCase c;
  c.seqs = seqs;
  c.num_q_heads = hq;
  c.num_kv_heads = hkv;
  c.head_size = d;
  c.block_size = bs;
  c.cache_dtype = cache;
  c.layout = layout;
  c.seed = seed;
  c.timing_repetitions = 0;
  return c;
}

struct Combo {
  std::string name;
  PagedAttentionCase c;
  bool gpu_only = false;
};

std::vector<Combo> combos() {
  std::vector<Combo> v;
  auto add = [&](std::string name, PagedAttentionCase c, bool gpu_only = false) {
    v.push_back({std::move(name), std::move(c), gpu_only});
  };
  // ---- mixed batches (prefill rows) ----
  {
    auto c = make(kMixed, 4, 4, 64, 16, DType::f16, KvLayout::nhd, 101);
    c.with_lse = true;
    c.qq_bias = true;
    c.softcap = 50;
    add("mixed_h4x4_d64_f16_nhd_bs16_qqbias_softcap_lse", c);
  }
  {
    auto c = make(kMixed, 8, 2, 80, 48, DType::fp8_e4m3, KvLayout::split, 102);
    c.out_dtype = DType::f32;
    c.alibi = true;
    c.sinks = true;
    c.with_lse = true;
    c.sliding_window = 256;
    c.k_scale = 0.02f;
    c.v_scale = 0.01f;
    add("mixed_h8x2_d80_e4m3_split_bs48_alibi_sinks_window256_outf32_lse", c);
  }
  {
    auto c = make(kMixed, 5, 1, 128, 128, DType::bf16, KvLayout::hnd, 103);
    c.q_dtype = DType::bf16;
    c.out_dtype = DType::bf16;
    c.sliding_window = 64;
    c.sinks = true;
    add("mixed_h5x1_d128_bf16_hnd_bs128_window64_sinks", c);
  }
  // ---- decode batches ----
  {
    auto c = make(kDecode, 32, 8, 128, 64, DType::fp8_e5m2, KvLayout::nhd, 201);
    c.sliding_window = 256;
    c.softcap = 50;
    add("decode_h32x8_d128_e5m2_nhd_bs64_window256_softcap", c);
  }
  {
    auto c = make(kDecode, 8, 2, 64, 32, DType::bf16, KvLayout::hnd, 202);
    c.q_dtype = DType::bf16;
    c.out_dtype = DType::bf16;
    c.sinks = true;
    c.with_lse = true;
    add("decode_h8x2_d64_bf16_hnd_bs32_sinks_lse", c);
  }
  {
    auto c = make(kDecode, 4, 4, 256, 16, DType::fp8_e4m3, KvLayout::nhd, 203);
    c.out_dtype = DType::fp8_e4m3;
    c.out_scale = 0.02f;
    add("decode_h4x4_d256_e4m3_nhd_bs16_out_e4m3", c);
  }
  {
    auto c = make(kDecode, 5, 1, 64, 16, DType::fp8_e4m3, KvLayout::split, 204);
    c.q_dtype = DType::bf16;
    c.out_dtype = DType::fp8_e5m2;
    c.out_scale = 0.05f;
    c.alibi = true;
    c.qq_bias = true;
    c.with_lse = true;
    c.q_token_padding = 24;   // q as a strided view
    add("decode_h5x1_d64_e4m3_split_bs16_qbf16_out_e5m2_alibi_qqbias_lse", c);
  }
  {
    // 32768 blocks, the used ones at the top: block * block bytes past 2^26.
    auto c = make(kDecode, 5, 1, 64, 16, DType::f16, KvLayout::nhd, 205);
    c.num_blocks = 32768;
    add("decode_h5x1_d64_f16_nhd_bs16_32768_blocks", c);
  }
  // ---- the full shapes: GPUs only ----
  {
    auto c = make(kMixed, 32, 8, 128, 16, DType::f16, KvLayout::nhd, 301);
    c.with_lse = true;
    add("gpu_mixed_h32x8_d128_f16_nhd_bs16_lse", c, true);
  }
  {
    auto c = make(kMixed, 32, 8, 256, 32, DType::fp8_e4m3, KvLayout::hnd, 302);
    c.out_dtype = DType::bf16;
    c.sinks = true;
    c.alibi = true;
    c.sliding_window = 256;
    add("gpu_mixed_h32x8_d256_e4m3_hnd_bs32_sinks_alibi_window256", c, true);
  }
  {
    auto c = make(kMixed, 32, 8, 128, 16, DType::f16, KvLayout::split, 303);
    c.q_dtype = DType::f16;
    c.out_dtype = DType::fp8_e4m3;
    c.out_scale = 0.01f;
    c.qq_bias = true;
    c.softcap = 50;
    c.with_lse = true;
    add("gpu_mixed_h32x8_d128_f16_split_bs16_out_e4m3_qqbias_softcap_lse", c, true);
  }
  {
    // 32768 blocks of 16 x 8 heads x 256 f16: 2 GiB per cache part, byte
    // offsets past 2^31.
    auto c = make(kDecode, 32, 8, 256, 16, DType::f16, KvLayout::nhd, 304);
    c.num_blocks = 32768;
    c.with_lse = true;
    add("gpu_decode_h32x8_d256_f16_nhd_bs16_32768_blocks", c, true);
  }
  {
    auto c = make(kDecode, 32, 8, 128, 16, DType::bf16, KvLayout::hnd, 305);
    c.q_dtype = DType::bf16;
    c.out_dtype = DType::f32;
    c.sinks = true;
    c.alibi = true;
    add("gpu_decode_h32x8_d128_bf16_hnd_bs16_sinks_alibi", c, true);
  }
  // The matrix kernel's other branches (paged_attention_subgroup.comp): head
  // sizes 96/112/192 (192: no register prefetch), block sizes that are not
  // multiples of 16 (a 16-key tile straddles blocks), 8-row decode tiles with
  // split-KV.
  {
    auto c = make(kDecode, 16, 2, 96, 24, DType::f16, KvLayout::nhd, 306);
    c.sliding_window = 64;
    c.split = SplitKv::on;
    c.num_segments = 5;
    add("gpu_decode_h16x2_d96_f16_nhd_bs24_window64_split5", c, true);
  }
  {
    auto c = make(kMixed, 6, 2, 112, 32, DType::fp8_e5m2, KvLayout::hnd, 307);
    c.alibi = true;
    c.qq_bias = true;
    c.with_lse = true;
    add("gpu_mixed_h6x2_d112_e5m2_hnd_bs32_alibi_qqbias_lse", c, true);
  }
  {
    auto c = make(kDecode, 16, 2, 192, 16, DType::fp8_e4m3, KvLayout::split, 308);
    c.sinks = true;
    c.softcap = 50;
    c.out_dtype = DType::f32;
    add("gpu_decode_h16x2_d192_e4m3_split_bs16_sinks_softcap", c, true);
  }
  {
    // 64 decode sequences of 200..499 keys: 512 even work items, which the
    // plan runs in workgroups of 2 subgroups on a GPU of <= 170 SMs
    // (detail::matrix_subgroups).
    Seqs many;
    for (uint32_t i = 0; i < 64; ++i) many.push_back({1, 200 + (i * 37) % 300});
    auto c = make(many, 32, 8, 128, 16, DType::f16, KvLayout::nhd, 309);
    c.with_lse = true;
    add("gpu_decode_h32x8_d128_f16_nhd_bs16_64seqs", c, true);
  }
  {
    // 48 decode sequences of 2048..2559 keys, 8 kv heads: 384 even work items,
    // which a GPU of 77..192 SMs splits automatically (2 to 5 items per SM;
    // an H200: 2 segments of 2-subgroup workgroups; detail::automatic_segments).
    Seqs many;
    for (uint32_t i = 0; i < 48; ++i) many.push_back({1, 2048 + (i * 101) % 512});
    auto c = make(many, 8, 8, 128, 16, DType::f16, KvLayout::nhd, 310);
    add("gpu_decode_h8x8_d128_f16_nhd_bs16_48seqs_autosplit", c, true);
  }
  return v;
}

// gtest prints parameters in failure messages: the name, not the bytes.
void PrintTo(const Combo& c, std::ostream* os) { *os << c.name; }

class PagedAttentionCombos : public VkTest, public ::testing::WithParamInterface<Combo> {};

TEST_P(PagedAttentionCombos, MatchesReference) {
  const Combo& p = GetParam();
  if (p.gpu_only && on_cpu(ctx())) GTEST_SKIP() << "full-size shape: GPUs only";
  auto r = tool::run_paged_attention(ctx(), p.c);
  EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure << "\ntolerance: " << r.tolerance;
}

INSTANTIATE_TEST_SUITE_P(Shapes, PagedAttentionCombos, ::testing::ValuesIn(combos()),
                         [](const auto& info) { return info.param.name; });

// ---- segmented (split-KV) vs unsegmented ----

struct SplitCase {
  std::string name;
  PagedAttentionCase c;
};

void PrintTo(const SplitCase& c, std::ostream* os) { *os << c.name; }

class PagedAttentionSegments : public VkTest, public ::testing::WithParamInterface<SplitCase> {};

TEST_P(PagedAttentionSegments, AgreeWithUnsegmented) {
  PagedAttentionCase c = GetParam().c;
  c.split = SplitKv::off;
  tool::PagedAttentionOutputs base;
  auto r = tool::run_paged_attention(ctx(), c, &base);
  ASSERT_TRUE(r.pass) << r.summary << "\n" << r.failure;
  ASSERT_FALSE(base.split);
  // Both runs round P (and their outputs) independently, so they can differ by
  // about what either differs from the reference in P rounding: allow 2 u_c of
  // the row's size (a third of the reference tolerance) plus two output
  // roundings; LSE only by f32 arithmetic and the combine step.
  const bool bf16 = c.q_dtype == DType::bf16 || c.cache_dtype == DType::bf16;
  const double uc = bf16 ? 0x1p-8 : 0x1p-11;
  const double u_out = c.out_dtype == DType::f16 ? 0x1p-11 : c.out_dtype == DType::bf16 ? 0x1p-8 : 0x1p-24;
  const uint32_t D = c.head_size;
  for (uint32_t segments : {0u, 2u, 3u, 7u, 64u}) {
    c.split = SplitKv::on;
    c.num_segments = segments;
    c.runs = 2;   // a plan runs again: the second run (its partial results reused) must be right too
    tool::PagedAttentionOutputs got;
    auto rs = tool::run_paged_attention(ctx(), c, &got);
    EXPECT_TRUE(rs.pass) << "num_segments " << segments << ": " << rs.summary << "\n" << rs.failure;
    EXPECT_TRUE(got.split);
    if (segments) EXPECT_EQ(got.num_segments, segments);
    ASSERT_EQ(got.out.size(), base.out.size());
    int reported = 0;
    for (size_t row = 0; row * D < got.out.size(); ++row) {
      double maxabs = 0;
      for (uint32_t d = 0; d < D; ++d) maxabs = std::max(maxabs, std::fabs(base.ref_out[row * D + d]));
      for (uint32_t d = 0; d < D; ++d) {
        const size_t i = row * D + d;
        const double allowed = 2 * uc * maxabs + 2 * u_out * std::fabs(base.ref_out[i]) + 1e-30;
        if (!(std::fabs(got.out[i] - base.out[i]) <= allowed) && reported++ < 5)
          ADD_FAILURE() << "num_segments " << segments << " (" << got.num_segments << " used), row " << row << " dim "
                        << d << ": segmented " << got.out[i] << ", unsegmented " << base.out[i] << ", allowed "
                        << allowed;
      }
      if (!got.lse.empty()) {
        const double a = got.lse[row], b = base.lse[row];
        if (!(a == b || std::fabs(a - b) <= uc + 1e-6 * std::fabs(b)) && reported++ < 5)
          ADD_FAILURE() << "num_segments " << segments << ", row " << row << ": lse segmented " << a
                        << ", unsegmented " << b;
      }
    }
  }
}

std::vector<SplitCase> split_cases() {
  std::vector<SplitCase> v;
  {
    // Decode over long contexts: the case split-KV exists for. Same
    // specialisation as decode_h8x2_d64_bf16_hnd_bs32_sinks_lse above.
    auto c = make(kDecode, 8, 2, 64, 32, DType::bf16, KvLayout::hnd, 401);
    c.q_dtype = DType::bf16;
    c.out_dtype = DType::bf16;
    c.sinks = true;
    c.with_lse = true;
    v.push_back({"decode_bf16_sinks_lse", c});
  }
  {
    // Prefill rows too, with a window (segments that end up empty) and the
    // sink (segment 0 only).
    auto c = make({{1, 1328}, {5, 18}, {33, 463}}, 4, 4, 64, 16, DType::f16, KvLayout::nhd, 402);
    c.with_lse = true;
    c.sinks = true;
    c.sliding_window = 300;
    v.push_back({"mixed_f16_window_sinks_lse", c});
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(SplitKv, PagedAttentionSegments, ::testing::ValuesIn(split_cases()),
                         [](const auto& info) { return info.param.name; });

// ---- rows that see no key ----

class PagedAttentionEmpty : public VkTest {};

PagedAttentionCase empty_base(uint64_t seed) {
  // GQA 1 and few new tokens per sequence keep the row tile (and the compile) small.
  auto c = make({}, 4, 4, 64, 16, DType::f16, KvLayout::nhd, seed);
  c.with_lse = true;
  return c;
}

TEST_F(PagedAttentionEmpty, SequenceOfLengthZeroWithNoQueries) {
  // (0, 0): no rows at all, no blocks; neighbours unaffected.
  for (bool sinks : {false, true}) {
    auto c = empty_base(501);
    c.seqs = {{0, 0}, {3, 40}, {0, 0}, {0, 17}, {1, 9}};
    c.sinks = sinks;
    auto r = tool::run_paged_attention(ctx(), c);
    EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure;
  }
}

TEST_F(PagedAttentionEmpty, PaddingSequenceGivesZero) {
  // seq_len 0 with query tokens (seed 003's padding): out exactly 0, lse -inf
  // (or the sink); split and unsplit.
  for (auto [split, sinks] : {std::pair{SplitKv::off, false}, std::pair{SplitKv::on, true}}) {
      auto c = empty_base(502);
      c.seqs = {{1, 0}, {3, 40}, {2, 0}, {1, 300}};
      c.sinks = sinks;
      c.split = split;
      c.num_segments = split == SplitKv::on ? 3 : 0;
      auto r = tool::run_paged_attention(ctx(), c);
      EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure;
    }
}

TEST_F(PagedAttentionEmpty, RowWithEveryKeyMaskedGivesZero) {
  // Sequence 0 has no context (seq_len == query_len), so every key it sees is
  // a new token under qq_bias: rows 1 and 2 of qq_bias are -inf, which masks
  // every key of its tokens 1 and 2. Sequence 1 (context 6) still sees its
  // context keys in those rows.
  for (auto [split, sinks] : {std::pair{SplitKv::off, true}, std::pair{SplitKv::on, false}}) {
      auto c = empty_base(503);
      c.seqs = {{4, 4}, {3, 9}, {1, 70}};
      c.qq_bias = true;
      c.qq_bias_masked_rows = {1, 2};
      c.sinks = sinks;
      c.split = split;
      c.num_segments = split == SplitKv::on ? 2 : 0;
      tool::PagedAttentionOutputs o;
      auto r = tool::run_paged_attention(ctx(), c, &o);
      EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure;
      // The reference agrees that tokens 1 and 2 see nothing (the runner then
      // demands exact zeros there).
      for (uint32_t t : {1u, 2u})
        for (uint32_t h = 0; h < c.num_q_heads; ++h)
          for (uint32_t d = 0; d < c.head_size; ++d)
            ASSERT_EQ(o.ref_out[(t * c.num_q_heads + h) * c.head_size + d], 0.0);
    }
}

// ---- bad input: vkattn::Error before anything is dispatched ----

class PagedAttentionBadInput : public VkTest {
 protected:
  void SetUp() override {
    VkTest::SetUp();
    cache_ = std::make_unique<PagedKvCache>(ctx(), KvCacheConfig{.num_blocks = 8, .block_size = 16, .num_kv_heads = 2,
                                                                 .head_size = 64});
    cache_->fill(0x3C003C00u);
    q_ = Buffer(ctx(), 3 * 8 * 64 * 2);
    out_ = Buffer(ctx(), 3 * 8 * 64 * 4);
    lse_ = Buffer(ctx(), 3 * 8 * 4);
    q_.fill(0x3C003C00u);
    out_.fill(0xFFFFFFFFu);
    // Two sequences: decode over 20 keys (blocks 3, 4) and 2 new tokens of 5 (block 5).
    batch_ = {{0, 1, 3}, {20, 5}, {3, 4, 5, 0}, 2};
    opts_.scale = 0.125f;
  }
  void TearDown() override {
    cache_.reset();
    q_ = Buffer();
    out_ = Buffer();
    lse_ = Buffer();
    VkTest::TearDown();
  }
  PagedAttentionPlan plan(uint32_t hq = 4, DType qd = DType::f16) {
    return PagedAttentionPlan(ctx(), *cache_, hq, qd, batch_, opts_);
  }
  TensorView q(std::vector<int64_t> shape = {3, 4, 64}, DType t = DType::f16) {
    return TensorView::contiguous(q_, t, std::move(shape));
  }
  TensorView out(std::vector<int64_t> shape = {3, 4, 64}, DType t = DType::f16) {
    return TensorView::contiguous(out_, t, std::move(shape));
  }
  void expect_out_untouched() {
    auto b = out_.download_as<uint8_t>(out_.size());
    for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b[i], 0xFF) << "out byte " << i << " was written";
  }
  std::unique_ptr<PagedKvCache> cache_;
  Buffer q_, out_, lse_;
  PagedAttentionBatch batch_;
  PagedAttentionOptions opts_;
};

TEST_F(PagedAttentionBadInput, TheValidSetupRuns) {
  auto p = plan();
  EXPECT_NO_THROW(paged_attention(ctx(), p, *cache_, q(), out()));
}

TEST_F(PagedAttentionBadInput, BlockTableEntryOutsideTheCache) {
  batch_.block_table = {3, 9, 5, 0};
  EXPECT_VKATTN_ERROR(plan(), "block_table", "= 9", "num_blocks");
  batch_.block_table = {3, 4, -1, 0};
  EXPECT_VKATTN_ERROR(plan(), "block_table", "= -1", "num_blocks");
  // Entries past a sequence's blocks are not used, so not checked.
  batch_.block_table = {3, 4, 5, 1 << 30};
  EXPECT_NO_THROW(plan());
}

TEST_F(PagedAttentionBadInput, SeqLenBeyondTheBlockTable) {
  batch_.seq_lens = {33, 5};   // needs 3 blocks, the table has 2 per sequence
  EXPECT_VKATTN_ERROR(plan(), "seq_lens[0] = 33", "max_blocks_per_seq");
  batch_.seq_lens = {20, -1};
  EXPECT_VKATTN_ERROR(plan(), "seq_lens[1] = -1");
}

TEST_F(PagedAttentionBadInput, QueryLenBeyondSeqLen) {
  batch_.seq_lens = {20, 1};   // sequence 1 has 2 new tokens
  EXPECT_VKATTN_ERROR(plan(), "query_len", "seq_lens[1] = 1");
}

TEST_F(PagedAttentionBadInput, BatchShape) {
  batch_.query_start_loc = {0, 1};
  EXPECT_VKATTN_ERROR(plan(), "query_start_loc", "num_seqs + 1");
  batch_.query_start_loc = {1, 2, 3};
  EXPECT_VKATTN_ERROR(plan(), "query_start_loc[0] = 1");
  batch_.query_start_loc = {0, 2, 1};
  EXPECT_VKATTN_ERROR(plan(), "query_start_loc", "decreasing");
  batch_.query_start_loc = {0, 1, 3};
  batch_.block_table = {3, 4, 5};
  EXPECT_VKATTN_ERROR(plan(), "block_table has 3 entries", "num_seqs * max_blocks_per_seq");
}

TEST_F(PagedAttentionBadInput, QHeadsNotDivisibleByKvHeads) {
  EXPECT_VKATTN_ERROR(plan(3), "num_q_heads = 3", "not divisible", "num_kv_heads = 2");
  EXPECT_VKATTN_ERROR(plan(0), "num_q_heads = 0");
}

TEST_F(PagedAttentionBadInput, QDtype) {
  EXPECT_VKATTN_ERROR(plan(4, DType::f32), "q dtype f32", "f16 or bf16");
  EXPECT_VKATTN_ERROR(plan(4, DType::fp8_e4m3), "q dtype fp8_e4m3");
  auto p = plan();
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, q({3, 4, 64}, DType::bf16), out()), "q has dtype bf16",
                      "expected f16");
  expect_out_untouched();
}

TEST_F(PagedAttentionBadInput, ViewShapes) {
  auto p = plan();
  // head_size of q differs from the cache's.
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, q({3, 4, 32}), out()), "q has shape [3, 4, 32]",
                      "head_size");
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, q({3, 8, 64}), out()), "q has shape [3, 8, 64]",
                      "num_q_heads");
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, q({2, 4, 64}), out()), "q has shape [2, 4, 64]",
                      "num_tokens");
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, q(), out({3, 4, 32})), "out has shape [3, 4, 32]",
                      "expected [3, 4, 64]");
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, q(), out({3, 4, 64}, DType::i32)), "out has dtype i32");
  auto lse = TensorView::contiguous(lse_, DType::f32, {3, 3});
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, q(), out(), lse), "lse has shape [3, 3]", "expected [3, 4]");
  lse = TensorView::contiguous(lse_, DType::f16, {3, 4});
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, q(), out(), lse), "lse has dtype f16", "f32");
  // A view past the end of its buffer.
  Buffer small(ctx(), 100);
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, q(), TensorView::contiguous(small, DType::f16, {3, 4, 64})),
                      "out");
  expect_out_untouched();
}

TEST_F(PagedAttentionBadInput, CacheOtherThanThePlans) {
  auto p = plan();
  PagedKvCache other(ctx(), KvCacheConfig{.num_blocks = 8, .block_size = 16, .num_kv_heads = 2, .head_size = 64,
                                          .dtype = DType::bf16});
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, other, q(), out()), "cache");
  expect_out_untouched();
}

TEST_F(PagedAttentionBadInput, OptionSizesAndValues) {
  opts_.alibi_slopes = {0.5f, 0.25f, 0.125f};
  EXPECT_VKATTN_ERROR(plan(), "alibi_slopes has 3 entries", "num_q_heads = 4");
  opts_.alibi_slopes.clear();
  opts_.sinks = {1, 2, 3, 4, 5};
  EXPECT_VKATTN_ERROR(plan(), "sinks has 5 entries", "num_q_heads = 4");
  opts_.sinks.clear();
  opts_.qq_bias = {0, 0, 0};
  opts_.qq_bias_stride = 2;
  EXPECT_VKATTN_ERROR(plan(), "qq_bias has 3 entries", "qq_bias_stride = 2");
  opts_.qq_bias.clear();
  opts_.qq_bias_stride = 0;
  opts_.scale = 0;
  EXPECT_VKATTN_ERROR(plan(), "scale", "> 0");
  opts_.scale = 0.125f;
  opts_.sliding_window = -3;
  EXPECT_VKATTN_ERROR(plan(), "sliding_window = -3");
  opts_.sliding_window = 0;
  opts_.softcap = -1;
  EXPECT_VKATTN_ERROR(plan(), "softcap");
  opts_.softcap = 0;
  opts_.out_scale = 0;
  EXPECT_VKATTN_ERROR(plan(), "out_scale");
}

TEST_F(PagedAttentionBadInput, QqBiasWithTooFewRows) {
  // Sequence 1 has 2 new tokens, so qq_bias needs at least 2 rows; one row of
  // stride 2 would make the kernel read past the bias.
  opts_.qq_bias = {0.5f, -0.5f};
  opts_.qq_bias_stride = 2;
  EXPECT_VKATTN_ERROR(plan(), "qq_bias", "query_len");
}

}  // namespace
}  // namespace vkattn::test
