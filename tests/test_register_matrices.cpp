// fp8 K/V matrices built in registers (paged_attention_subgroup.comp,
// REGISTER_MATRICES) where the Context found the device's matrix element
// order to be abi/matrix_element_order.h's, staged through shared memory
// elsewhere: the order's check, the probe, and both forms against the
// float64 reference on the same batches.
#include <numeric>

#include "abi/matrix_element_order.h"
#include "attention_cases.hpp"
#include "context_impl.hpp"
#include "device_batch.hpp"
#include "matrix_element_order.hpp"
#include "ops/paged_attention_plan.hpp"
#include "runners/block_sparse_runner.hpp"
#include "vk_test.hpp"
#include <vkattn/block_sparse.hpp>

namespace vkattn::test {
namespace {

// The A matrix's positions, then the accumulator's (the same, as the H200 has them).
std::vector<uint32_t> known_order() {
  std::vector<uint32_t> w(MEO_OUTPUT_WORDS);
  for (uint32_t at : {0u, MEO_ACC_WORDS}) {
    w[at] = MEO_ELEMENTS;
    for (uint32_t lane = 0; lane < MEO_LANES; ++lane)
      for (uint32_t i = 0; i < MEO_ELEMENTS; ++i) w[at + 1 + lane * MEO_ELEMENTS + i] = MEO_POSITION(lane, i);
  }
  return w;
}

TEST(MatrixElementOrder, OnlyTheKernelsOrderIsRecognised) {
  std::vector<uint32_t> w = known_order();
  EXPECT_TRUE(detail::is_register_order(w));
  // Every position of the 16 x 16 matrix once.
  std::vector<uint32_t> seen(256, 0);
  for (uint32_t k = 1; k < MEO_ACC_WORDS; ++k) ++seen.at(w[k]);
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1u), 256);
  std::swap(w[1 + 5 * MEO_ELEMENTS + 2], w[1 + 5 * MEO_ELEMENTS + 4]);   // rows g and g + 8 the other way round
  EXPECT_FALSE(detail::is_register_order(w));
  w = known_order();
  w[0] = 16;   // another length()
  EXPECT_FALSE(detail::is_register_order(w));
  w = known_order();
  w.pop_back();
  EXPECT_FALSE(detail::is_register_order(w));
}

// The prefill kernel's softmax takes each lane's accumulator elements 0-3
// in row lane / 4 and 4-7 in row lane / 4 + 8, and on the KHR path their
// columns too (its masks' keys) and P's A matrices set element by element
// (A's element i where the accumulator's is): the whole positions.
TEST(MatrixElementOrder, TheAccumulatorsPositionsAreChecked) {
  const uint32_t lane5 = MEO_ACC_WORDS + 1 + 5 * MEO_ELEMENTS;
  std::vector<uint32_t> w = known_order();
  std::swap(w[lane5 + 0], w[lane5 + 1]);   // two columns of a row the other way round
  EXPECT_FALSE(detail::is_register_order(w));
  w = known_order();
  std::swap(w[lane5 + 2], w[lane5 + 4]);   // an element of row g + 8 where row g's is expected
  EXPECT_FALSE(detail::is_register_order(w));
  w = known_order();
  w[MEO_ACC_WORDS] = 4;   // another length()
  EXPECT_FALSE(detail::is_register_order(w));
}

class RegisterMatrices : public VkTest {};

// The probe runs where there are KHR cooperative matrices and 32-wide
// subgroups; NVIDIA's driver has the order (the H200's, measured).
TEST_F(RegisterMatrices, TheProbeFindsTheOrderOnNvidia) {
  const Capabilities& c = ctx().capabilities();
  if (!c.coopmat || c.subgroup_size != MEO_LANES) {
    EXPECT_FALSE(c.coopmat_register_order);
    GTEST_SKIP() << "no KHR cooperative matrices with 32-wide subgroups on " << c.device_name;
  }
  EXPECT_EQ(detail::probe_register_order(ctx().impl()), c.coopmat_register_order);
  if (c.vendor_id == 0x10DE) EXPECT_TRUE(c.coopmat_register_order) << c.driver_info;
}

// Which plans take the register form: fp8 caches of head size 128 outside
// the split layout, on a matrix path, where the Context knows the order.
TEST_F(RegisterMatrices, PlansTakeThemOnlyWhereTheyApply) {
  DeviceBatch batch(ctx(), {0, 1}, {20}, {0, 1}, 2);
  auto plan_takes = [&](DType cache, KvLayout layout, uint32_t head_size, DType q) {
    KvCacheConfig cfg{.num_blocks = 2, .block_size = 16, .num_kv_heads = 8, .head_size = head_size, .dtype = cache, .layout = layout};
    PagedAttentionPlan plan(ctx(), cfg, 32, q, batch.lengths());
    return std::pair<bool, bool>{plan.data().register_matrices, plan.path() != Path::scalar};
  };
  for (bool order : {false, true}) {
    ctx().impl().caps.coopmat_register_order = order;
    for (DType q : {DType::f16, DType::bf16}) {
      if (q == DType::bf16 && !ctx().capabilities().bfloat16) continue;
      for (DType cache : {DType::fp8_e4m3, DType::fp8_e5m2}) {
        const auto [takes, matrix] = plan_takes(cache, KvLayout::nhd, 128, q);
        EXPECT_EQ(takes, order && matrix) << dtype_name(q) << " q, " << dtype_name(cache);
        EXPECT_FALSE(plan_takes(cache, KvLayout::split, 128, q).first);
        EXPECT_FALSE(plan_takes(cache, KvLayout::nhd, 64, q).first);
      }
      EXPECT_FALSE(plan_takes(DType::f16, KvLayout::nhd, 128, DType::f16).first);
    }
  }
}

// Decode rows and rows of several tokens (partly seen tiles, whose
// non-finite V values the kernel zeroes in registers too) over e4m3 and e5m2
// caches of head size 128, f16 and bf16 q, with a window and a split: in
// registers where the device allows, then staged, each checked against the
// reference.
TEST_F(RegisterMatrices, AgreeWithTheReferenceAsStagingDoes) {
  if (!ctx().capabilities().coopmat_register_order) GTEST_SKIP() << "the device's matrix element order is not the kernel's";
  for (DType q : {DType::f16, DType::bf16}) {
    if (q == DType::bf16 && !ctx().capabilities().bf16_matrices) continue;
    for (DType cache : {DType::fp8_e4m3, DType::fp8_e5m2}) {
      for (bool registers : {true, false}) {
        ctx().impl().caps.coopmat_register_order = registers;
        const std::string what = std::string(dtype_name(q)) + " q, " + std::string(dtype_name(cache)) +
                                 (registers ? ", in registers: " : ", staged: ");
        auto c = attention_case({{1, 1328}, {3, 40}, {1, 37}, {17, 300}}, 32, 8, 128, 16, cache, KvLayout::nhd, 611);
        c.q_dtype = q;
        c.sliding_window = 200;
        c.split = SplitKv::on;
        c.num_segments = 3;
        c.with_lse = true;
        const auto r = tool::run_paged_attention(ctx(), c);
        EXPECT_TRUE(r.pass) << what << r.summary << "\n" << r.failure;
        auto d = attention_case({{1, 4096}, {1, 100}}, 32, 8, 128, 32, cache, KvLayout::hnd, 612);
        d.q_dtype = q;
        const auto s = tool::run_paged_attention(ctx(), d);
        EXPECT_TRUE(s.pass) << what << s.summary << "\n" << s.failure;
      }
    }
  }
  ctx().impl().caps.coopmat_register_order = true;
}

// The prefill kernel's softmax runs on the accumulators' elements in the
// order, on either matrix path (the KHR module masks them by their columns
// and sets P's A elements from them), in workgroups of 8 subgroups; without
// the order (another device's, or a Context that could not probe) the KHR
// module runs with S and P through shared memory, in workgroups of 4, and
// agrees with the reference: prefill-kernel batches with a window, sinks and
// the LSE at head sizes 128 and 256 (pairs of subgroups), an ALiBi and
// softcap batch, and block-sparse attention with a window. (The form in
// registers is what every other test of these ops runs where the device has
// the order, on each matrix path.)
TEST_F(RegisterMatrices, ThePrefillKernelsSoftmaxRunsInRegistersOnlyWithTheOrder) {
  const Path matrix = ctx().path_for("paged_prefill");
  if (!ctx().capabilities().coopmat_register_order || matrix == Path::scalar)
    GTEST_SKIP() << "needs a matrix path and the order";
  BlockSparseVariant v;
  v.num_q_heads = v.num_kv_heads = 2;
  v.head_size = 128;
  v.q_block_size = v.kv_block_size = 128;
  v.mods.all = kMaskCausal;
  for (bool order : {true, false}) {
    ctx().impl().caps.coopmat_register_order = order;
    const std::string form = order ? "softmax in registers: " : "softmax through shared memory: ";
    EXPECT_EQ(block_sparse_attention_path(ctx(), v), order ? matrix : Path::coopmat);
    {
      DeviceBatch batch(ctx(), {0, 300}, {300}, {0, 1}, 32);
      KvCacheConfig cfg{.num_blocks = 32, .block_size = 16, .num_kv_heads = 8, .head_size = 128};
      PagedAttentionPlanOptions o;
      o.prefill = PrefillKernel::on;
      PagedAttentionPlan plan(ctx(), cfg, 32, DType::f16, batch.lengths(), o);
      ASSERT_TRUE(plan.data().schedule.prefill.on) << form;
      EXPECT_EQ(plan.data().schedule.prefill.workgroup, order ? 256u : 128u) << form;
    }
    if (order) continue;
    for (uint32_t head_size : {128u, 256u}) {
      auto c = attention_case({{300, 300}, {129, 700}}, 32, 8, head_size, 16, DType::f16, KvLayout::nhd, 613);
      c.prefill = PrefillKernel::on;
      c.sliding_window = 250;
      c.sinks = true;
      c.with_lse = true;
      const auto r = tool::run_paged_attention(ctx(), c);
      EXPECT_TRUE(r.pass) << form << "head size " << head_size << ": " << r.summary << "\n" << r.failure;
    }
    auto a = attention_case({{200, 1000}, {64, 64}}, 16, 4, 128, 16, DType::f16, KvLayout::nhd, 614);
    a.prefill = PrefillKernel::on;
    a.alibi = true;
    a.softcap = 30.0f;
    const auto ra = tool::run_paged_attention(ctx(), a);
    EXPECT_TRUE(ra.pass) << form << "ALiBi and softcap: " << ra.summary << "\n" << ra.failure;
    tool::BlockSparseCase b;
    b.head_size = 128;
    b.q_len = b.kv_len = 384;
    b.q_block = b.kv_block = 128;
    b.mask = "causal,window:100";
    b.lse = true;
    b.seed = 615;
    const auto rb = tool::run_block_sparse(ctx(), b);
    EXPECT_TRUE(rb.pass) << form << "block-sparse: " << rb.summary << "\n" << rb.failure;
  }
  ctx().impl().caps.coopmat_register_order = true;
}

}  // namespace
}  // namespace vkattn::test
