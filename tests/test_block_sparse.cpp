// block_sparse_attention against the float64 reference (seed 004's
// semantics, ref::block_sparse_attention over the same block lists): the
// runner (tools/runners/block_sparse_runner.cpp) builds the block mask from
// the case's mask mods as create_block_mask does, poisons the outputs and
// checks every element, the padding between rows and guard bytes past them.
// Covered: every built-in mask and score mod, all/any combinations,
// partial-only and full-only masks, random per-head masks, rows with no
// counted key, Lq != Lkv, GQA 1, 4 and 5, K/V broadcast (Bkv = 1), K/V from
// the paged cache (every layout, per-sequence masks), lengths
// that are not multiples of the blocks, strided views, bf16, f32 output,
// LSE and row max, head sizes 16 to 256, Dqk != Dv; a custom variant against
// its C++ twin; the device mask builder against the host's (every case whose
// mask comes from mods); pipelines made by prepare; bad input (host checks
// and the device's report of bad block lists).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>

#include <vkattn_ref/block_sparse_ref.hpp>

#include "context_impl.hpp"
#include "pipelines.hpp"
#include "runners/block_sparse_runner.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

using tool::BlockSparseCase;

bool on_cpu(Context& ctx) { return ctx.capabilities().device_type == "CPU"; }

BlockSparseCase make(const std::string& mask, uint32_t hq, uint32_t hkv, uint32_t d, uint32_t lq, uint32_t lkv, uint64_t seed) {
  BlockSparseCase c;
  c.mask = mask;
  c.q_heads = hq;
  c.kv_heads = hkv;
  c.head_size = d;
  c.q_len = lq;
  c.kv_len = lkv;
  c.seed = seed;
  c.timing_repetitions = 0;
  return c;
}

struct Combo {
  std::string name;
  BlockSparseCase c;
  bool gpu_only = false;
};
void PrintTo(const Combo& c, std::ostream* os) { *os << c.name; }

std::vector<Combo> combos() {
  std::vector<Combo> v;
  auto add = [&](std::string name, BlockSparseCase c, bool gpu_only = false) { v.push_back({std::move(name), c, gpu_only}); };
  {
    auto c = make("causal", 4, 2, 64, 200, 200, 1);
    c.lse = c.row_max = true;
    add("causal_gqa2_d64_lse_rowmax", c);
  }
  add("causal_window_gqa4", make("causal,window:50", 8, 2, 64, 150, 150, 2));
  {
    auto c = make("causal,document:5", 5, 1, 32, 130, 130, 3);
    c.score = "alibi,softcap:4";
    c.lse = true;
    add("document_alibi_softcap_gqa5", c);
  }
  {
    auto c = make("prefix:70", 2, 2, 64, 160, 160, 4);
    c.score = "relbias,bias";
    c.row_max = true;
    add("prefix_lm_relbias_bias", c);
  }
  {
    // Lq != Lkv: the queries are the last Lq positions (q_offset = Lkv - Lq).
    auto c = make("causal", 4, 1, 64, 70, 230, 5);
    c.lse = true;
    add("causal_lq70_lkv230_gqa4", c);
  }
  {
    // q_offset below Lkv - Lq: the first rows see no key (out 0, lse -inf).
    auto c = make("causal", 2, 1, 32, 96, 96, 6);
    c.q_offset = -40;
    c.lse = c.row_max = true;
    add("empty_rows_q_offset", c);
  }
  {
    auto c = make("random:0.3", 4, 2, 64, 192, 256, 7);
    c.mask_heads = 4;
    c.kv_batch = 1;
    c.lse = true;
    add("random_per_head_kv_broadcast", c);
  }
  {
    auto c = make("causal", 2, 2, 64, 128, 128, 8);
    c.separate_full = false;   // every block partial
    add("partial_only", c);
  }
  add("full_only", make("full", 2, 1, 64, 100, 140, 9));
  {
    auto c = make("random:0.15", 2, 2, 32, 128, 128, 10);   // some rows list no block
    c.mask_heads = 2;
    c.mask_batch = 2;
    c.lse = true;
    add("sparse_random_empty_blocks_batched_mask", c);
  }
  {
    auto c = make("causal,window:40", 4, 2, 64, 140, 140, 11);
    c.dtype = DType::bf16;
    c.out_dtype = DType::f32;
    c.token_padding = 8;
    c.q_block = c.kv_block = 32;
    add("bf16_f32_out_strided_blocks32", c);
  }
  {
    auto c = make("causal", 2, 1, 16, 70, 70, 12);
    c.token_padding = 3;   // rows not 16-byte aligned: 2-byte K/V loads
    c.q_block = 32;
    c.kv_block = 32;
    add("d16_narrow_rows", c);
  }
  {
    auto c = make("causal", 2, 1, 256, 64, 64, 13);
    c.q_block = c.kv_block = 32;
    add("d256", c);
  }
  {
    // Dqk != Dv (DeepSeek's 192 and 128; and V wider than q.k), on the scalar kernel.
    auto c = make("causal", 4, 1, 192, 96, 96, 17);
    c.v_head_size = 128;
    c.lse = true;
    add("dqk192_dv128_gqa4", c);
    auto w = make("causal,document:3", 2, 2, 32, 120, 150, 18);
    w.v_head_size = 80;
    w.score = "alibi";
    w.kv_batch = 1;
    add("dqk32_dv80_document_alibi_kv_broadcast", w);
  }
  {
    // K/V from the paged cache (BlockSparsePagedKv): blocks in shuffled
    // order, the table's rows a stride apart; the kernel K/V views take (the
    // prefill kernel on the matrix paths, where the tile divides the blocks).
    auto c = make("causal,document:3", 4, 2, 64, 100, 150, 41);
    c.paged_kv = "nhd";
    c.score = "alibi";
    c.lse = true;
    c.q_block = c.kv_block = 32;
    add("paged_kv_nhd_document_alibi_gqa2", c);
    auto h = make("causal,window:40", 5, 1, 32, 70, 161, 42);   // Lkv not a multiple of the cache's blocks
    h.paged_kv = "hnd";
    h.dtype = DType::bf16;
    h.out_dtype = DType::f32;
    h.lse = h.row_max = true;
    h.mask_batch = 2;
    h.q_block = h.kv_block = 32;
    add("paged_kv_hnd_bf16_window_gqa5_per_sequence_masks", h);
    auto x = make("prefix:40", 2, 2, 48, 64, 100, 43);   // vLLM's layout: K split by 16 bytes, V transposed
    x.paged_kv = "split";
    x.q_block = x.kv_block = 16;
    add("paged_kv_split_prefix_lm_d48", x);
    // fp8 caches: values times the cache's k_scale / v_scale, which the
    // kernel reads from behind the cache's chunk table.
    auto e4 = make("causal,document:3", 4, 2, 64, 100, 150, 44);
    e4.paged_kv = "nhd";
    e4.paged_kv_dtype = DType::fp8_e4m3;
    e4.lse = true;
    e4.q_block = e4.kv_block = 32;
    add("paged_kv_nhd_fp8_e4m3_document_gqa2", e4);
    auto e5 = make("causal,window:40", 2, 2, 48, 64, 100, 45);
    e5.paged_kv = "split";
    e5.paged_kv_dtype = DType::fp8_e5m2;
    e5.k_scale = 3.0f;
    e5.v_scale = 0.125f;
    e5.q_block = e5.kv_block = 16;
    add("paged_kv_split_fp8_e5m2_window_d48", e5);
    auto hb = make("causal", 5, 1, 32, 70, 161, 46);
    hb.paged_kv = "hnd";
    hb.paged_kv_dtype = DType::fp8_e4m3;
    hb.dtype = DType::bf16;
    hb.out_dtype = DType::f32;
    hb.q_block = hb.kv_block = 32;
    add("paged_kv_hnd_fp8_e4m3_bf16_gqa5", hb);
    // More chunks than the kernels hold in shared memory (8: the others'
    // bases come from the chunk table in memory), blocks of 32 tokens, head
    // size 128; a block-table row of 7 blocks that ends mid-block.
    auto m = make("causal,window:90", 4, 2, 128, 150, 200, 48);
    m.paged_kv = "nhd";
    m.paged_kv_block_size = 32;
    m.paged_kv_chunks = 11;
    m.lse = true;
    m.q_block = m.kv_block = 64;
    add("paged_kv_nhd_d128_cache_blocks32_eleven_chunks", m);
  }
  {
    // The prefill kernel's tiles over the cache at full size: every layout,
    // f16 and fp8, blocks of 128 (several cache blocks a tile).
    auto c = make("causal,document:4", 16, 4, 128, 1024, 1024, 49);
    c.paged_kv = "hnd";
    c.q_block = c.kv_block = 128;
    c.lse = true;
    add("gpu_paged_kv_hnd_causal_document_d128_s1024", c, true);
    auto e = make("causal", 8, 8, 128, 777, 1100, 50);
    e.paged_kv = "split";
    e.paged_kv_dtype = DType::fp8_e4m3;
    e.paged_kv_chunks = 10;
    e.k_scale = 0.75f;
    e.v_scale = 2.0f;
    e.q_block = e.kv_block = 128;
    add("gpu_paged_kv_split_fp8_e4m3_d128_lq777_lkv1100_ten_chunks", e, true);
    auto b = make("random:0.3", 8, 2, 128, 1024, 1024, 51);
    b.paged_kv = "nhd";
    b.paged_kv_dtype = DType::fp8_e5m2;
    b.paged_kv_block_size = 64;
    b.dtype = DType::bf16;
    b.out_dtype = DType::bf16;
    b.mask_heads = 8;
    b.q_block = b.kv_block = 128;
    add("gpu_paged_kv_nhd_fp8_e5m2_bf16_random_d128_s1024", b, true);
  }
  {
    auto c = make("causal,document:6", 32, 8, 128, 1024, 1024, 14);
    c.q_block = c.kv_block = 128;
    c.score = "softcap:30";
    c.lse = true;
    add("gpu_causal_document_softcap_h32x8_d128_s1024", c, true);
  }
  {
    auto c = make("random:0.25", 8, 8, 128, 1024, 1024, 15);
    c.mask_heads = 8;
    c.dtype = DType::bf16;
    c.out_dtype = DType::bf16;
    add("gpu_random_bf16_d128_s1024", c, true);
  }
  {
    auto c = make("causal", 8, 2, 80, 1000, 1000, 16);
    c.q_block = c.kv_block = 64;
    add("gpu_causal_d80_s1000", c, true);
  }
  {
    // Rows of q (and K, V, out) not on 16-byte words: the prefill kernel
    // stages Q by 2-byte loads (no BS_FLAG_Q_WIDE).
    auto c = make("causal,window:200", 8, 2, 128, 700, 700, 20);
    c.token_padding = 3;
    c.lse = true;
    add("gpu_window_narrow_rows_d128_s700", c, true);
  }
  {
    // One view narrow at a time (rows 3 elements apart beyond the head): the
    // prefill kernel's pipelines whose loads and stores are all wide
    // (BS_VIEWS_FORM) must not take these runs; Lkv whole tiles and ragged,
    // K/V views and the paged cache.
    auto q = make("causal", 8, 2, 128, 512, 1024, 52);
    q.token_padding = 3;
    q.padded_views = "q";
    q.lse = true;
    add("gpu_narrow_q_only_whole_tiles_d128", q, true);
    auto o = make("causal,window:300", 4, 4, 64, 700, 700, 53);
    o.token_padding = 3;
    o.padded_views = "o";
    add("gpu_narrow_out_only_ragged_d64_s700", o, true);
    auto v = make("causal", 4, 2, 128, 256, 512, 54);
    v.token_padding = 5;
    v.padded_views = "v";
    add("gpu_narrow_v_only_whole_tiles_d128", v, true);
    auto p = make("causal", 4, 2, 128, 384, 600, 55);
    p.token_padding = 3;
    p.padded_views = "q";
    p.paged_kv = "nhd";
    p.q_block = p.kv_block = 128;
    add("gpu_paged_kv_nhd_narrow_q_d128", p, true);
  }
  {
    // Partial blocks only (no full lists bound), some rows listing none: the
    // prefill kernel reads no list entry for a row without blocks.
    auto c = make("random:0.1", 8, 2, 128, 1024, 1024, 21);
    c.separate_full = false;
    c.mask_heads = 8;
    add("gpu_random_partial_only_empty_rows_d128_s1024", c, true);
  }
  {
    // Head size 256 on the prefill kernel: pairs of subgroups, each with half
    // of Q and O, adding their partial S.
    auto c = make("causal,window:300,document:3", 10, 2, 256, 700, 900, 19);
    c.q_block = c.kv_block = 64;
    c.score = "alibi";
    c.dtype = DType::bf16;
    c.out_dtype = DType::f32;
    c.lse = c.row_max = true;
    add("gpu_window_document_alibi_gqa5_bf16_d256_lq700_lkv900", c, true);
  }
  return v;
}

class BlockSparseCombos : public VkTest, public ::testing::WithParamInterface<Combo> {};

TEST_P(BlockSparseCombos, MatchesReference) {
  const Combo& p = GetParam();
  if (p.gpu_only && on_cpu(ctx())) GTEST_SKIP() << "full-size shape: GPUs only";
  tool::BlockSparseOutputs outs;
  auto r = tool::run_block_sparse(ctx(), p.c, &outs);
  EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure << "\ntolerance: " << r.tolerance;
  EXPECT_GT(outs.density, 0.0) << r.summary;
}

INSTANTIATE_TEST_SUITE_P(Shapes, BlockSparseCombos, ::testing::ValuesIn(combos()),
                         [](const auto& info) { return info.param.name; });

// A custom variant (tests/variants/stripes.glsl, compiled into the tests by
// vkattn_add_block_sparse_variant) against its C++ twin: every third key
// (shifted per head) masked, a per-key weight times b + 1 added to the score.
BlockSparseCase stripes(BlockSparseCase c) {
  auto weights = std::make_shared<std::vector<float>>(c.kv_len);
  auto shifts = std::make_shared<std::vector<int32_t>>(c.q_heads);
  for (uint32_t k = 0; k < c.kv_len; ++k) (*weights)[k] = float(int(k * 37 % 17) - 8) / 16.0f;
  for (uint32_t h = 0; h < c.q_heads; ++h) (*shifts)[h] = int32_t(h % 3);
  c.custom_mods = "test_stripes";
  c.custom_mask = [shifts](uint32_t, uint32_t h, int64_t, int64_t kv) { return (kv + (*shifts)[h]) % 3 != 1; };
  c.custom_score = [weights](double s, uint32_t b, uint32_t, int64_t, int64_t kv) { return s + double((*weights)[kv]) * (b + 1); };
  std::vector<uint32_t> w(c.kv_len), sh(c.q_heads);
  std::memcpy(w.data(), weights->data(), w.size() * 4);
  std::memcpy(sh.data(), shifts->data(), sh.size() * 4);
  c.custom_buffers = {{"head_shift", sh}, {"key_weight", w}};
  return c;
}

TEST_F(VkTest, BlockSparseCustomVariantMatchesItsCppTwin) {
  for (auto c : {make("causal", 4, 2, 64, 150, 150, 31), make("", 3, 1, 32, 100, 170, 32)}) {
    c = stripes(c);
    c.lse = true;
    if (c.mask.empty()) c.score = "alibi";
    auto r = tool::run_block_sparse(ctx(), c);
    EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure;
  }
  {
    // A variant's mods over the paged cache (its own modules, with BS_PAGED_KV).
    auto c = stripes(make("causal", 4, 2, 64, 100, 150, 34));
    c.paged_kv = "hnd";
    c.q_block = c.kv_block = 32;
    auto r = tool::run_block_sparse(ctx(), c);
    EXPECT_TRUE(r.pass) << "paged_kv: " << r.summary << "\n" << r.failure;
  }
  if (!on_cpu(ctx())) {
    auto c = stripes(make("causal,window:300", 8, 2, 128, 700, 700, 33));
    c.q_block = c.kv_block = 128;
    auto r = tool::run_block_sparse(ctx(), c);
    EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure;
  }
}

// Where a mod's edge meets a block's or a tile's edge. The mask builder
// answers a block whose pairs the mods admit all, or none of, from the mods'
// ranges (bs_mask_range) without testing its pairs, and a document mask's
// blocks from a vote over the rows' and keys' ids; an off-by-one in any
// range test, or a vote taken too loosely, lists a block wrongly (the runner
// compares the device's lists with the host builder's, and the attention
// with the reference). The windows, prefix lengths and q offsets put each
// edge one key before, on and after a multiple of 16.
TEST_F(VkTest, BlockSparseModEdgesOnBlockAndTileEdges) {
  struct Edge {
    std::string mask;
    int32_t q_offset;
  };
  std::vector<Edge> edges;
  for (int32_t w : {1, 2, 3, 15, 16, 17, 18, 33, 34, 66})
    for (const char* m : {"window:", "causal,window:"}) edges.push_back({m + std::to_string(w), 0});
  for (int32_t p : {15, 16, 17, 31, 32, 33, 65}) edges.push_back({"prefix:" + std::to_string(p), -32});   // (q from position 0)
  for (int32_t off : {-17, -16, -15, -1, 1, 14, 15, 16, 17}) edges.push_back({"causal", off});
  for (int32_t off : {-32, -31, -17, -16, -15, 0}) edges.push_back({"causal,document:3", off});   // (q positions inside the keys)
  // Block 16 puts the edges on blocks' edges; on a GPU, block 128 (the
  // default) puts them inside the blocks too. (Each block size compiles a
  // prefill-kernel pipeline per mask: a third size made this the GPU
  // suite's slowest test by far.)
  const bool gpu = !on_cpu(ctx());
  for (uint32_t block : gpu ? std::vector<uint32_t>{16, 128} : std::vector<uint32_t>{16}) {
    uint64_t seed = 40;
    for (const Edge& e : edges) {
      auto c = make(e.mask, 2, 1, block == 16 ? 16 : 64, block == 16 ? 64 : 256, block == 16 ? 96 : 320, seed++);
      c.q_block = c.kv_block = block;
      c.q_offset = e.q_offset + int32_t(c.kv_len - c.q_len);
      auto r = tool::run_block_sparse(ctx(), c);
      EXPECT_TRUE(r.pass) << e.mask << ", q_offset " << *c.q_offset << ", blocks " << block << ": " << r.summary << "\n" << r.failure;
    }
  }
}

// The mask builder tests an open block's pairs four a step, so that their
// reads are in flight together, each step's pairs past the block taking
// the block's last pair again. Document ids make blocks that only that
// loop decides (their rows hold two ids): block (q 0-63, kv 64-127) whose
// only counting pair is its last (row 63, key 127: the fourth pair of a
// step for any workgroup size up to 1024), and block (q 192-199, kv 0-63),
// 8 rows that count no pair, where the 8 rows past Lq would (their ids
// are the keys'). A step that drops a pair, or reads past its block, lists
// them wrongly.
TEST_F(VkTest, MaskBuilderTestsEveryPairOfABlockAndNoOther) {
  const int64_t Lq = 200, Lkv = 256, QB = 64, KB = 64, q_blocks = 4, kv_blocks = 4;
  std::vector<int32_t> ids(Lkv);
  for (int64_t p = 0; p < Lkv; ++p)
    ids[p] = p < 63 ? 1 : p == 63 ? 2 : p < 127 ? 3 : p == 127 ? 2 : p < 192 ? 6 : p < 196 ? 4 : p < 200 ? 5 : 1;
  Buffer doc(ctx(), 4 * Lkv), lists(ctx(), 4 * (2 * q_blocks + 2 * q_blocks * kv_blocks));
  doc.upload(std::span<const int32_t>(ids));
  lists.fill(0xFFFFFFFFu);
  BlockMaskBuild b;
  b.mods.all = kMaskDocument;
  b.values.document_ids = TensorView::contiguous(doc, DType::i32, {Lkv});
  b.q_len = Lq;
  b.kv_len = Lkv;
  b.q_offset = 0;
  b.mask.q_block_size = QB;
  b.mask.kv_block_size = KB;
  b.mask.kv_num_blocks = TensorView::contiguous(lists, DType::i32, {1, 1, q_blocks});
  b.mask.kv_indices = TensorView::contiguous(lists, DType::i32, {1, 1, q_blocks, kv_blocks}, 4 * q_blocks);
  b.mask.full_kv_num_blocks = TensorView::contiguous(lists, DType::i32, {1, 1, q_blocks}, 4 * (q_blocks + q_blocks * kv_blocks));
  b.mask.full_kv_indices = TensorView::contiguous(lists, DType::i32, {1, 1, q_blocks, kv_blocks}, 4 * (2 * q_blocks + q_blocks * kv_blocks));
  build_block_mask(ctx(), b);
  const auto got = lists.download_as<int32_t>(2 * q_blocks + 2 * q_blocks * kv_blocks);
  const auto want = ref::build_block_mask([&](uint32_t, uint32_t, int64_t q, int64_t k) { return ids[q] == ids[k]; }, 1, 1, Lq, Lkv,
                                          uint32_t(QB), uint32_t(KB));
  // The two blocks, by hand: row 0 lists kv block 1 as partial (and 0 and
  // 3: ids 1 and 2 meet there); row 3 lists only kv block 3, not 0.
  ASSERT_EQ(want.kv_num_blocks[0], 3);
  EXPECT_EQ(want.kv_indices[1], 1);
  ASSERT_EQ(want.kv_num_blocks[3], 1);
  EXPECT_EQ(want.kv_indices[3 * kv_blocks], 3);
  EXPECT_EQ(want.full_kv_num_blocks[0] + want.full_kv_num_blocks[3], 0);
  for (int64_t r = 0; r < q_blocks; ++r) {
    const int32_t* row = &got[q_blocks + r * kv_blocks];
    const int32_t* full = &got[2 * q_blocks + q_blocks * kv_blocks + r * kv_blocks];
    EXPECT_EQ(got[r], want.kv_num_blocks[r]) << "partial count of row " << r;
    EXPECT_EQ(got[q_blocks + q_blocks * kv_blocks + r], want.full_kv_num_blocks[r]) << "full count of row " << r;
    for (int32_t j = 0; j < std::min(got[r], want.kv_num_blocks[r]); ++j)
      EXPECT_EQ(row[j], want.kv_indices[r * kv_blocks + j]) << "row " << r << " partial entry " << j;
    for (int32_t j = 0; j < std::min(got[q_blocks + q_blocks * kv_blocks + r], want.full_kv_num_blocks[r]); ++j)
      EXPECT_EQ(full[j], want.full_kv_indices[r * kv_blocks + j]) << "row " << r << " full entry " << j;
  }
}

// The cases above must be able to fail: rows with no counted key come out 0
// with lse -inf, and rows with keys do not.
TEST_F(VkTest, BlockSparseEmptyRowsAreZeroWithLseMinusInf) {
  auto c = make("causal", 1, 1, 32, 64, 64, 21);
  c.q_offset = -10;
  c.lse = true;
  tool::BlockSparseOutputs outs;
  auto r = tool::run_block_sparse(ctx(), c, &outs);
  ASSERT_TRUE(r.pass) << r.failure;
  for (int q = 0; q < 64; ++q) {
    if (q < 10) {
      EXPECT_EQ(outs.lse[q], -INFINITY) << "query " << q;
      for (int d = 0; d < 32; ++d) EXPECT_EQ(outs.out[q * 32 + d], 0.0);
    } else {
      EXPECT_TRUE(std::isfinite(outs.lse[q])) << "query " << q;
    }
  }
}

// ---- hand-built inputs: prepare, bad input ----

class BlockSparseSmall : public VkTest {
 protected:
  static constexpr int64_t B = 1, H = 2, L = 64, D = 32;
  void SetUp() override {
    VkTest::SetUp();
    qkv_ = Buffer(ctx(), 4 * B * H * L * D * 2);
    qkv_.fill(0x2E663266u);
    meta_ = Buffer(ctx(), 256);
    // One q block of 64 over one kv block of 64: partial, index 0.
    const int32_t words[] = {1, 0};   // kv_num_blocks, kv_indices
    meta_.upload(words, sizeof words);
    a_.q = TensorView::contiguous(qkv_, DType::f16, {B, H, L, D});
    a_.k = TensorView::contiguous(qkv_, DType::f16, {B, H, L, D}, B * H * L * D * 2);
    a_.v = TensorView::contiguous(qkv_, DType::f16, {B, H, L, D}, 2 * B * H * L * D * 2);
    a_.out = TensorView::contiguous(qkv_, DType::f16, {B, H, L, D}, 3 * B * H * L * D * 2);
    a_.mask.kv_num_blocks = TensorView::contiguous(meta_, DType::i32, {1, 1, 1});
    a_.mask.kv_indices = TensorView::contiguous(meta_, DType::i32, {1, 1, 1, 1}, 4);
    a_.mask.q_block_size = a_.mask.kv_block_size = 64;
    a_.mods.all = kMaskCausal;
  }
  // The variant a_ runs (causal, blocks of 64).
  static BlockSparseVariant variant() {
    BlockSparseVariant v;
    v.num_q_heads = v.num_kv_heads = H;
    v.head_size = D;
    v.q_block_size = v.kv_block_size = 64;
    v.mods.all = kMaskCausal;
    return v;
  }
  Buffer qkv_, meta_;
  BlockSparseArgs a_;
};

// The prefill kernel holds one form of its views' loads and stores per
// pipeline (BS_VIEWS_FORM, chosen per run from Lkv and the views): prepare
// makes all three, so that no run of the variant creates one, whatever its
// views.
TEST_F(BlockSparseSmall, PrepareMakesEveryFormOfKvViewsLoads) {
  const BlockSparseVariant v = variant();
  const bool matrix = block_sparse_attention_path(ctx(), v) != Path::scalar;
  const size_t before = ctx().pipelines_created();
  prepare_block_sparse_attention(ctx(), std::span<const BlockSparseVariant>(&v, 1));
  const size_t prepared = ctx().pipelines_created();
  EXPECT_EQ(prepared, before + (matrix ? 3 : 1));
  block_sparse_attention(ctx(), a_);   // Lkv 64: whole tiles
  auto ragged = a_;                    // Lkv 40: a tile straddles it
  ragged.k = TensorView::contiguous(qkv_, DType::f16, {B, H, 40, D}, B * H * L * D * 2);
  ragged.v = TensorView::contiguous(qkv_, DType::f16, {B, H, 40, D}, 2 * B * H * L * D * 2);
  block_sparse_attention(ctx(), ragged);
  auto narrow = a_;                    // K's rows 33 elements apart: 2-byte loads
  narrow.k.strides = {H * L * 33, L * 33, 33, 1};
  block_sparse_attention(ctx(), narrow);
  narrow = a_;                         // q's only
  narrow.q.strides = {H * L * 33, L * 33, 33, 1};
  block_sparse_attention(ctx(), narrow);
  EXPECT_EQ(ctx().pipelines_created(), prepared);
}

// K/V from the paged cache: what the host refuses, the pipeline prepare
// makes, and a block-table entry outside the cache, which the device reports.
TEST_F(BlockSparseSmall, PagedKvIsCheckedPreparedAndReported) {
  KvCacheConfig cfg{.num_blocks = 8, .block_size = 16, .num_kv_heads = H, .head_size = D, .dtype = DType::f16};
  PagedKvCache cache(ctx(), cfg);
  cache.fill(0x2E662E66u);
  Buffer table(ctx(), 64);
  const int32_t entries[] = {3, 1, 6, 0, 7};
  table.upload(entries, sizeof entries);
  BlockSparseArgs a = a_;
  a.paged_kv = BlockSparsePagedKv{&cache, TensorView::contiguous(table, DType::i32, {B, 4}), L};
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "are given with paged_kv", "expected them empty");
  a.k = a.v = TensorView{};
  BlockSparseVariant v = variant();
  v.paged_kv_block_size = 16;
  {
    auto views = v;   // the cache runs where K/V views do
    views.paged_kv_block_size = 0;
    EXPECT_EQ(block_sparse_attention_path(ctx(), v), block_sparse_attention_path(ctx(), views));
  }
  {
    auto no_cache = v;   // a block size no cache can have
    no_cache.paged_kv_block_size = 0x80000000u;
    EXPECT_VKATTN_ERROR(prepare_block_sparse_attention(ctx(), std::span<const BlockSparseVariant>(&no_cache, 1)),
                        "paged_kv_block_size = 2147483648 is no cache's: expected 1 to 1024");
  }
  prepare_block_sparse_attention(ctx(), std::span<const BlockSparseVariant>(&v, 1));
  const size_t prepared = ctx().pipelines_created();
  block_sparse_attention(ctx(), a);
  EXPECT_EQ(ctx().pipelines_created(), prepared);

  auto bad = a;
  bad.paged_kv->block_table = TensorView::contiguous(table, DType::i32, {B, 3});
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), bad), "paged_kv.block_table has 3 columns", "ceil(kv_len / block_size)");
  bad = a;
  bad.paged_kv->block_table = TensorView::contiguous(table, DType::f32, {B, 4});
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), bad), "paged_kv.block_table");
  bad = a;
  bad.paged_kv->cache = nullptr;
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), bad), "paged_kv.cache is null");
  bad = a;
  bad.paged_kv->kv_len = -5;
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), bad), "Lkv = -5: expected 0 to 2^31 - 2^16 - 1 each (Lkv: paged_kv.kv_len)");
  bad = a;
  bad.q = TensorView::contiguous(qkv_, DType::f16, {B, H, L, 16});
  bad.out = TensorView::contiguous(qkv_, DType::f16, {B, H, L, 16}, 3 * B * H * L * D * 2);
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), bad), "q's head size is 16 and the paged cache's 32");
  bad = a;
  bad.q.dtype = bad.out.dtype = DType::bf16;
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), bad), "the paged cache holds f16, q is bf16", "fp8_e4m3 or fp8_e5m2");
  {   // K/V's heads are the cache's: the message names it, not k (which is empty)
    KvCacheConfig three = cfg;
    three.num_kv_heads = 3;
    PagedKvCache three_heads(ctx(), three);
    bad = a;
    bad.paged_kv->cache = &three_heads;
    EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), bad), "heads and the paged cache 3 (num_kv_heads): expected a multiple (GQA)");
  }
  // An fp8 cache is its own pipeline (prepared with its dtype); a dtype with no block size is refused.
  KvCacheConfig fp8_cfg = cfg;
  fp8_cfg.dtype = DType::fp8_e5m2;
  PagedKvCache fp8_cache(ctx(), fp8_cfg);
  fp8_cache.fill(0x3C3C3C3Cu);   // 1.0
  auto fp8 = a;
  fp8.paged_kv->cache = &fp8_cache;
  BlockSparseVariant fv = v;
  fv.paged_kv_dtype = DType::fp8_e5m2;
  prepare_block_sparse_attention(ctx(), std::span<const BlockSparseVariant>(&fv, 1));
  const size_t prepared_fp8 = ctx().pipelines_created();
  block_sparse_attention(ctx(), fp8);
  EXPECT_EQ(ctx().pipelines_created(), prepared_fp8);
  fv.paged_kv_block_size = 0;
  EXPECT_VKATTN_ERROR(prepare_block_sparse_attention(ctx(), std::span<const BlockSparseVariant>(&fv, 1)),
                      "paged_kv_dtype is set and paged_kv_block_size is 0");
  fv.paged_kv_block_size = 16;
  fv.paged_kv_dtype = DType::i32;
  EXPECT_VKATTN_ERROR(prepare_block_sparse_attention(ctx(), std::span<const BlockSparseVariant>(&fv, 1)), "the paged cache holds i32");
  PagedKvCache other(ctx(), cfg);
  bad = a;
  bad.paged_kv->cache = &other;
  PagedKvCache moved = std::move(other);
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), bad), "paged_kv.cache was moved from");

  // An output in the cache's own memory (a cache over the application's buffer).
  Buffer mem(ctx(), 1 << 16);
  const uint64_t block = uint64_t(16) * H * D * 2;
  const KvCacheChunk chunk{.k_buffer = mem, .v_buffer = mem, .k_offset = 0, .v_offset = 8 * block, .num_blocks = 8};
  PagedKvCache over_mem(ctx(), cfg, std::span<const KvCacheChunk>(&chunk, 1));
  bad = a;
  bad.paged_kv->cache = &over_mem;
  bad.out = TensorView::contiguous(mem, DType::f16, {B, H, L, D}, 9 * block);
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), bad), "block_sparse_attention: out", "overlaps the cache's V chunk 0",
                      "must not share memory with the cache it reads");

  // Entry 2 of the row (keys 32-47) outside the cache's 8 blocks.
  const int32_t outside[] = {3, 1, 8, 0};
  table.upload(outside, sizeof outside);
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "block_table[0, 2] = 8", "not a block of the cache");
}

// The kv block size is compiled into the kernel (BS_KV_BLOCK): a variant
// prepared for blocks of 128 does not serve a mask of 64-key blocks, even
// where both take the same tiles.
TEST_F(BlockSparseSmall, TheKvBlockSizeIsPartOfThePipeline) {
  BlockSparseVariant v = variant();
  v.kv_block_size = 128;
  prepare_block_sparse_attention(ctx(), std::span<const BlockSparseVariant>(&v, 1));
  const size_t prepared = ctx().pipelines_created();
  block_sparse_attention(ctx(), a_);   // kv blocks of 64
  EXPECT_EQ(ctx().pipelines_created(), prepared + 1);
}

// Masks with the document mod take the modules that stage the ids in shared
// memory (block_sparse_documents), on the matrix paths; other masks, and the
// scalar kernel for every mask, take block_sparse.
TEST_F(BlockSparseSmall, DocumentMasksTakeTheDocumentModules) {
  BlockSparseVariant v = variant();
  v.mods.all = kMaskCausal | kMaskDocument;
  const bool matrix = block_sparse_attention_path(ctx(), v) != Path::scalar;
  const detail::Pipelines& made = *ctx().impl().pipelines;
  prepare_block_sparse_attention(ctx(), std::span<const BlockSparseVariant>(&v, 1));
  EXPECT_EQ(made.created_of("block_sparse_documents"), matrix);
  EXPECT_EQ(made.created_of("block_sparse"), !matrix);
  v.mods.all = kMaskCausal;
  v.mods.any = 0;
  prepare_block_sparse_attention(ctx(), std::span<const BlockSparseVariant>(&v, 1));
  EXPECT_TRUE(made.created_of("block_sparse"));
  v.mods.all = 0;
  v.mods.any = kMaskCausal | kMaskDocument;   // the mod among `any` counts too
  const size_t before = ctx().pipelines_created();
  prepare_block_sparse_attention(ctx(), std::span<const BlockSparseVariant>(&v, 1));
  EXPECT_EQ(ctx().pipelines_created(), before + (matrix ? 3 : 1));   // (the matrix paths: a pipeline per form of K/V loads)
  EXPECT_EQ(made.created_of("block_sparse_documents"), matrix);
}

// The path a variant runs on: the context's where the prefill kernel takes it
// (head size 256 included: pairs of subgroups), scalar for Dqk != Dv (what
// `vkattn run` reports).
// Empty K/V (Lkv = 0) whose views start at their buffer's end: nothing is
// read, and the bindings stay valid descriptors (an offset at the buffer's
// size is not one; the validation layers, on in these tests, report it).
TEST_F(BlockSparseSmall, EmptyKvViewsAtTheirBuffersEndBindValidly) {
  const int32_t none[] = {0};   // kv_num_blocks: no block
  meta_.upload(none, sizeof none);
  Buffer tail(ctx(), 256);
  auto a = a_;
  a.k = TensorView::contiguous(tail, DType::f16, {B, H, 0, D}, 256);
  a.v = TensorView::contiguous(tail, DType::f16, {B, H, 0, D}, 256);
  a.mods.all = 0;
  block_sparse_attention(ctx(), a);
  KvCacheConfig cfg{.num_blocks = 4, .block_size = 16, .num_kv_heads = H, .head_size = D, .dtype = DType::f16};
  PagedKvCache cache(ctx(), cfg);
  a.k = a.v = TensorView{};
  a.paged_kv = BlockSparsePagedKv{&cache, TensorView::contiguous(tail, DType::i32, {B, 0}, 256), 0};
  block_sparse_attention(ctx(), a);
  // Rows with no key: 0.
  const auto out = qkv_.download_as<uint16_t>(B * H * L * D, 3 * B * H * L * D * 2);
  for (uint16_t x : out) ASSERT_EQ(x, 0u);
}

// No keys (Lkv = 0), from K/V views and from the paged cache: every row
// counts no key, out 0 and LSE -inf (the runner's lists keep one unused column).
TEST_F(VkTest, BlockSparseWithNoKeys) {
  for (const char* paged : {"", "nhd"}) {
    auto c = make("causal", 2, 1, 32, 16, 0, 47);
    c.q_block = c.kv_block = 16;
    c.lse = true;
    c.paged_kv = paged;
    auto r = tool::run_block_sparse(ctx(), c);
    EXPECT_TRUE(r.pass) << (*paged ? "paged_kv: " : "views: ") << r.summary << "\n" << r.failure;
  }
}

TEST_F(BlockSparseSmall, PathSaysWhichKernelRuns) {
  BlockSparseVariant v;
  v.num_q_heads = v.num_kv_heads = H;
  v.head_size = 128;
  v.v_head_size = 64;
  EXPECT_EQ(block_sparse_attention_path(ctx(), v), Path::scalar);
  v.v_head_size = 0;
  for (uint32_t d : {128u, 256u}) {
    v.head_size = d;
    const Path p = block_sparse_attention_path(ctx(), v);
    if (ctx().capabilities().subgroup_size == 32) EXPECT_EQ(p, ctx().path_for("block_sparse")) << "head size " << d;
    else EXPECT_EQ(p, Path::scalar) << "head size " << d;
    auto paged = v;   // K/V from the paged cache (any layout or dtype): the same kernel
    paged.paged_kv_block_size = 16;
    paged.paged_kv_layout = KvLayout::split;
    paged.paged_kv_dtype = DType::fp8_e4m3;
    EXPECT_EQ(block_sparse_attention_path(ctx(), paged), p) << "head size " << d;
  }
  v.head_size = 40;
  EXPECT_VKATTN_ERROR(block_sparse_attention_path(ctx(), v), "head size 40");
}

TEST_F(BlockSparseSmall, PrepareMakesTheMaskBuildersPipeline) {
  BlockSparseMods mods;
  mods.all = kMaskCausal;
  mods.score = kScoreAlibi;   // ignored: the builder has no score mods
  prepare_build_block_mask(ctx(), std::span<const BlockSparseMods>(&mods, 1));
  const size_t prepared = ctx().pipelines_created();
  BlockMaskBuild b;
  b.mods.all = kMaskCausal;
  b.q_len = b.kv_len = L;
  b.mask = a_.mask;
  build_block_mask(ctx(), b);
  EXPECT_EQ(ctx().pipelines_created(), prepared);
  EXPECT_VKATTN_ERROR(prepare_build_block_mask(ctx(), std::span<const BlockSparseMods>(&mods, 1), "nope"),
                      "custom_mods = 'nope' is not a registered");
}

TEST_F(BlockSparseSmall, BadInputGetsAClearError) {
  {
    auto a = a_;
    a.mask.kv_num_blocks = TensorView::contiguous(meta_, DType::i32, {1, 1, 2});
    EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "mask.kv_num_blocks", "ceil(Lq / q_block_size)");
  }
  {
    auto a = a_;
    a.mask.q_block_size = 24;
    EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "q_block_size = 24", "multiple of 16");
  }
  {
    auto a = a_;
    a.mask.kv_block_size = 40;
    EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "kv_block_size = 40", "multiple of 16");
  }
  {
    auto a = a_;
    a.v = TensorView::contiguous(qkv_, DType::f16, {B, H, L, 40}, 2 * B * H * L * D * 2);
    EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "V's head size 40", "multiple of 16");
  }
  {
    auto a = a_;   // Dv = 16 != Dqk = 32 is supported, but out must have V's head size
    a.v = TensorView::contiguous(qkv_, DType::f16, {B, H, L, 16}, 2 * B * H * L * D * 2);
    EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "out", "v_head_size");
  }
  {
    auto a = a_;
    a.k = TensorView::contiguous(qkv_, DType::f16, {2, H, L, D}, 0);
    EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "k's batch is 2", "or 1 (broadcast)");
  }
  {
    auto a = a_;
    a.mods.all |= kMaskWindow;
    EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "values.window = 0", "kMaskWindow");
  }
  {
    auto a = a_;
    a.mods.all |= kMaskDocument;
    EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "values.document_ids is missing");
  }
  {
    auto a = a_;
    a.mods.score = 64;
    EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "mods.score = 64", "unknown bits");
  }
  {
    auto a = a_;
    a.out = a.q;
    EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "out");
  }
  {
    auto a = a_;
    a.mask.full_kv_num_blocks = a.mask.kv_num_blocks;
    EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "come together");
  }
  {
    auto a = a_;
    a.lse = TensorView::contiguous(meta_, DType::f32, {B, H, L / 2});
    EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "lse");
  }
  {
    auto a = a_;
    EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a, VK_NULL_HANDLE), "VK_NULL_HANDLE");
  }
}

TEST_F(BlockSparseSmall, MaskBuilderBadInputGetsAClearError) {
  BlockMaskBuild b;
  b.mods.all = kMaskCausal;
  b.q_len = L;
  b.kv_len = 2 * L;   // two kv blocks of 64: more than the lists hold
  b.mask = a_.mask;
  EXPECT_VKATTN_ERROR(build_block_mask(ctx(), b), "build_block_mask:", "kv_blocks >= ceil(Lkv / kv_block_size)");
  b.kv_len = L;
  b.mods.score = kScoreAlibi;
  EXPECT_VKATTN_ERROR(build_block_mask(ctx(), b), "build_block_mask:", "score mods do not shape a block mask");
  b.mods.score = 0;
  b.mask.full_kv_num_blocks = b.mask.kv_num_blocks;
  b.mask.full_kv_indices = b.mask.kv_indices;
  EXPECT_VKATTN_ERROR(build_block_mask(ctx(), b), "build_block_mask:", "overlap");
  b.mask.full_kv_num_blocks.reset();
  b.mask.full_kv_indices.reset();
  build_block_mask(ctx(), b);   // causal over one 64x64 block: one partial block
  int32_t words[2];
  meta_.download(words, sizeof words);
  EXPECT_EQ(words[0], 1);
  EXPECT_EQ(words[1], 0);
}

// No queries (Lq = 0): a no-op. With more than one (batch, head), or mask
// row, the outputs' contiguous views of extent 0 have strides of 0 outside
// it, which the check that an output's elements are distinct took for
// aliasing ("elements share memory"), where one head ran.
TEST_F(BlockSparseSmall, NoQueriesIsANoOpWhateverTheHeads) {
  Buffer out(ctx(), 64), lse(ctx(), 64);
  a_.q.shape[2] = 0;
  a_.out = TensorView::contiguous(out, DType::f32, {B, H, 0, D});
  a_.lse = TensorView::contiguous(lse, DType::f32, {B, H, 0});
  a_.mask.kv_num_blocks = TensorView::contiguous(meta_, DType::i32, {1, 1, 0});
  a_.mask.kv_indices = TensorView::contiguous(meta_, DType::i32, {1, 1, 0, 1}, 4);
  block_sparse_attention(ctx(), a_);
  BlockMaskBuild b;
  b.mods.all = kMaskCausal;
  b.q_len = 0;
  b.kv_len = L;
  b.mask.q_block_size = b.mask.kv_block_size = 64;
  b.mask.kv_num_blocks = TensorView::contiguous(meta_, DType::i32, {2, 1, 0});   // two mask rows of the batch
  b.mask.kv_indices = TensorView::contiguous(meta_, DType::i32, {2, 1, 0, 1}, 64);
  build_block_mask(ctx(), b);
}

TEST_F(BlockSparseSmall, CustomModsAndTheirBuffersAreCheckedByName) {
  std::vector<std::string> names = block_sparse_variant_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "test_stripes"), names.end());
  Buffer w(ctx(), 256), sh(ctx(), 256);
  auto a = a_;
  a.custom_mods = "no_such_variant";
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "custom_mods = 'no_such_variant' is not a registered", "test_stripes");
  a.custom_mods = "test_stripes";
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "reads buffer 'key_weight'", "custom_buffers");
  a.custom_buffers = {{"key_weight", TensorView::contiguous(w, DType::f32, {L})}, {"weights", TensorView::contiguous(sh, DType::i32, {H})}};
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "'weights'", "its buffers: key_weight, head_shift");
  a.custom_buffers = {{"key_weight", TensorView::contiguous(w, DType::f32, {L})}, {"head_shift", TensorView::contiguous(sh, DType::i32, {H}, 4)}};
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "custom buffer 'head_shift' starts 4 bytes past");
  a.custom_mods.clear();
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "only a variant (custom_mods) has");
  EXPECT_VKATTN_ERROR(register_block_sparse_variant("test_stripes", {}, {}), "already registered");
  EXPECT_VKATTN_ERROR(register_block_sparse_variant("Bad-Name", {}, {}), "lowercase");
}

// A variant's name and buffers are held in place (block_sparse_custom_buffers.hpp):
// up to 63 bytes of name and 4 buffers, and a registration that would not fit
// them is refused.
static_assert(std::is_trivially_copyable_v<VariantName>);
static_assert(std::is_trivially_copyable_v<BlockSparseCustomBuffers>);
TEST(BlockSparseCustomBuffers, NamesAndBuffersAreHeldInPlaceWithinTheirLimits) {
  const std::string longest(VariantName::kMaxBytes, 'a'), too_long(VariantName::kMaxBytes + 1, 'a');
  VariantName n = longest;
  EXPECT_EQ(n, longest);
  EXPECT_EQ(std::string_view(n.c_str()), longest);   // null-terminated
  n = "short";
  EXPECT_EQ(n.size(), 5u);
  EXPECT_EQ(std::string_view(n.c_str()), "short");   // the longer name's bytes are not read past the new end
  n.clear();
  EXPECT_TRUE(n.empty());
  EXPECT_TRUE(VariantName(static_cast<const char*>(nullptr)).empty());
  EXPECT_VKATTN_ERROR(VariantName{too_long}, "is 64 bytes, expected at most 63");
  const TensorView none;
  BlockSparseCustomBuffers b = {{"a", none}, {"b", none}, {"c", none}, {"d", none}};
  EXPECT_EQ(b.size(), 4u);
  EXPECT_EQ(b[3].name, "d");
  EXPECT_VKATTN_ERROR(b.push_back({"e", none}), "5 buffers, expected at most 4");
  EXPECT_VKATTN_ERROR((b = {{"a", none}, {"b", none}, {"c", none}, {"d", none}, {"e", none}}), "5 buffers");
  const BlockSparseCustomBuffers copy = b;
  EXPECT_EQ(copy.size(), 4u);
  EXPECT_EQ(copy[0].name, "a");
  EXPECT_VKATTN_ERROR(register_block_sparse_variant(too_long, {}, {}), "is 64 bytes, expected at most 63");
  EXPECT_VKATTN_ERROR(register_block_sparse_variant("held_in_place", {{too_long, DType::f32, "H"}}, {}),
                      "has a name of 64 bytes, expected at most 63");
}

// A variant declares each buffer's dtype and extent (tests/CMakeLists.txt:
// key_weight f32 of Lkv elements, head_shift i32 of H): a view that would let
// its mods read past the caller's buffer, or read the wrong type, is refused.
TEST_F(BlockSparseSmall, CustomBuffersMatchTheirDeclaration) {
  const auto declared = block_sparse_variant_buffers("test_stripes");
  ASSERT_EQ(declared.size(), 2u);
  EXPECT_EQ(declared[0].name, "key_weight");
  EXPECT_EQ(declared[0].dtype, DType::f32);
  EXPECT_EQ(declared[0].extent, "Lkv");
  EXPECT_EQ(declared[1].extent, "H");
  EXPECT_VKATTN_ERROR(block_sparse_variant_buffers("no_such_variant"), "not a registered variant");
  Buffer w(ctx(), 512), sh(ctx(), 256);
  const TensorView weights = TensorView::contiguous(w, DType::f32, {L}), shifts = TensorView::contiguous(sh, DType::i32, {H});
  auto a = a_;
  a.custom_mods = "test_stripes";
  a.custom_buffers = {{"key_weight", TensorView::contiguous(w, DType::i32, {L})}, {"head_shift", shifts}};
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "custom buffer 'key_weight' is i32, expected f32");
  a.custom_buffers = {{"key_weight", TensorView::contiguous(w, DType::f32, {L - 1})}, {"head_shift", shifts}};
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "custom buffer 'key_weight' holds 63 elements",
                      "reads up to Lkv = 64");
  TensorView strided = TensorView::contiguous(w, DType::f32, {L});
  strided.strides = {2};
  a.custom_buffers = {{"key_weight", strided}, {"head_shift", shifts}};
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "custom buffer 'key_weight' [64] is not contiguous");
  a.custom_buffers = {{"key_weight", weights}, {"head_shift", TensorView::contiguous(sh, DType::i32, {H - 1})}};
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "'head_shift' holds 1 elements", "H = 2");
  a.custom_buffers = {{"key_weight", TensorView::contiguous(w, DType::f32, {2, L})}, {"head_shift", shifts}};
  block_sparse_attention(ctx(), a);   // more than the extent, any shape: fine
  // The mask builder's H is the mask's Sh (1 here): one shift is enough there.
  BlockMaskBuild b;
  b.mods.all = kMaskCausal;
  b.q_len = b.kv_len = L;
  b.mask = a_.mask;
  b.custom_mods = "test_stripes";
  b.custom_buffers = {{"key_weight", weights}, {"head_shift", TensorView::contiguous(sh, DType::i32, {1})}};
  build_block_mask(ctx(), b);
  b.custom_buffers = {{"key_weight", TensorView::contiguous(w, DType::f32, {L / 2})}, {"head_shift", shifts}};
  EXPECT_VKATTN_ERROR(build_block_mask(ctx(), b), "build_block_mask:", "'key_weight' holds 32 elements");
  // Declarations are checked when a variant registers.
  const BlockSparseVariantBuffer f8{"x", DType::fp8_e4m3, "H"}, bad_extent{"x", DType::f32, "H*"},
      zero{"x", DType::f32, "0"}, unknown{"x", DType::f32, "Hkv"};
  EXPECT_VKATTN_ERROR(register_block_sparse_variant("decl_test", {f8}, {}), "buffer 'x' has dtype fp8_e4m3");
  for (const auto& b2 : {bad_extent, zero, unknown}) {
    const std::string message = "buffer 'x' has extent '" + b2.extent + "'";
    EXPECT_VKATTN_ERROR(register_block_sparse_variant("decl_test", {b2}, {}), message.c_str(), "B, H, Lq, Lkv");
  }
  const BlockSparseVariantBuffer ok{"x", DType::f32, "H*Lkv*2"};
  EXPECT_VKATTN_ERROR(register_block_sparse_variant("decl_test", {ok, ok}, {}), "buffer 'x' is declared twice");
}

// What an adversarial pass found: sizes that narrowed into "the same as q's"
// or wrapped in 32 bits, values ignored for mods that are off, and custom
// buffers that no check kept apart from the outputs.
TEST_F(BlockSparseSmall, ShapesAndOffsetsAreCheckedBeforeTheyNarrow) {
  auto strided = [&](std::vector<int64_t> shape, VkDeviceSize offset) {
    TensorView t = TensorView::contiguous(qkv_, DType::f16, {1}, offset);
    t.shape = std::move(shape);
    t.strides = {H * L * D, L * D, D, 1};
    return t;
  };
  {
    auto a = a_;   // V and out of head size 0 with explicit strides: no "same as q's"
    a.v = strided({B, H, L, 0}, 2 * B * H * L * D * 2);
    a.out = strided({B, H, L, 0}, 3 * B * H * L * D * 2);
    EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "V's head size 0", "multiple of 16 up to 256");
  }
  {
    auto a = a_;
    a.q = strided({B, H, L, -32}, 0);
    EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "head size -32", "multiple of 16 up to 256");
  }
  {
    auto a = a_;
    a.q = strided({B, (int64_t(1) << 32) + H, 0, D}, 0);
    EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "4294967298 heads", "at most 65535");
  }
  // q_pos = q_idx + q_offset and q_pos - kv_idx must fit 32 bits.
  for (int64_t off : {int64_t(INT32_MAX) - 1, int64_t(INT32_MIN) + L - 1}) {
    auto a = a_;
    a.q_offset = static_cast<int32_t>(off);
    const std::string said = "q_offset = " + std::to_string(off);
    EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), said.c_str(), "outside 32 bits");
    BlockMaskBuild b;
    b.mods.all = kMaskCausal;
    b.q_len = b.kv_len = L;
    b.mask = a_.mask;
    b.q_offset = a.q_offset;
    EXPECT_VKATTN_ERROR(build_block_mask(ctx(), b), "build_block_mask:", "outside 32 bits");
  }
  {
    auto a = a_;   // the extremes that still fit run
    a.q_offset = INT32_MAX - int32_t(L - 1);
    block_sparse_attention(ctx(), a);
    a.q_offset = INT32_MIN + int32_t(L);
    block_sparse_attention(ctx(), a);
  }
}

TEST_F(BlockSparseSmall, ValuesOfModsThatAreOffAreRefused) {
  auto a = a_;   // causal only
  a.values.window = 5;
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "values.window = 5 is given but kMaskWindow is off");
  a.values.window = 0;
  a.values.prefix_len = 5;
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "values.prefix_len = 5 is given but kMaskPrefix is off");
  a.values.prefix_len = 0;
  a.values.softcap = 1e-30f;
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "values.softcap = 1e-30 is given but kScoreSoftcap is off");
  BlockMaskBuild b;
  b.mods.all = kMaskCausal;
  b.q_len = b.kv_len = L;
  b.mask = a_.mask;
  b.values.window = 3;
  EXPECT_VKATTN_ERROR(build_block_mask(ctx(), b), "build_block_mask:", "kMaskWindow is off");
  BlockSparseMods bad;
  bad.all = 0xFF;
  EXPECT_VKATTN_ERROR(prepare_build_block_mask(ctx(), std::span<const BlockSparseMods>(&bad, 1)), "prepare_build_block_mask:",
                      "unknown bits");
  BlockSparseVariant v;
  v.num_q_heads = v.num_kv_heads = H;
  v.head_size = 40;
  EXPECT_VKATTN_ERROR(prepare_block_sparse_attention(ctx(), std::span<const BlockSparseVariant>(&v, 1)),
                      "prepare_block_sparse_attention:", "head size 40");
}

TEST_F(BlockSparseSmall, CustomBuffersAreNamedOnceAndKeptApartFromOutputs) {
  Buffer w(ctx(), 256), sh(ctx(), 256);
  auto a = a_;
  a.custom_mods = "test_stripes";
  const TensorView weights = TensorView::contiguous(w, DType::f32, {L}), shifts = TensorView::contiguous(sh, DType::i32, {H});
  a.custom_buffers = {{"key_weight", weights}, {"head_shift", shifts}, {"key_weight", weights}};
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "custom_buffers names 'key_weight' twice");
  // key_weight over out's bytes: the kernel would read what it writes.
  a.custom_buffers = {{"key_weight", TensorView::contiguous(qkv_, DType::f32, {L}, 3 * B * H * L * D * 2)}, {"head_shift", shifts}};
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "out", "overlaps key_weight");
  a.custom_buffers = {{"key_weight", weights}, {"head_shift", shifts}};
  block_sparse_attention(ctx(), a);
  BlockMaskBuild b;
  b.mods.all = kMaskCausal;
  b.q_len = b.kv_len = L;
  b.mask = a_.mask;
  b.custom_mods = "test_stripes";
  b.custom_buffers = {{"key_weight", weights}, {"head_shift", TensorView::contiguous(meta_, DType::i32, {H})}};
  EXPECT_VKATTN_ERROR(build_block_mask(ctx(), b), "build_block_mask:", "overlaps head_shift");
}

// Block lists are read on the device: an index past the keys, a negative one
// and a count above the lists' capacity are kept in bounds and reported.
TEST_F(BlockSparseSmall, BadBlockListsAreReportedNotFollowed) {
  const std::pair<std::vector<int32_t>, const char*> bad[] = {
      {{1, 5}, "kv_indices row 0 entry 0 = 5 on the device is not a kv block"},
      {{1, -3}, "kv_indices row 0 entry 0 = -3"},
      {{7, 0}, "kv_num_blocks row 0 = 7 on the device (expected 0 to kv_blocks = 1)"}};
  for (const auto& [words, message] : bad) {
    meta_.upload(words.data(), words.size() * 4);
    EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a_), message);
  }
  const int32_t good[] = {1, 0};
  meta_.upload(good, sizeof good);
  block_sparse_attention(ctx(), a_);   // the status was reset: a good run passes
  // The full lists' count names the full list.
  auto a = a_;
  const int32_t full[] = {0, 0, -2, 0};   // no partial block; full_kv_num_blocks -2
  meta_.upload(full, sizeof full);
  a.mask.full_kv_num_blocks = TensorView::contiguous(meta_, DType::i32, {1, 1, 1}, 8);
  a.mask.full_kv_indices = TensorView::contiguous(meta_, DType::i32, {1, 1, 1, 1}, 12);
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "full_kv_num_blocks row 0 = -2 on the device");
  // A full list's bad index names the full list and its own entry (the
  // matrix paths report it after the key loop, from the list entry kept).
  const int32_t full_index[] = {0, 0, 1, 9};   // no partial block; one full block, index 9
  meta_.upload(full_index, sizeof full_index);
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "full_kv_indices row 0 entry 0 = 9 on the device is not a kv block");
  const int32_t both[] = {1, 0, 1, -4};   // a good partial block, then a full one with index -4
  meta_.upload(both, sizeof both);
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "full_kv_indices row 0 entry 0 = -4");
  // The same reports from the document modules (the matrix paths'
  // block_sparse_documents, which report after the key loop too).
  Buffer ids(ctx(), L * 4);
  ids.fill(0);   // one document
  a.mods.all = kMaskCausal | kMaskDocument;
  a.values.document_ids = TensorView::contiguous(ids, DType::i32, {L});
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "full_kv_indices row 0 entry 0 = -4");
  const int32_t partial_index[] = {1, 6, 0, 0};   // a partial block with index 6, no full block
  meta_.upload(partial_index, sizeof partial_index);
  EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "kv_indices row 0 entry 0 = 6 on the device is not a kv block");
}

// A slope that is not finite makes its head's output meaningless: reported,
// as paged_attention reports it.
TEST_F(BlockSparseSmall, NonFiniteAlibiSlopesAreReported) {
  Buffer slopes(ctx(), 256);
  auto a = a_;
  a.mods.score = kScoreAlibi;
  a.values.alibi_slopes = TensorView::contiguous(slopes, DType::f32, {H});
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    const float words[] = {0.5f, bad};
    slopes.upload(words, sizeof words);
    EXPECT_VKATTN_ERROR(block_sparse_attention(ctx(), a), "alibi_slopes[1] =", "is not finite");
  }
  const float fine[] = {0.5f, 0.25f};
  slopes.upload(fine, sizeof fine);
  block_sparse_attention(ctx(), a);
}

}  // namespace
}  // namespace vkattn::test
