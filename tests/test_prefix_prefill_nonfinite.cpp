// prefix_prefill with a non-finite value among the keys: it reaches exactly
// the rows that see it, whether it lies in the cached context or in the new
// tokens' K/V views. On the matrix paths the prefill kernel takes these rows
// (PrefillKernel::on); over a cache of q's dtype its item walks both sources
// unsplit, and the one 64-key tile holds the context's end (37), so every
// value here is staged by the key-by-key loads of that mixed tile and any
// correction after the key loop reads each key from its own source. fp8
// caches keep two segments. The scalar path runs the same case.
//
// The cases of 80 new tokens give the prefill kernel items (16 tokens of
// 128 packed rows) whose tiles hold keys outside the item, which read a
// stand-in new token (kv_source.glsl): past the item's last key in every
// item's last tile, and with an fp8 cache, before the new tokens' segment
// starts, in its first tile (from 32), which the item from position 101
// on sees whole; with a window of 8, before a later item's window starts
// in the new tokens (the item from position 101 sees keys from 94 on, its
// first tile starts at 80). An infinity there must come back as that
// infinity, not as the NaN of 0 x Inf. (Stand-ins are the bf16 coopmat2 modules' form; the
// others read zeros there, and the f16 cases check that they still do.)
#include <cstring>

#include "device_batch.hpp"
#include "nonfinite_outputs.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

struct Case {
  const char* name;
  DType cache = DType::f16;
  uint32_t bad_bits = 0;      // the value planted, in the cache's dtype (the new K/V's for positions >= 37)
  bool in_k = false;          // planted in K instead of V
  int32_t window = 0;
  bool at_36 = false;         // also at position 36 (the context's last key), which every token sees
  bool at_37 = false;         // also at position 37 (the first new token's), which every token sees
  uint32_t new_tokens = 3;
  bool exact = false;         // the planted infinity must come back as itself (not only as non-finite)
  bool bf16_q = false;        // bf16 q (and new K/V) over this cache
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class PrefixPrefillNonFinite : public VkTest, public ::testing::WithParamInterface<Case> {};

// One sequence: a context of 37 keys in the cache and 3 new tokens
// (positions 37, 38, 39; or 80) in their own K/V tensors, 16 q heads over 2
// kv heads of 64 (8 packed rows a token), every value 0.25 but one element
// of kv head 1, dim 5: at the last position (a new token, seen only by the
// last), and with a window of 8 at positions 2 (seen by none) and 30 (seen
// only by the first token).
TEST_P(PrefixPrefillNonFinite, ReachesOnlyTheRowsThatSeeIt) {
  const Case& p = GetParam();
  const uint32_t bs = 16, Hkv = 2, Hq = 16, D = 64, T = p.new_tokens, ctx_len = 37, len = ctx_len + T;
  KvCacheConfig cfg{.num_blocks = 4, .block_size = bs, .num_kv_heads = Hkv, .head_size = D, .dtype = p.cache};
  PagedKvCache cache(ctx(), cfg);
  const uint32_t quarter = p.cache == DType::f16        ? 0x34003400u
                           : p.cache == DType::bf16     ? 0x3E803E80u
                           : p.cache == DType::fp8_e4m3 ? 0x28282828u
                                                        : 0x34343434u;
  cache.fill(quarter);   // 0.25 in every format used here
  const DType qt = p.cache == DType::bf16 || p.bf16_q ? DType::bf16 : DType::f16;
  const uint32_t q_quarter = qt == DType::bf16 ? 0x3E803E80u : 0x34003400u;
  Buffer q(ctx(), T * Hq * D * 2), key(ctx(), T * Hkv * D * 2), value(ctx(), T * Hkv * D * 2), out(ctx(), T * Hq * D * 4);
  std::vector<uint16_t> new_k(T * Hkv * D, uint16_t(q_quarter)), new_v = new_k;
  auto plant = [&](uint32_t pos, uint32_t bits_cache, uint16_t bits_new) {
    if (pos >= ctx_len) {   // a new token's row
      (p.in_k ? new_k : new_v)[((pos - ctx_len) * Hkv + 1) * D + 5] = bits_new;
      return;
    }
    const KvPart part = p.in_k ? KvPart::key : KvPart::value;
    auto bytes = cache.read_blocks(part, pos / bs, 1);
    const uint64_t e = cache.element_in_block(part, pos % bs, 1, 5);
    std::memcpy(&bytes[e * dtype_size(p.cache)], &bits_cache, dtype_size(p.cache));
    cache.write_blocks(part, pos / bs, bytes);
  };
  // The new tokens are q's dtype: NaN or an infinity of the same sign there.
  const bool nan = p.cache == DType::f16 ? (p.bad_bits & 0x3FF) != 0
                   : p.cache == DType::bf16 ? (p.bad_bits & 0x7F) != 0
                   : p.cache == DType::fp8_e4m3 ? true
                                                : (p.bad_bits & 0x3) != 0;
  const bool negative = p.cache == DType::f16 || p.cache == DType::bf16 ? (p.bad_bits & 0x8000) != 0 : (p.bad_bits & 0x80) != 0;
  const uint16_t as_new = qt == DType::bf16 ? uint16_t(nan ? 0x7FC0 : negative ? 0xFF80 : 0x7F80)
                                            : uint16_t(nan ? 0x7E00 : negative ? 0xFC00 : 0x7C00);
  plant(len - 1, p.bad_bits, as_new);
  if (p.window) {
    plant(2, p.bad_bits, as_new);
    plant(30, p.bad_bits, as_new);
  }
  if (p.at_36) plant(36, p.bad_bits, as_new);
  if (p.at_37) plant(37, p.bad_bits, as_new);
  key.upload(new_k.data(), new_k.size() * 2);
  value.upload(new_v.data(), new_v.size() * 2);
  q.fill(qt == DType::bf16 ? 0x3F803F80u : 0x3C003C00u);   // 1.0
  out.fill(0xFFFFFFFFu);

  DeviceBatch batch(ctx(), {0, int32_t(T)}, {int32_t(len)}, {0, 1, 2}, 3);
  PrefixPrefillOptions o;
  o.prefill = PrefillKernel::on;
  PrefixPrefillPlan plan(ctx(), cfg, Hq, qt, batch.lengths(), o);
  if (plan.attention().path() != Path::scalar) {
    EXPECT_TRUE(plan.attention().routes_prefill()) << "the case means to cover the prefill kernel";
  }
  PrefixPrefillArgs a;
  a.q = TensorView::contiguous(q, qt, {T, Hq, D});
  a.key = TensorView::contiguous(key, qt, {T, Hkv, D});
  a.value = TensorView::contiguous(value, qt, {T, Hkv, D});
  a.out = TensorView::contiguous(out, DType::f32, {T, Hq, D});
  a.batch = batch.view();
  a.params.scale = 0.125f;
  a.params.sliding_window = p.window;
  prefix_prefill(ctx(), plan, cache, a);
  const auto o_ = out.download_as<float>(T * Hq * D);
  // The upper half of the heads reads kv head 1; the last token sees the
  // last position, the first (position 37) position 30 through a window of 8.
  const float exactly = !p.exact ? NAN : negative ? -INFINITY : INFINITY;
  expect_nonfinite_exactly_where_seen(
      o_, T, Hq, D,
      [&](uint32_t t, uint32_t h, uint32_t d) {
        return (t == T - 1 || (p.window && t == 0) || p.at_36 || p.at_37) && h >= Hq / 2 && (d == 5 || p.in_k);
      },
      exactly);
}

INSTANTIATE_TEST_SUITE_P(Cases, PrefixPrefillNonFinite,
                         ::testing::Values(Case{"v_nan_f16", DType::f16, 0x7E00},
                                           Case{"v_minus_inf_f16_window8", DType::f16, 0xFC00, false, 8},
                                           Case{"k_nan_f16_window8", DType::f16, 0x7E00, true, 8},
                                           Case{"v_inf_f16_window8_at36", DType::f16, 0x7C00, false, 8, true},
                                           Case{"v_nan_f16_at37", DType::f16, 0x7E00, false, 0, false, true},
                                           Case{"v_nan_bf16_window8_at36", DType::bf16, 0x7FC0, false, 8, true},
                                           Case{"v_inf_e5m2_window8_at37", DType::fp8_e5m2, 0x7C, false, 8, false, true},
                                           Case{"v_inf_f16_80_tokens_last", DType::f16, 0x7C00, false, 0, false, false, 80, true},
                                           Case{"v_minus_inf_e5m2_80_tokens_at37", DType::fp8_e5m2, 0xFC, false, 0, false, true, 80, true},
                                           Case{"v_inf_bf16_80_tokens_last", DType::bf16, 0x7F80, false, 0, false, false, 80, true},
                                           Case{"v_inf_bf16_window8_80_tokens", DType::bf16, 0x7F80, false, 8, false, false, 80, true},
                                           Case{"v_minus_inf_bf16_q_e5m2_80_tokens_at37", DType::fp8_e5m2, 0xFC, false, 0, false, true, 80, true,
                                                true}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace vkattn::test
