// DType, KvLayout and plan-option values outside their enums (a cast from an application's
// integer) are refused with vkattn::Error wherever the public API takes one.
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

const DType kBadDType = static_cast<DType>(42);
const KvLayout kBadLayout = static_cast<KvLayout>(7);

TEST(InvalidEnums, NamesAndSizes) {
  EXPECT_VKATTN_ERROR(dtype_name(kBadDType), "dtype_name", "unknown dtype value 42", "expected f16, bf16");
  EXPECT_VKATTN_ERROR(dtype_size(kBadDType), "dtype_size", "unknown dtype value 42", "expected f16, bf16");
  EXPECT_VKATTN_ERROR(layout_name(kBadLayout), "layout_name", "unknown KV-cache layout value 7", "expected nhd, hnd or split");
  EXPECT_FALSE(is_fp8(kBadDType));
  EXPECT_VKATTN_ERROR(TensorView::contiguous(BufferRef{}, kBadDType, {4}).end_byte(), "unknown dtype value 42");
}

class InvalidEnumsOnDevice : public VkTest {};

TEST_F(InvalidEnumsOnDevice, CacheConfig) {
  const KvCacheConfig ok{.num_blocks = 2, .block_size = 16, .num_kv_heads = 1, .head_size = 16};
  KvCacheConfig bad_layout = ok, bad_dtype = ok;
  bad_layout.layout = kBadLayout;
  bad_dtype.dtype = kBadDType;
  EXPECT_VKATTN_ERROR(PagedKvCache(ctx(), bad_layout), "layout = KvLayout(7)", "nhd, hnd or split");
  EXPECT_VKATTN_ERROR(PagedKvCache(ctx(), bad_dtype), "dtype = DType(42)", "f16, bf16, fp8_e4m3 or fp8_e5m2");
}

TEST_F(InvalidEnumsOnDevice, PlanOptions) {
  const KvCacheConfig cfg{.num_blocks = 2, .block_size = 16, .num_kv_heads = 1, .head_size = 16};
  const std::vector<int32_t> qsl = {0, 1}, lens = {1};
  PagedAttentionPlanOptions bad_split, bad_prefill;
  bad_split.split = static_cast<SplitKv>(9);
  bad_prefill.prefill = static_cast<PrefillKernel>(5);
  EXPECT_VKATTN_ERROR(PagedAttentionPlan(ctx(), cfg, 1, DType::f16, PagedAttentionLengths{qsl, lens}, bad_split),
                      "options.split = SplitKv(9)", "expected automatic, off or on");
  EXPECT_VKATTN_ERROR(PagedAttentionPlan(ctx(), cfg, 1, DType::f16, PagedAttentionLengths{qsl, lens}, bad_prefill),
                      "options.prefill = PrefillKernel(5)", "expected automatic, off or on");
}

TEST_F(InvalidEnumsOnDevice, WriteKvCacheViews) {
  PagedKvCache cache(ctx(), {.num_blocks = 2, .block_size = 16, .num_kv_heads = 1, .head_size = 16});
  Buffer kv(ctx(), 3 * 16 * 4), slots(ctx(), 3 * 8);
  auto view = [&](Buffer& b, DType t, std::vector<int64_t> shape) { return TensorView::contiguous(b, t, std::move(shape)); };
  const TensorView good_kv = view(kv, DType::f16, {3, 1, 16}), good_slots = view(slots, DType::i64, {3});
  EXPECT_VKATTN_ERROR(write_kv_cache(ctx(), cache, view(kv, kBadDType, {3, 1, 16}), good_kv, good_slots),
                      "key has dtype DType(42), expected f16, bf16, f32");
  EXPECT_VKATTN_ERROR(write_kv_cache(ctx(), cache, good_kv, view(kv, kBadDType, {3, 1, 16}), good_slots),
                      "value has dtype DType(42), expected f16");
  EXPECT_VKATTN_ERROR(write_kv_cache(ctx(), cache, good_kv, good_kv, view(slots, kBadDType, {3})),
                      "slot_mapping has dtype DType(42), expected i64, i32");
}

}  // namespace
}  // namespace vkattn::test
