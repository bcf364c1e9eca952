// A non-finite value in the cache reaches exactly the rows that see it: a
// row whose causal range or window excludes a NaN or infinite V (or K) gives
// the same finite output as without it; a row that sees it gives a
// non-finite output in that dimension. Split-KV and fp8 caches too.
#include <cmath>
#include <cstring>
#include <limits>

#include "device_batch.hpp"
#include "nonfinite_outputs.hpp"
#include "ops/paged_attention_plan.hpp"
#include "schedule/paged_attention_schedule.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

// Runs the plan with every q value 1.0 (f16 or bf16) and a window (0: none)
// into an f32 output filled with NaN bits first; returns the output,
// [tokens][Hq][D].
std::vector<float> run_with_unit_queries(Context& ctx, const PagedAttentionPlan& plan, PagedKvCache& cache,
                                         DeviceBatch& batch, uint32_t tokens, uint32_t Hq, uint32_t D, DType q_dtype,
                                         int32_t window) {
  Buffer q(ctx, size_t(tokens) * Hq * D * 2), out(ctx, size_t(tokens) * Hq * D * 4);
  q.fill(q_dtype == DType::bf16 ? 0x3F803F80u : 0x3C003C00u);   // 1.0
  out.fill(0xFFFFFFFFu);
  PagedAttentionArgs a;
  a.q = TensorView::contiguous(q, q_dtype, {tokens, Hq, D});
  a.out = TensorView::contiguous(out, DType::f32, {tokens, Hq, D});
  a.batch = batch.view();
  a.params.scale = 0.125f;
  a.params.sliding_window = window;
  paged_attention(ctx, plan, cache, a);
  return out.download_as<float>(size_t(tokens) * Hq * D);
}

struct NonFiniteCase {
  const char* name;
  DType cache = DType::f16;
  uint32_t bad_bits = 0;      // the value planted, in the cache dtype
  bool in_k = false;          // planted in K instead of V
  int32_t window = 0;
  SplitKv split = SplitKv::off;
  bool at_36 = false;         // also planted at position 36, which every token sees
  bool prefill = false;       // 16 q heads (24 rows) on the prefill kernel (PrefillKernel::on)
  uint32_t head_size = 64;
  uint32_t dim = 5;           // the planted element's head dim
  // Also planted at positions 41 and 47, past the sequence's end in its last
  // block, which no row sees: the prefill kernel reads zeros for the keys
  // its tiles hold outside the item, not the block's slots.
  bool past_end = false;
};
void PrintTo(const NonFiniteCase& c, std::ostream* os) { *os << c.name; }

class PagedAttentionNonFinite : public VkTest, public ::testing::WithParamInterface<NonFiniteCase> {};

// One sequence of 40 keys whose last 3 are new (positions 37, 38, 39),
// 4 q heads (16 on the prefill kernel) over 2 kv heads of 64; every cached value 0.25 (f16) or its fp8
// code, but one element of kv head 1, dim 5: at position 39 (seen only by
// the last token) and, when the window is 8, at position 2 (seen by none) and
// 30 (at the window's edge: seen only by the first token); and in some
// cases at 36, in the causal diagonal's tile but seen by every token.
TEST_P(PagedAttentionNonFinite, ReachesOnlyTheRowsThatSeeIt) {
  const NonFiniteCase& p = GetParam();
  const uint32_t bs = 16, Hkv = 2, Hq = p.prefill ? 16 : 4, D = p.head_size, T = 3, len = 40;
  KvCacheConfig cfg{.num_blocks = 4, .block_size = bs, .num_kv_heads = Hkv, .head_size = D, .dtype = p.cache};
  PagedKvCache cache(ctx(), cfg);
  const uint32_t one = p.cache == DType::f16    ? 0x34003400u
                       : p.cache == DType::bf16 ? 0x3E803E80u
                       : p.cache == DType::fp8_e4m3 ? 0x28282828u
                                                    : 0x34343434u;
  cache.fill(one);   // 0.25 in every format used here
  // q is bf16 with a bf16 cache (the bf16 matrix module), else f16.
  const DType qt = p.cache == DType::bf16 ? DType::bf16 : DType::f16;
  const size_t es = dtype_size(p.cache);
  auto plant = [&](uint32_t pos) {
    const uint32_t block = pos / bs;
    auto bytes = cache.read_blocks(p.in_k ? KvPart::key : KvPart::value, block, 1);
    const uint64_t e = cache.element_in_block(p.in_k ? KvPart::key : KvPart::value, pos % bs, 1, p.dim);
    std::memcpy(&bytes[e * es], &p.bad_bits, es);
    cache.write_blocks(p.in_k ? KvPart::key : KvPart::value, block, bytes);
  };
  plant(39);
  if (p.window) {
    plant(2);
    plant(30);
  }
  if (p.at_36) plant(36);
  if (p.past_end) {
    plant(41);
    plant(47);
  }
  DeviceBatch batch(ctx(), {0, int32_t(T)}, {int32_t(len)}, {0, 1, 2}, 3);
  PagedAttentionPlanOptions o;
  o.split = p.split;
  o.num_segments = p.split == SplitKv::on ? 3 : 0;
  o.prefill = p.prefill ? PrefillKernel::on : PrefillKernel::off;
  PagedAttentionPlan plan(ctx(), cfg, Hq, qt, batch.lengths(), o);
  const auto o_ = run_with_unit_queries(ctx(), plan, cache, batch, T, Hq, D, qt, p.window);
  // Every K and V is the same value, so a row that sees only finite values
  // averages them back: 0.25 (fp8 caches hold it exactly, as f16 does). The
  // upper half of the heads reads kv head 1; the last token sees position 39,
  // the first (position 37) position 30 through a window of 8.
  expect_nonfinite_exactly_where_seen(o_, T, Hq, D, [&](uint32_t t, uint32_t h, uint32_t d) {
    return (t == T - 1 || (p.window && t == 0) || p.at_36) && h >= Hq / 2 && (d == p.dim || p.in_k);
  });
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PagedAttentionNonFinite,
    ::testing::Values(NonFiniteCase{"v_nan_f16", DType::f16, 0x7E00},
                      NonFiniteCase{"v_inf_f16", DType::f16, 0x7C00},
                      NonFiniteCase{"v_minus_inf_f16_window8", DType::f16, 0xFC00, false, 8},
                      NonFiniteCase{"v_nan_f16_split", DType::f16, 0x7E00, false, 0, SplitKv::on},
                      NonFiniteCase{"v_nan_f16_window8_split", DType::f16, 0x7E00, false, 8, SplitKv::on},
                      NonFiniteCase{"v_nan_e4m3", DType::fp8_e4m3, 0x7F},
                      NonFiniteCase{"v_inf_e5m2_window8", DType::fp8_e5m2, 0x7C, false, 8},
                      NonFiniteCase{"k_nan_f16_window8", DType::f16, 0x7E00, true, 8},
                      NonFiniteCase{"v_nan_f16_at36", DType::f16, 0x7E00, false, 0, SplitKv::off, true},
                      NonFiniteCase{"v_inf_e5m2_window8_at36_split", DType::fp8_e5m2, 0x7C, false, 8, SplitKv::on, true},
                      NonFiniteCase{"v_nan_bf16_window8_at36", DType::bf16, 0x7FC0, false, 8, SplitKv::off, true},
                      NonFiniteCase{"v_minus_inf_bf16", DType::bf16, 0xFF80},
                      NonFiniteCase{"v_nan_f16_prefill", DType::f16, 0x7E00, false, 0, SplitKv::off, false, true},
                      NonFiniteCase{"v_minus_inf_f16_window8_prefill", DType::f16, 0xFC00, false, 8, SplitKv::off, false, true},
                      NonFiniteCase{"k_nan_f16_window8_prefill", DType::f16, 0x7E00, true, 8, SplitKv::off, false, true},
                      NonFiniteCase{"v_inf_e5m2_window8_at36_split_prefill", DType::fp8_e5m2, 0x7C, false, 8, SplitKv::on, true, true},
                      NonFiniteCase{"v_nan_bf16_window8_at36_prefill", DType::bf16, 0x7FC0, false, 8, SplitKv::off, true, true},
                      NonFiniteCase{"v_nan_f16_past_end", DType::f16, 0x7E00, false, 0, SplitKv::off, false, false, 64, 5, true},
                      NonFiniteCase{"v_nan_f16_past_end_prefill", DType::f16, 0x7E00, false, 0, SplitKv::off, false, true, 64, 5, true},
                      NonFiniteCase{"v_inf_e5m2_window8_past_end_split_prefill", DType::fp8_e5m2, 0x7C, false, 8, SplitKv::on, false, true, 64, 5, true},
                      NonFiniteCase{"k_nan_f16_past_end_prefill", DType::f16, 0x7E00, true, 0, SplitKv::off, false, true, 64, 5, true},
                      // Head size 256: 16-bit caches staged half the head at a
                      // time (the decode kernel's HEAD_HALVES), a value in each half.
                      NonFiniteCase{"v_nan_f16_window8_d256", DType::f16, 0x7E00, false, 8, SplitKv::off, false, false, 256},
                      NonFiniteCase{"v_inf_f16_window8_at36_d256_dim200", DType::f16, 0x7C00, false, 8, SplitKv::off, true, false, 256, 200},
                      NonFiniteCase{"v_nan_f16_window8_split_d256_dim130", DType::f16, 0x7E00, false, 8, SplitKv::on, false, false, 256, 130},
                      NonFiniteCase{"v_minus_inf_bf16_window8_d256_dim255", DType::bf16, 0xFF80, false, 8, SplitKv::off, false, false, 256, 255}),
    [](const auto& info) { return std::string(info.param.name); });

// The same over more work items than a GPU has SMs (40 sequences of 3 new
// tokens over the same 40 keys, 32/8 heads of 128: 320 items), where the
// decode kernel takes 4-subgroup workgroups and an fp8 cache's tiles are
// staged half a head at a time (PA_STAGE_HALVES, on an H200; a 16-bit
// cache's 16-row tiles stay whole): the partly seen tiles' non-finite V
// values are staged as 0 in each half.
struct ManyItemsCase {
  const char* name;
  DType cache;
  uint32_t bad_bits;
  int32_t window = 0;
  DType q = DType::f16;   // bf16: the bf16 matrix modules
  // Head size 256 (half the head staged at a time where items outnumber the
  // SMs): 8/8 heads, so that an item's 3 rows keep 4-row tiles.
  uint32_t head_size = 128;
  uint32_t dim = 5;   // the planted element's head dim
};
void PrintTo(const ManyItemsCase& c, std::ostream* os) { *os << c.name; }
class PagedAttentionNonFiniteManyItems : public VkTest, public ::testing::WithParamInterface<ManyItemsCase> {};

TEST_P(PagedAttentionNonFiniteManyItems, ReachesOnlyTheRowsThatSeeIt) {
  const ManyItemsCase& p = GetParam();
  const uint32_t bs = 16, Hkv = 8, D = p.head_size, Hq = D == 256 ? 8 : 32, T = 3, len = 40, seqs = 40;
  KvCacheConfig cfg{.num_blocks = 3, .block_size = bs, .num_kv_heads = Hkv, .head_size = D, .dtype = p.cache};
  PagedKvCache cache(ctx(), cfg);
  cache.fill(p.cache == DType::fp8_e4m3 ? 0x28282828u
             : p.cache == DType::f16    ? 0x34003400u
             : p.cache == DType::bf16   ? 0x3E803E80u
                                        : 0x34343434u);   // 0.25
  const size_t es = dtype_size(p.cache);
  auto plant = [&](uint32_t pos) {   // kv head 1, dim p.dim
    auto bytes = cache.read_blocks(KvPart::value, pos / bs, 1);
    std::memcpy(&bytes[cache.element_in_block(KvPart::value, pos % bs, 1, p.dim) * es], &p.bad_bits, es);
    cache.write_blocks(KvPart::value, pos / bs, bytes);
  };
  plant(39);   // seen by the last token only
  if (p.window) {
    plant(2);    // by none
    plant(30);   // by the first token only (position 37, window 8)
  }
  std::vector<int32_t> starts, lens, table;
  for (uint32_t s = 0; s <= seqs; ++s) starts.push_back(int32_t(s * T));
  for (uint32_t s = 0; s < seqs; ++s) {
    lens.push_back(int32_t(len));
    table.insert(table.end(), {0, 1, 2});   // every sequence over the same blocks
  }
  DeviceBatch batch(ctx(), starts, lens, table, 3);
  PagedAttentionPlanOptions o;
  o.prefill = PrefillKernel::off;
  PagedAttentionPlan plan(ctx(), cfg, Hq, p.q, batch.lengths(), o);
  // (On an H200's 132 SMs the tiles are staged in halves; the CPU device runs the scalar kernel.)
  // (bf16 q with K/V matrices built in registers always: ScheduleProblem::registers_hold_two.)
  // (Head size 256: where the items outnumber the SMs, ScheduleProblem::head_halves.)
  const uint32_t sms = ctx().capabilities().scheduling_multiprocessors;
  const bool head_halves = D == 256 && seqs * Hkv > sms;
  const bool fp8 = dtype_size(p.cache) == 1;   // (whose modules stage halves where 3 per SM pay)
  const bool halves = plan.path() != Path::scalar &&
                      (head_halves || detail::registers_hold_two(plan.data()) ||
                       (fp8 && detail::half_staging_pays(plan.path(), ctx().capabilities().scheduling_multiprocessors,
                                                 std::vector<int64_t>(seqs * Hkv, len), detail::half_staging_wave(p.q))));
  EXPECT_EQ(plan.data().schedule.stage_halves, halves);
  const uint32_t tokens = seqs * T;
  const auto o_ = run_with_unit_queries(ctx(), plan, cache, batch, tokens, Hq, D, p.q, p.window);
  expect_nonfinite_exactly_where_seen(o_, tokens, Hq, D, [&](uint32_t t, uint32_t h, uint32_t d) {
    return (t % T == T - 1 || (p.window && t % T == 0)) && h / (Hq / Hkv) == 1 && d == p.dim;
  });
}

INSTANTIATE_TEST_SUITE_P(Cases, PagedAttentionNonFiniteManyItems,
                         ::testing::Values(ManyItemsCase{"v_nan_e4m3", DType::fp8_e4m3, 0x7F},
                                           ManyItemsCase{"v_inf_e5m2_window8", DType::fp8_e5m2, 0x7C, 8},
                                           ManyItemsCase{"v_nan_e4m3_window8_qbf16", DType::fp8_e4m3, 0x7F, 8, DType::bf16},
                                           ManyItemsCase{"v_nan_f16_window8", DType::f16, 0x7E00, 8},
                                           ManyItemsCase{"v_inf_bf16_dim100", DType::bf16, 0x7F80, 0, DType::bf16, 128, 100},
                                           ManyItemsCase{"v_nan_f16_window8_d256_dim200", DType::f16, 0x7E00, 8, DType::f16, 256, 200},
                                           ManyItemsCase{"v_minus_inf_f16_d256", DType::f16, 0xFC00, 0, DType::f16, 256},
                                           ManyItemsCase{"v_inf_bf16_window8_d256_dim129", DType::bf16, 0x7F80, 8, DType::bf16, 256, 129},
                                           ManyItemsCase{"v_nan_e4m3_window8_d256_dim250", DType::fp8_e4m3, 0x7F, 8, DType::f16, 256, 250},
                                           ManyItemsCase{"v_inf_e5m2_d256_dim100", DType::fp8_e5m2, 0x7C, 0, DType::f16, 256, 100}),
                         [](const auto& info) { return std::string(info.param.name); });

// The bf16 modules' 8-subgroup workgroups hold several head slices in each
// accumulator, where a non-finite V value would reach the other slices' dims
// (0 x Inf is NaN): such outputs are computed again key by key. One decode
// token, GQA 4 (4 slices per accumulator) or 8 (2), 256 keys of 0.25 (8
// subgroups, unsplit or in 2 segments; GQA 8 in 4 segments of 64 keys, one
// tile for each of 4 subgroups: 8 would not fit packed), and in kv head 1: NaN
// at dim 5, +Inf at dim 37 (a slice that dim 5's NaN shares an accumulator
// with), -Inf at dim 70, and +Inf and -Inf at dim 90 (NaN). e4m3 has no
// infinities: NaN at 5 and 37.
struct PackedNonFiniteCase {
  const char* name;
  DType cache;
  SplitKv split = SplitKv::off;
  uint32_t gqa = 4;
  uint32_t segments = 2;   // with SplitKv::on
};
void PrintTo(const PackedNonFiniteCase& c, std::ostream* os) { *os << c.name; }
class PackedSlicesNonFinite : public VkTest, public ::testing::WithParamInterface<PackedNonFiniteCase> {};

TEST_P(PackedSlicesNonFinite, KeepEachValueInItsOwnDim) {
  const PackedNonFiniteCase& p = GetParam();
  const uint32_t bs = 16, Hkv = 2, Hq = Hkv * p.gqa, D = 128, len = 256;
  KvCacheConfig cfg{.num_blocks = len / bs, .block_size = bs, .num_kv_heads = Hkv, .head_size = D, .dtype = p.cache};
  PagedKvCache cache(ctx(), cfg);
  const bool e4m3 = p.cache == DType::fp8_e4m3, e5m2 = p.cache == DType::fp8_e5m2;
  cache.fill(e4m3 ? 0x28282828u : e5m2 ? 0x34343434u : 0x3E803E80u);   // 0.25
  const uint32_t nan = e4m3 ? 0x7F : e5m2 ? 0x7E : 0x7FC0, inf = e5m2 ? 0x7C : 0x7F80, minus_inf = e5m2 ? 0xFC : 0xFF80;
  const size_t es = dtype_size(p.cache);
  auto plant = [&](uint32_t pos, uint32_t dim, uint32_t bits) {
    auto bytes = cache.read_blocks(KvPart::value, pos / bs, 1);
    std::memcpy(&bytes[cache.element_in_block(KvPart::value, pos % bs, 1, dim) * es], &bits, es);
    cache.write_blocks(KvPart::value, pos / bs, bytes);
  };
  const float f_nan = std::numeric_limits<float>::quiet_NaN(), f_inf = std::numeric_limits<float>::infinity();
  std::vector<std::pair<uint32_t, float>> want;   // dim of kv head 1, its output
  plant(100, 5, nan);
  want.push_back({5, f_nan});
  if (e4m3) {
    plant(200, 37, nan);
    want.push_back({37, f_nan});
  } else {
    plant(200, 37, inf);
    plant(50, 70, minus_inf);
    plant(10, 90, inf);
    plant(220, 90, minus_inf);
    want.insert(want.end(), {{37, f_inf}, {70, -f_inf}, {90, f_nan}});
  }
  std::vector<int32_t> table(len / bs);
  for (uint32_t i = 0; i < len / bs; ++i) table[i] = int32_t(i);
  DeviceBatch batch(ctx(), {0, 1}, {int32_t(len)}, table, len / bs);
  PagedAttentionPlanOptions o;
  o.split = p.split;
  o.num_segments = p.split == SplitKv::on ? p.segments : 0;
  PagedAttentionPlan plan(ctx(), cfg, Hq, DType::bf16, batch.lengths(), o);
  const uint32_t keys = len / plan.num_segments();   // per work item: 8 subgroups from 128 keys (pack_slices)
  if (plan.path() != Path::scalar && ctx().capabilities().subgroup_size == 32)
    ASSERT_EQ(plan.workgroup_size(), (keys >= 128 ? 8u : 4u) * 32u) << "the workgroups this case means to cover";
  const auto got = run_with_unit_queries(ctx(), plan, cache, batch, 1, Hq, D, DType::bf16, 0);
  for (uint32_t h = 0; h < Hq; ++h)
    for (uint32_t d = 0; d < D; ++d) {
      const float x = got[h * D + d];
      float w = 0.25f;
      for (const auto& [dim, value] : want)
        if (h >= Hq / 2 && d == dim) w = value;
      if (std::isnan(w))
        EXPECT_TRUE(std::isnan(x)) << "head " << h << " dim " << d << " gave " << x << ", expected NaN";
      else
        EXPECT_EQ(x, w) << "head " << h << " dim " << d << " (path " << path_name(plan.path()) << ")";
    }
}

INSTANTIATE_TEST_SUITE_P(Cases, PackedSlicesNonFinite,
                         ::testing::Values(PackedNonFiniteCase{"bf16", DType::bf16},
                                           PackedNonFiniteCase{"bf16_split", DType::bf16, SplitKv::on},
                                           PackedNonFiniteCase{"e4m3_q_bf16", DType::fp8_e4m3},
                                           PackedNonFiniteCase{"e5m2_q_bf16_split", DType::fp8_e5m2, SplitKv::on},
                                           PackedNonFiniteCase{"bf16_gqa8_split4", DType::bf16, SplitKv::on, 8, 4}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace vkattn::test
