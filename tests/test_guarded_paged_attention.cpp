// Paged attention over guarded memory (guarded_memory.hpp): every cache block
// is its own chunk flush against an unmapped page (after it, or before it),
// and so are q, out, lse, the batch's metadata and the split workspace. A
// kernel that reads past (or before) any of them dies at once, on every run,
// with the buffer named; one that stays inside them must match the float64
// reference.
//
// On lavapipe, loads through device addresses (the cache) reach the guard
// pages; storage-buffer bindings are bounds-checked by the driver and do not.
#include <cmath>
#include <cstring>

#include <vkattn_ref/attention_ref.hpp>
#include <vkattn_ref/tensor_data.hpp>

#include "guarded_memory.hpp"
#include "runners/paged_attention_runner.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

struct GuardedCase {
  std::string name;
  std::vector<std::pair<uint32_t, uint32_t>> seqs;   // query_len:seq_len
  uint32_t num_q_heads = 8, num_kv_heads = 8, head_size = 128, block_size = 16;
  DType cache_dtype = DType::f16;
  KvLayout layout = KvLayout::nhd;
  int32_t sliding_window = 0;
  SplitKv split = SplitKv::automatic;
  GuardAt at = GuardAt::end;
  PrefillKernel prefill = PrefillKernel::automatic;
};

void PrintTo(const GuardedCase& c, std::ostream* os) { *os << c.name; }

// Decode rows of every kind: a long context, short ones, one exactly a block,
// one a block and a key, a single key.
const std::vector<std::pair<uint32_t, uint32_t>> kDecode = {{1, 300}, {1, 5}, {1, 37}, {1, 1}, {1, 16}, {1, 33}};

uint32_t cdiv(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

// Small finite bits of a 16-bit or fp8 format: |value| in [0.125, 0.25) for
// f16, about the same for bf16; fp8 exponents well below the top.
uint16_t small_bits(DType t, uint32_t r) {
  if (dtype_size(t) == 1) return uint16_t(0x20 | (r & 0x9F));
  return t == DType::bf16 ? uint16_t(0x3E00 | (r & 0x80FF)) : uint16_t(0x3000 | (r & 0x83FF));
}

// Runs the case over guarded memory and returns "" or what is wrong with the
// output (a fault kills the process instead).
std::string run_guarded(Context& ctx, const GuardedCase& c) {
  std::vector<std::unique_ptr<GuardedBuffer>> views;
  auto guarded = [&](uint64_t bytes, const char* name) -> GuardedBuffer& {
    views.push_back(std::make_unique<GuardedBuffer>(ctx, std::max<uint64_t>(bytes, 4), c.at, name));
    return *views.back();
  };
  const uint32_t S = static_cast<uint32_t>(c.seqs.size()), bs = c.block_size;
  std::vector<int32_t> qsl{0}, seq_lens;
  uint32_t num_blocks = 0, mbps = 1;
  for (auto [q, len] : c.seqs) {
    qsl.push_back(qsl.back() + int32_t(q));
    seq_lens.push_back(int32_t(len));
    num_blocks += cdiv(len, bs);
    mbps = std::max(mbps, cdiv(len, bs));
  }
  const uint32_t T = static_cast<uint32_t>(qsl.back()), Hq = c.num_q_heads, D = c.head_size;
  // Blocks handed out last to first: neighbouring keys lie in different chunks.
  std::vector<int32_t> table(uint64_t(S) * mbps, 0);
  for (uint32_t s = 0, next = num_blocks; s < S; ++s)
    for (uint32_t b = 0; b < cdiv(c.seqs[s].second, bs); ++b) table[s * mbps + b] = int32_t(--next);

  // One block per chunk: a guard page next to every block (at most 64).
  KvCacheConfig cfg{.num_blocks = num_blocks, .block_size = bs, .num_kv_heads = c.num_kv_heads, .head_size = D,
                    .dtype = c.cache_dtype, .layout = c.layout, .k_scale = 0.05f, .v_scale = 0.03f};
  GuardedKvCache g = make_guarded_kv_cache(ctx, cfg, c.at);
  uint32_t x = 12345;
  auto rnd = [&] { return (x = x * 1664525u + 1013904223u) >> 8; };
  const std::size_t es = dtype_size(c.cache_dtype);
  for (auto* parts : {&g.k, &g.v})
    for (auto& buf : *parts)
      for (uint64_t i = 0; i < buf->size(); i += es) {
        const uint16_t b = small_bits(c.cache_dtype, rnd());
        std::memcpy(buf->data() + i, &b, es);
      }

  const uint64_t qn = uint64_t(T) * Hq * D;
  GuardedBuffer& q = guarded(qn * 2, "q");
  GuardedBuffer& out = guarded(qn * 2, "out");
  GuardedBuffer& lse = guarded(uint64_t(T) * Hq * 4, "lse");
  GuardedBuffer& qsl_buf = guarded(qsl.size() * 4, "query_start_loc");
  GuardedBuffer& lens_buf = guarded(seq_lens.size() * 4, "seq_lens");
  GuardedBuffer& table_buf = guarded(table.size() * 4, "block_table");
  for (uint64_t i = 0; i < qn; ++i) {
    const uint16_t b = small_bits(DType::f16, rnd());
    std::memcpy(q.data() + 2 * i, &b, 2);
  }
  std::memset(out.data(), 0xFF, out.size());
  std::memcpy(qsl_buf.data(), qsl.data(), qsl.size() * 4);
  std::memcpy(lens_buf.data(), seq_lens.data(), seq_lens.size() * 4);
  std::memcpy(table_buf.data(), table.data(), table.size() * 4);

  PagedAttentionPlanOptions popt;
  popt.split = c.split;
  popt.prefill = c.prefill;
  const PagedAttentionPlan plan(ctx, cfg, Hq, DType::f16, PagedAttentionLengths{qsl, seq_lens}, popt);
  PagedAttentionArgs args;
  args.q = TensorView::contiguous(q.ref(), DType::f16, {T, Hq, D}, q.offset());
  args.out = TensorView::contiguous(out.ref(), DType::f16, {T, Hq, D}, out.offset());
  args.lse = TensorView::contiguous(lse.ref(), DType::f32, {T, Hq}, lse.offset());
  args.batch.query_start_loc = TensorView::contiguous(qsl_buf.ref(), DType::i32, {S + 1}, qsl_buf.offset());
  args.batch.seq_lens = TensorView::contiguous(lens_buf.ref(), DType::i32, {S}, lens_buf.offset());
  args.batch.block_table = TensorView::contiguous(table_buf.ref(), DType::i32, {S, mbps}, table_buf.offset());
  args.params.scale = 1.0f / std::sqrt(float(D));
  args.params.sliding_window = c.sliding_window;
  if (plan.workspace_bytes()) {
    GuardedBuffer& ws = guarded(plan.workspace_bytes(), "workspace");
    std::memset(ws.data(), 0, std::min(plan.workspace_bytes(), kPagedAttentionWorkspaceCounterBytes));   // its arrival counters
    args.workspace = TensorView::contiguous(ws.ref(), DType::f32, {int64_t(plan.workspace_bytes() / 4)}, ws.offset());
  }
  install_guard_fault_reporter();
  paged_attention(ctx, plan, *g.cache, args);

  // The reference over the same bytes: the blocks side by side are the whole cache.
  ref::PagedAttentionProblem p;
  p.q = ref::decode_values(ref::ElemType::f16, std::vector<uint8_t>(q.data(), q.data() + qn * 2));
  p.num_tokens = T;
  p.num_q_heads = Hq;
  p.num_kv_heads = c.num_kv_heads;
  p.head_size = D;
  p.query_start_loc = qsl;
  p.seq_lens = seq_lens;
  p.block_table = table;
  p.max_blocks_per_seq = mbps;
  p.cache = {num_blocks, bs, c.num_kv_heads, D, ref::elem_type(dtype_name(c.cache_dtype)),
             static_cast<ref::KvLayoutRef>(static_cast<uint32_t>(c.layout))};
  for (uint32_t b = 0; b < num_blocks; ++b) {
    p.k_cache.insert(p.k_cache.end(), g.k[b]->data(), g.k[b]->data() + g.k[b]->size());
    p.v_cache.insert(p.v_cache.end(), g.v[b]->data(), g.v[b]->data() + g.v[b]->size());
  }
  p.k_scale = cfg.k_scale;
  p.v_scale = cfg.v_scale;
  p.scale = args.params.scale;
  p.sliding_window = c.sliding_window;
  const ref::PagedAttentionResult want = ref::paged_attention(p);

  tool::PagedAttentionCase tc;
  tc.cache_dtype = c.cache_dtype;
  const tool::PagedAttentionTolerance tol = tool::paged_attention_tolerance(tc);
  const std::vector<double> got = ref::decode_values(ref::ElemType::f16, std::vector<uint8_t>(out.data(), out.data() + qn * 2));
  for (uint64_t r = 0; r < uint64_t(T) * Hq; ++r) {
    double row_max = 0;
    for (uint32_t d = 0; d < D; ++d) row_max = std::max(row_max, std::fabs(want.out[r * D + d]));
    for (uint32_t d = 0; d < D; ++d) {
      const double w = want.out[r * D + d], e = std::fabs(got[r * D + d] - w);
      if (!(e <= tol.row_atol * row_max + tol.rtol * std::fabs(w) + tol.floor))
        return "row " + std::to_string(r) + " dim " + std::to_string(d) + ": out " + std::to_string(got[r * D + d]) +
               ", reference " + std::to_string(w);
    }
  }
  return "";
}

class GuardedTest : public VkTest {
 protected:
  void SetUp() override {
    VkTest::SetUp();
    if (!guarded_memory_available(ctx())) GTEST_SKIP() << "the device cannot import host memory";
  }
};

class GuardedPagedAttention : public GuardedTest, public ::testing::WithParamInterface<GuardedCase> {};

TEST_P(GuardedPagedAttention, ReadsOnlyInsideItsBuffers) { EXPECT_EQ(run_guarded(ctx(), GetParam()), ""); }

std::vector<GuardedCase> cases() {
  std::vector<GuardedCase> v;
  for (GuardAt at : {GuardAt::end, GuardAt::start}) {
    const std::string side = at == GuardAt::end ? "_guard_after" : "_guard_before";
    v.push_back({.name = "gqa1_d128_f16_nhd" + side, .seqs = kDecode, .at = at});
    v.push_back({.name = "gqa5_d128_f16_nhd_split_on" + side, .seqs = kDecode, .num_q_heads = 40, .split = SplitKv::on, .at = at});
    v.push_back({.name = "gqa1_d128_f16_nhd_window64" + side, .seqs = kDecode, .sliding_window = 64, .at = at});
    v.push_back({.name = "gqa1_d128_f16_nhd_window64_split_on" + side, .seqs = kDecode, .sliding_window = 64,
                 .split = SplitKv::on, .at = at});
  }
  v.push_back({.name = "gqa5_d128_e4m3_split_split_on", .seqs = kDecode, .num_q_heads = 40, .cache_dtype = DType::fp8_e4m3,
               .layout = KvLayout::split, .split = SplitKv::on});
  v.push_back({.name = "gqa1_d128_e4m3_hnd_window64", .seqs = kDecode, .cache_dtype = DType::fp8_e4m3,
               .layout = KvLayout::hnd, .sliding_window = 64, .at = GuardAt::start});
  // Prefill rows (16-row tiles) next to decode ones.
  v.push_back({.name = "mixed_gqa5_d64_f16_split", .seqs = {{1, 200}, {5, 18}, {17, 63}}, .num_q_heads = 40, .head_size = 64,
               .layout = KvLayout::split});
  // A prompt on the prefill kernel (matrix paths): its tiles' keys in chunks
  // past the 8 whose bases the kernels hold in shared memory.
  v.push_back({.name = "prefill_gqa1_d128_f16_nhd", .seqs = {{160, 200}, {1, 37}}, .prefill = PrefillKernel::on});
  return v;
}

INSTANTIATE_TEST_SUITE_P(ScalarPath, GuardedPagedAttention, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

// Regression of an out-of-bounds read (the hardening issue, item 1). Head
// size 16 with one query row per tile (decode, GQA 1) made the plan pick 16
// invocations per workgroup (the largest power of two dividing rows x
// head_size) but 32-key tiles: paged_attention.comp sets a tile's
// key_block / value_block entries only from invocations tid < BN, so entries
// 16..31 were never written, and load_tile read K/V through whatever those
// shared-memory words held: zero on a fresh thread (a fault at address 0 +
// the key's offset), or another dispatch's stale addresses (a fault, or keys
// from the wrong place). Before the fix (choose_tile caps BN at the
// workgroup size) these died with "guarded memory: fault at 0x0: not in a
// guard page".
class GuardedPagedAttentionBug : public GuardedTest {};

TEST_F(GuardedPagedAttentionBug, HeadSize16DecodeSetsEveryBlockAddress) {
  EXPECT_EQ(run_guarded(ctx(), {.name = "gqa1_d16", .seqs = kDecode, .head_size = 16}), "");
}

TEST_F(GuardedPagedAttentionBug, HeadSize16DecodeWithWindowSetsEveryBlockAddress) {
  EXPECT_EQ(run_guarded(ctx(), {.name = "gqa1_d16_window64", .seqs = kDecode, .head_size = 16, .sliding_window = 64}), "");
}

}  // namespace
}  // namespace vkattn::test
