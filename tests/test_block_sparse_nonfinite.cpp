// A non-finite value in block-sparse attention's K or V reaches exactly the
// rows that see it where the keys end inside a tile, in partial blocks and
// in full blocks that run past Lkv: whatever the kernels load for a tile's
// keys past Lkv (zeros now; a stand-in row, tried, needed those tiles zeroed
// and counted: DEVELOPERS.md, "A tile's phases by the subgroup clock") must
// neither carry a NaN to rows that do not see it nor lose it for rows that do.
// Where Lkv is a multiple of the tile, the tiles past it read key Lkv - 1's
// row and are skipped (block_sparse_io.glsl's rows without a test): the
// cases of length 192 plant their NaN in that row. The paged cases read K
// and V from a paged cache of the split layout (V's dims a block apart),
// whose slots past Lkv and unused blocks hold NaN that no row may see.
#include <cstring>
#include <memory>
#include <vector>

#include "nonfinite_outputs.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

// One batch, 2 heads of 64 (GQA 1), Lq = Lkv = 200 in blocks of 128: the
// second kv block holds keys 128..199 and runs 56 keys past Lkv (or, at
// length 192, keys 128..191 and 64 past: a whole tile of the prefill
// kernel's 64 keys, and two of 32). Every q
// and K value is 1.0 and every V value 0.25, so a row that sees no planted
// value averages back to 0.25.
struct NonFiniteCase {
  const char* name;
  bool causal = false;              // else every listed block is full
  bool in_k = false;                // planted in K instead of V
  std::vector<int32_t> positions;   // keys planted at (head 1, dim 5)
  uint32_t length = 200;            // Lq = Lkv
  bool paged = false;               // K/V from a paged cache (split layout, blocks of 16)
};
void PrintTo(const NonFiniteCase& c, std::ostream* os) { *os << c.name; }

class BlockSparseNonFinite : public VkTest, public ::testing::WithParamInterface<NonFiniteCase> {};

TEST_P(BlockSparseNonFinite, ReachesOnlyTheRowsThatSeeIt) {
  const NonFiniteCase& p = GetParam();
  constexpr uint32_t H = 2, D = 64, block = 128, dim = 5;
  const uint32_t L = p.length;
  const size_t elems = size_t(H) * L * D;
  Buffer q(ctx(), elems * 2), k(ctx(), elems * 2), v(ctx(), elems * 2), out(ctx(), elems * 4), meta(ctx(), 64);
  q.fill(0x3C003C00u);   // 1.0
  std::vector<uint16_t> kh(elems, 0x3C00), vh(elems, 0x3400);   // 1.0, 0.25
  for (int32_t pos : p.positions) (p.in_k ? kh : vh)[(size_t(1) * L + pos) * D + dim] = 0x7E00;   // NaN
  k.upload(kh.data(), kh.size() * 2);
  v.upload(vh.data(), vh.size() * 2);
  out.fill(0xFFFFFFFFu);
  // The paged cache: token t in block-table column t / 16, the columns'
  // blocks in reverse order; every other slot NaN.
  std::unique_ptr<PagedKvCache> cache;
  Buffer table;
  const uint32_t bs = 16, columns = (L + bs - 1) / bs;
  if (p.paged) {
    const KvCacheConfig cfg{.num_blocks = columns + 2, .block_size = bs, .num_kv_heads = H, .head_size = D,
                            .dtype = DType::f16, .layout = KvLayout::split};
    cache = std::make_unique<PagedKvCache>(ctx(), cfg);
    std::vector<int32_t> entries(columns);
    for (uint32_t j = 0; j < columns; ++j) entries[j] = int32_t(columns + 1 - j);
    table = Buffer(ctx(), columns * 4);
    table.upload(entries.data(), columns * 4);
    for (const auto& [part, values] : {std::pair{KvPart::key, &kh}, std::pair{KvPart::value, &vh}}) {
      std::vector<uint16_t> slots(size_t(cfg.num_blocks) * bs * H * D, 0x7E00);
      for (uint32_t h = 0; h < H; ++h)
        for (uint32_t t = 0; t < L; ++t)
          for (uint32_t e = 0; e < D; ++e)
            slots[size_t(entries[t / bs]) * bs * H * D + cache->element_in_block(part, t % bs, h, e)] = (*values)[(size_t(h) * L + t) * D + e];
      cache->write_blocks(part, 0, std::span(reinterpret_cast<const uint8_t*>(slots.data()), slots.size() * 2));
    }
  }
  // Two q blocks. Causal: q block 0 lists kv block 0 as partial, q block 1
  // kv block 1 as partial and kv block 0 as full. Full: q block 0 lists kv
  // block 0, q block 1 both, all full (no mask mod).
  const std::vector<int32_t> words = p.causal ? std::vector<int32_t>{1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0}
                                              : std::vector<int32_t>{0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 1};
  // Words: partial counts [2], partial indices [2][2], full counts [2], full indices [2][2].
  meta.upload(words.data(), words.size() * 4);
  BlockSparseArgs a;
  a.q = TensorView::contiguous(q, DType::f16, {1, H, L, D});
  if (p.paged) {
    a.paged_kv = BlockSparsePagedKv{cache.get(), TensorView::contiguous(table, DType::i32, {1, columns}), L};
  } else {
    a.k = TensorView::contiguous(k, DType::f16, {1, H, L, D});
    a.v = TensorView::contiguous(v, DType::f16, {1, H, L, D});
  }
  a.out = TensorView::contiguous(out, DType::f32, {1, H, L, D});
  a.mask.kv_num_blocks = TensorView::contiguous(meta, DType::i32, {1, 1, 2}, 0);
  a.mask.kv_indices = TensorView::contiguous(meta, DType::i32, {1, 1, 2, 2}, 8);
  a.mask.full_kv_num_blocks = TensorView::contiguous(meta, DType::i32, {1, 1, 2}, 24);
  a.mask.full_kv_indices = TensorView::contiguous(meta, DType::i32, {1, 1, 2, 2}, 32);
  a.mask.q_block_size = a.mask.kv_block_size = block;
  a.mods.all = p.causal ? kMaskCausal : 0u;
  block_sparse_attention(ctx(), a);
  ctx().check_device_status();
  const auto o = out.download_as<float>(elems);
  // nonfinite_outputs.hpp reads [token][head][dim]; out is [head][token][dim].
  std::vector<float> by_token(elems);
  for (uint32_t h = 0; h < H; ++h)
    for (uint32_t t = 0; t < L; ++t)
      std::memcpy(&by_token[(size_t(t) * H + h) * D], &o[(size_t(h) * L + t) * D], D * 4);
  expect_nonfinite_exactly_where_seen(by_token, L, H, D, [&](uint32_t t, uint32_t h, uint32_t d) {
    if (h != 1 || (!p.in_k && d != dim)) return false;
    for (int32_t pos : p.positions) {
      const bool listed = t >= block || pos < int32_t(block);   // q block 0 lists kv block 0 only
      if (listed && (!p.causal || pos <= int32_t(t))) return true;
    }
    return false;
  });
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BlockSparseNonFinite,
    ::testing::Values(
        // Key 199, the last, seen by the last query only (causal)
        // or by every row of q block 1 (full); key 150 by the queries from
        // 150 on; key 100 in a full block by every later row.
        NonFiniteCase{"v_nan_causal_last_key", true, false, {199}},
        NonFiniteCase{"v_nan_causal_keys_100_150_199", true, false, {100, 150, 199}},
        NonFiniteCase{"k_nan_causal_last_key", true, true, {199}},
        NonFiniteCase{"v_nan_full_last_key", false, false, {199}},
        NonFiniteCase{"v_nan_full_keys_20_150", false, false, {20, 150}},
        // Lkv = 192: the last key's row, which the tile past Lkv reads, must
        // reach only the last query (causal), in V or in K.
        NonFiniteCase{"v_nan_causal_last_key_of_192", true, false, {191}, 192},
        NonFiniteCase{"k_nan_causal_last_key_of_192", true, true, {191}, 192},
        NonFiniteCase{"v_nan_full_keys_20_191_of_192", false, false, {20, 191}, 192},
        // The same from the paged cache (the kernels' cache reads, and the
        // prefill kernel's pass after its key loop reading V from there).
        NonFiniteCase{"paged_v_nan_causal_keys_100_150_199", true, false, {100, 150, 199}, 200, true},
        NonFiniteCase{"paged_k_nan_causal_last_key", true, true, {199}, 200, true},
        NonFiniteCase{"paged_v_nan_full_keys_20_150", false, false, {20, 150}, 200, true},
        NonFiniteCase{"paged_v_nan_full_keys_20_191_of_192", false, false, {20, 191}, 192, true}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace vkattn::test
