// Every fp8 code, as the attention kernels decode it: one sequence of one key
// whose V row (head size 256) holds all 256 codes, so that the output, with
// P = 1 and the sum 1, is each decoded value itself, exactly (NaN codes NaN,
// e5m2's infinities infinite). Every path the device runs, f16 and bf16
// queries (the matrix kernel's f16 and bf16 modules), and both V layouts the
// loads differ for (contiguous dims, and split, whose dims lie apart); and
// at head size 128, half the codes at a time, where the matrix paths build
// the K and V matrices in registers (paged_attention_subgroup.comp,
// REGISTER_MATRICES, on a device whose matrix element order allows it).
#include <cmath>
#include <cstring>

#include <vkattn_ref/number_formats.hpp>

#include "device_batch.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

struct Fp8DecodeCase {
  const char* name;
  DType cache;
  DType q;
  KvLayout layout;
  uint32_t head_size = 256;
  uint32_t first_code = 0;   // V's dim d holds code first_code + d
};
void PrintTo(const Fp8DecodeCase& c, std::ostream* os) { *os << c.name; }

class Fp8Decode : public VkTest, public ::testing::WithParamInterface<Fp8DecodeCase> {};

TEST_P(Fp8Decode, EveryCodeReadsAsTheReferenceDecodesIt) {
  const Fp8DecodeCase& p = GetParam();
  const uint32_t D = p.head_size;
  KvCacheConfig cfg{.num_blocks = 2, .block_size = 16, .num_kv_heads = 1, .head_size = D, .dtype = p.cache, .layout = p.layout};
  PagedKvCache cache(ctx(), cfg);
  cache.fill(p.cache == DType::fp8_e4m3 ? 0x28282828u : 0x34343434u);   // 0.25: K, and V outside key 0
  auto v = cache.read_blocks(KvPart::value, 1, 1);
  for (uint32_t d = 0; d < D; ++d) v[cache.element_in_block(KvPart::value, 0, 0, d)] = static_cast<uint8_t>(p.first_code + d);
  cache.write_blocks(KvPart::value, 1, v);

  DeviceBatch batch(ctx(), {0, 1}, {1}, {1}, 1);
  PagedAttentionPlan plan(ctx(), cfg, 1, p.q, batch.lengths());
  Buffer q(ctx(), D * 2), out(ctx(), D * 4);
  q.fill(p.q == DType::bf16 ? 0x3F803F80u : 0x3C003C00u);   // 1.0
  out.fill(0xFFFFFFFFu);
  PagedAttentionArgs a;
  a.q = TensorView::contiguous(q, p.q, {1, 1, D});
  a.out = TensorView::contiguous(out, DType::f32, {1, 1, D});
  a.batch = batch.view();
  a.params.scale = 0.0625f;
  paged_attention(ctx(), plan, cache, a);
  const auto o = out.download_as<float>(D);
  const ref::Format f = p.cache == DType::fp8_e4m3 ? ref::Format::e4m3 : ref::Format::e5m2;
  for (uint32_t d = 0; d < D; ++d) {
    const uint32_t code = p.first_code + d;
    const double want = ref::decode(f, code);
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(o[d])) << "code 0x" << std::hex << code << " gave " << o[d] << ", expected NaN";
    else
      EXPECT_EQ(double(o[d]), want) << "code 0x" << std::hex << code << " (path " << path_name(plan.path()) << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Codes, Fp8Decode,
                         ::testing::Values(Fp8DecodeCase{"e4m3_q_f16", DType::fp8_e4m3, DType::f16, KvLayout::nhd},
                                           Fp8DecodeCase{"e5m2_q_f16", DType::fp8_e5m2, DType::f16, KvLayout::nhd},
                                           Fp8DecodeCase{"e4m3_q_bf16", DType::fp8_e4m3, DType::bf16, KvLayout::nhd},
                                           Fp8DecodeCase{"e5m2_q_bf16", DType::fp8_e5m2, DType::bf16, KvLayout::nhd},
                                           Fp8DecodeCase{"e4m3_q_f16_split", DType::fp8_e4m3, DType::f16, KvLayout::split},
                                           Fp8DecodeCase{"e5m2_q_f16_split", DType::fp8_e5m2, DType::f16, KvLayout::split},
                                           Fp8DecodeCase{"e4m3_q_f16_d128_low", DType::fp8_e4m3, DType::f16, KvLayout::nhd, 128, 0},
                                           Fp8DecodeCase{"e4m3_q_f16_d128_high", DType::fp8_e4m3, DType::f16, KvLayout::nhd, 128, 128},
                                           Fp8DecodeCase{"e5m2_q_f16_d128_low", DType::fp8_e5m2, DType::f16, KvLayout::nhd, 128, 0},
                                           Fp8DecodeCase{"e5m2_q_f16_d128_high", DType::fp8_e5m2, DType::f16, KvLayout::nhd, 128, 128},
                                           Fp8DecodeCase{"e4m3_q_bf16_d128_low", DType::fp8_e4m3, DType::bf16, KvLayout::nhd, 128, 0},
                                           Fp8DecodeCase{"e4m3_q_bf16_d128_high", DType::fp8_e4m3, DType::bf16, KvLayout::nhd, 128, 128},
                                           Fp8DecodeCase{"e5m2_q_bf16_d128_low", DType::fp8_e5m2, DType::bf16, KvLayout::nhd, 128, 0},
                                           Fp8DecodeCase{"e5m2_q_bf16_d128_high", DType::fp8_e5m2, DType::bf16, KvLayout::nhd, 128, 128}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace vkattn::test
