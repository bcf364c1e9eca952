// Hostile metadata on the device: valid plans run after the engine's
// query_start_loc, seq_lens and block table were randomly corrupted (as a bug
// or a race in an engine would). From a fixed seed, each run gets a random
// batch within its plan's limits and then, most times, one to three corrupted
// entries. Each run must
//  - succeed when the batch is still one the plan serves, with every output
//    matching the float64 reference and the rows past the batch untouched;
//  - throw a vkattn::Error naming the field (block_table, query_start_loc,
//    seq_lens, or the plan's query_len) when the batch is one the kernels
//    must refuse; either, with the error named, in between (a query longer
//    than the plan's, which its tiles may still hold);
//  - never touch a byte outside out, lse and the workspace: every view lies
//    in a canary arena checked after every run, and the cache's bytes are
//    compared too;
//  - never read outside the cache: each block is its own chunk flush against
//    a guard page (GuardedBuffer, on CPU devices), so a stray read faults.
// The batch geometry is fixed (three plans on one cache geometry), so the
// runs share a handful of pipelines.
#include <cmath>
#include <cstring>

#include <vkattn_ref/attention_ref.hpp>
#include <vkattn_ref/tensor_data.hpp>

#include "canary_arena.hpp"
#include "guarded_memory.hpp"
#include "hostile_generator.hpp"
#include "hostile_views.hpp"
#include "ops/paged_attention_plan.hpp"
#include "runners/paged_attention_runner.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

using ref::Rng;

constexpr uint32_t kRunsPerPlan = 80;
constexpr uint32_t kMaxSeqLen = 40;

// The fields a device-side error may name.
const std::vector<std::string> kFields = {"block_table", "query_start_loc", "seq_lens", "query_len"};

// What the check kernel and the attention kernels make of a device batch,
// modelled on the host: whether they must report it, and whether the plan
// serves it (then the outputs must be right).
struct Verdict {
  bool must_report = false;
  bool served = true;
};

class HostileDeviceMetadata : public VkTest {
 protected:
  void SetUp() override {
    VkTest::SetUp();
    Rng r(77);
    if (guarded_memory_available(ctx())) {
      for (GuardAt at : {GuardAt::end, GuardAt::start}) guarded_.push_back(make_guarded_kv_cache(ctx(), cfg_, at));
      install_guard_fault_reporter();
      for (auto& g : guarded_) {
        for (auto* parts : {&g.k, &g.v})
          for (auto& b : *parts) fill_cache_bytes(r, b->data(), b->size());
        caches_.push_back(g.cache.get());
      }
    } else {
      plain_ = std::make_unique<PagedKvCache>(ctx(), cfg_);
      std::vector<uint8_t> k(plain_->block_bytes() * cfg_.num_blocks), v(k.size());
      fill_cache_bytes(r, k.data(), k.size());
      fill_cache_bytes(r, v.data(), v.size());
      plain_->write_blocks(KvPart::key, 0, k);
      plain_->write_blocks(KvPart::value, 0, v);
      caches_.push_back(plain_.get());
    }
    for (const PagedKvCache* c : caches_) images_.push_back(cache_image(*c));
    arena_ = std::make_unique<CanaryArena>(ctx(), 256 << 10, 78);
  }
  void TearDown() override {
    arena_.reset();
    caches_.clear();
    plain_.reset();
    guarded_.clear();
    VkTest::TearDown();
  }

  // f16 values in (-1, 1), never NaN: the cache holds finite keys everywhere.
  static void fill_cache_bytes(Rng& r, uint8_t* p, std::size_t n) {
    for (std::size_t i = 0; i + 1 < n; i += 2) {
      const uint16_t b = ref::f16_from_double(r.uniform(-1, 1));
      std::memcpy(p + i, &b, 2);
    }
  }
  // Every block's K bytes, then every block's V bytes.
  std::pair<std::vector<uint8_t>, std::vector<uint8_t>> cache_image(const PagedKvCache& c) const {
    if (!guarded_.empty()) {
      for (const auto& g : guarded_)
        if (g.cache.get() == &c) {
          std::pair<std::vector<uint8_t>, std::vector<uint8_t>> img;
          for (const auto& b : g.k) img.first.insert(img.first.end(), b->data(), b->data() + b->size());
          for (const auto& b : g.v) img.second.insert(img.second.end(), b->data(), b->data() + b->size());
          return img;
        }
    }
    return {c.read_blocks(KvPart::key, 0, cfg_.num_blocks), c.read_blocks(KvPart::value, 0, cfg_.num_blocks)};
  }

  Verdict judge(const PagedAttentionPlan& plan, const std::vector<int32_t>& qsl, const std::vector<int32_t>& lens,
                const std::vector<int32_t>& table, uint32_t mbps) const {
    const auto& sch = plan.data().schedule;
    const int64_t T = plan.num_tokens(), gqa = plan.num_q_heads() / cfg_.num_kv_heads, bs = cfg_.block_size;
    Verdict v;
    if (qsl[0] != 0) v.served = false;   // tokens before it belong to no sequence: not a batch the API describes
    for (std::size_t s = 0; s < lens.size(); ++s) {
      const int64_t q0 = qsl[s], q1 = qsl[s + 1], len = lens[s];
      if (q0 < 0 || q1 < q0 || q1 > T) v.must_report = true;
      else if (len < 0 || (len > 0 && len < q1 - q0)) v.must_report = true;
      else if (len > int64_t(mbps) * bs) v.must_report = true;
      else if (sch.one_tile_per_seq && !sch.prefill.on && (q1 - q0) * gqa > sch.bm) v.must_report = true;
      else {
        if (q1 - q0 > int64_t(plan.max_query_len())) v.served = false;
        if (q1 > q0)   // rows that see every key of the sequence read every block it uses
          for (int64_t b = 0; b < (len + bs - 1) / bs; ++b) {
            const int32_t e = table[s * mbps + b];
            if (e < 0 || e >= int32_t(cfg_.num_blocks)) v.must_report = true;
          }
      }
    }
    if (v.must_report) v.served = false;
    return v;
  }

  // A valid batch for `plan`: its own (a per-batch plan), or any within its limits (replay).
  void random_batch(Rng& r, const PagedAttentionPlan& plan, const Lengths* own, std::vector<int32_t>& qsl,
                    std::vector<int32_t>& lens) const {
    if (own) {
      qsl = own->qsl;
      lens = own->lens;
      return;
    }
    const uint32_t S = plan.num_seqs(), T = plan.num_tokens(), mql = plan.max_query_len();
    qsl.assign(1, 0);
    lens.clear();
    for (uint32_t s = 0; s < S; ++s) {
      const uint32_t room = T - uint32_t(qsl.back());
      const uint32_t q = r.below(std::min(mql, room) + 1);
      const uint32_t len = r.below(5) == 0 ? 0 : std::max<uint32_t>(q, r.below(kMaxSeqLen + 1));
      qsl.push_back(qsl.back() + int32_t(q));
      lens.push_back(int32_t(len));
    }
  }

  // One to three corruptions of the batch the device holds.
  void corrupt(Rng& r, std::vector<int32_t>& qsl, std::vector<int32_t>& lens, std::vector<int32_t>& table, uint32_t T,
               uint32_t capacity) const {
    const int32_t lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
    auto step = [](int32_t x, int32_t by) { return int32_t(uint32_t(x) + uint32_t(by)); };   // wraps, as a device's int would
    const int32_t nb = int32_t(cfg_.num_blocks);
    for (uint32_t n = 1 + r.below(3); n > 0; --n) {
      switch (r.below(4)) {
        case 0: {
          int32_t& e = table[r.below(static_cast<uint32_t>(table.size()))];
          e = pick<int32_t>(r, {-1, lo, hi, nb, nb + 1 + int32_t(r.below(100)), 1 << 30, int32_t(r.below(nb))});
          break;
        }
        case 1: {
          if (lens.empty()) break;
          int32_t& l = lens[r.below(static_cast<uint32_t>(lens.size()))];
          l = pick<int32_t>(r, {-1, lo, hi, step(l, 1), step(l, -1), int32_t(capacity), int32_t(capacity) + 1, 0, int32_t(r.below(60))});
          break;
        }
        case 2: {
          int32_t& q = qsl[r.below(static_cast<uint32_t>(qsl.size()))];
          q = pick<int32_t>(r, {-1, lo, hi, int32_t(T), int32_t(T) + 1, step(q, 1), step(q, -1), int32_t(r.below(T + 1))});
          break;
        }
        default:
          std::swap(qsl[r.below(static_cast<uint32_t>(qsl.size()))], qsl[r.below(static_cast<uint32_t>(qsl.size()))]);
          break;
      }
    }
  }

  // What is wrong with the outputs of a run that succeeded on a served batch ("" when nothing).
  std::string check_values(const PagedAttentionPlan& plan, std::size_t cache_index, const std::vector<int32_t>& qsl,
                           const std::vector<int32_t>& lens, const std::vector<int32_t>& table, uint32_t mbps,
                           const std::vector<double>& q, const TensorView& out, const TensorView& lse,
                           const std::vector<uint8_t>& before, float scale) const {
    const uint32_t T = plan.num_tokens(), H = plan.num_q_heads(), D = cfg_.head_size, used = uint32_t(qsl.back());
    ref::PagedAttentionProblem p;
    p.q.assign(q.begin(), q.begin() + uint64_t(used) * H * D);
    p.num_tokens = used;
    p.num_q_heads = H;
    p.num_kv_heads = cfg_.num_kv_heads;
    p.head_size = D;
    p.query_start_loc = qsl;
    p.seq_lens = lens;
    // Sequences without new tokens have no rows, so the kernels never read
    // their blocks; the reference checks every sequence's, so give it block 0.
    p.block_table = table;
    for (std::size_t s = 0; s + 1 < qsl.size(); ++s)
      if (qsl[s + 1] == qsl[s]) std::fill_n(p.block_table.begin() + s * mbps, mbps, 0);
    p.max_blocks_per_seq = mbps;
    p.cache = {cfg_.num_blocks, cfg_.block_size, cfg_.num_kv_heads, D, ref::ElemType::f16,
               static_cast<ref::KvLayoutRef>(static_cast<uint32_t>(cfg_.layout))};
    p.k_cache = images_[cache_index].first;
    p.v_cache = images_[cache_index].second;
    p.scale = scale;
    const ref::PagedAttentionResult want = ref::paged_attention(p);
    tool::PagedAttentionCase tc;
    const tool::PagedAttentionTolerance tol = tool::paged_attention_tolerance(tc);
    const uint8_t* base = arena_->data();
    for (uint64_t row = 0; row < uint64_t(T) * H; ++row) {
      const uint64_t t = row / H, h = row % H;
      const uint64_t out_at = out.offset + (t * out.stride(0) + h * out.stride(1)) * 2, lse_at = lse.offset + (t * lse.stride(0) + h) * 4;
      if (t >= used) {   // past the batch: untouched
        if (std::memcmp(base + out_at, before.data() + out_at, D * 2) || std::memcmp(base + lse_at, before.data() + lse_at, 4))
          return "token " + std::to_string(t) + " past the batch's " + std::to_string(used) + " was written";
        continue;
      }
      double row_max = 0;
      for (uint32_t d = 0; d < D; ++d) row_max = std::max(row_max, std::fabs(want.out[row * D + d]));
      for (uint32_t d = 0; d < D; ++d) {
        uint16_t bits;
        std::memcpy(&bits, base + out_at + 2 * d, 2);
        const double got = ref::f16_to_double(bits), w = want.out[row * D + d];
        const bool ok = row_max == 0 ? got == 0 : std::fabs(got - w) <= tol.row_atol * row_max + tol.rtol * std::fabs(w) + tol.floor;
        if (!ok)
          return "token " + std::to_string(t) + " head " + std::to_string(h) + " dim " + std::to_string(d) + ": out " +
                 std::to_string(got) + ", reference " + std::to_string(w);
      }
      float l;
      std::memcpy(&l, base + lse_at, 4);
      const double wl = want.lse[row];
      if (wl == -INFINITY ? !(l == -INFINITY) : !(std::fabs(l - wl) <= tol.lse_atol + 0x1p-20 * std::fabs(wl)))
        return "token " + std::to_string(t) + " head " + std::to_string(h) + ": lse " + std::to_string(l) + ", reference " +
               std::to_string(wl);
    }
    return "";
  }

  // Runs every case of one plan; `own` is a per-batch plan's batch.
  void run_plan(const PagedAttentionPlan& plan, const Lengths* own, uint64_t first_seed, Outcomes& tally) {
    const uint32_t S = plan.num_seqs(), T = plan.num_tokens(), H = plan.num_q_heads(), D = cfg_.head_size;
    const uint32_t mbps = (kMaxSeqLen + cfg_.block_size - 1) / cfg_.block_size + 1, capacity = mbps * cfg_.block_size;
    for (uint64_t seed = first_seed; seed < first_seed + kRunsPerPlan; ++seed) {
      Rng r = case_rng(seed);
      arena_->reset();
      std::vector<int32_t> qsl, lens, table(uint64_t(S) * mbps);
      random_batch(r, plan, own, qsl, lens);
      for (auto& e : table) e = int32_t(r.below(cfg_.num_blocks));
      const bool corrupted = r.below(4) != 0;
      if (corrupted) corrupt(r, qsl, lens, table, T, capacity);
      const Verdict verdict = judge(plan, qsl, lens, table, mbps);
      const std::string kind = std::string(corrupted ? "corrupted" : "valid") + (verdict.must_report ? ", must report" : verdict.served ? ", served" : ", either");

      // Every view in the arena, the inputs written there.
      auto place = [&](DType t, std::vector<int64_t> shape, const char* name, bool output) {
        TensorView v = TensorView::contiguous(arena_->ref(), t, std::move(shape));
        if (v.shape.size() >= 2 && r.below(3) == 0) {
          v.strides.resize(v.shape.size());
          for (std::size_t d = 0; d < v.shape.size(); ++d) v.strides[d] = TensorView::contiguous({}, t, v.shape).stride(d);
          v.strides[0] += 1 + r.below(8);
        }
        v.offset = arena_->place(std::max<VkDeviceSize>(v.end_byte(), 1), r.below(2) ? 16 : dtype_size(t), name);
        if (output) arena_->allow_writes(v);
        return v;
      };
      auto write_i32 = [&](const TensorView& v, const std::vector<int32_t>& w) {   // rows at the view's stride
        const uint64_t row = v.shape.size() == 2 ? uint64_t(v.shape[1]) : w.size();
        for (uint64_t i = 0; row && i < w.size(); i += row)
          arena_->write(v.offset + (i / row) * v.stride(0) * 4 * (v.shape.size() == 2), &w[i], row * 4);
      };
      PagedAttentionArgs a;
      a.q = place(DType::f16, {T, H, D}, "q", false);
      const std::vector<double> q = ref::round_to(ref::ElemType::f16, ref::random_values(r, uint64_t(T) * H * D, 2.0));
      for (uint64_t i = 0; i < q.size(); ++i) {
        const uint64_t t = i / (H * D), h = (i / D) % H, d = i % D;
        const uint16_t b = ref::f16_from_double(q[i]);
        arena_->write(a.q.offset + (t * a.q.stride(0) + h * a.q.stride(1) + d) * 2, &b, 2);
      }
      a.out = place(DType::f16, {T, H, D}, "out", true);
      a.lse = place(DType::f32, {T, H}, "lse", true);
      a.batch.query_start_loc = place(DType::i32, {S + 1}, "query_start_loc", false);
      a.batch.seq_lens = place(DType::i32, {S}, "seq_lens", false);
      a.batch.block_table = place(DType::i32, {S, mbps}, "block_table", false);
      write_i32(a.batch.query_start_loc, qsl);
      write_i32(a.batch.seq_lens, lens);
      write_i32(a.batch.block_table, table);
      if (plan.split()) {
        a.workspace = place(DType::f32, {int64_t(plan.workspace_bytes() / 4)}, "workspace", true);
        zero_workspace_counters(*arena_, *a.workspace);
      }
      a.params.scale = 1.0f / std::sqrt(float(D));
      const std::vector<uint8_t> before(arena_->data(), arena_->data() + arena_->size());
      const std::size_t ci = r.below(static_cast<uint32_t>(caches_.size()));

      std::string problem, error;
      try {
        paged_attention(ctx(), plan, *caches_[ci], a);
      } catch (const Error& e) {
        error = e.what();
      } catch (const std::exception& e) {
        problem = std::string("threw something other than vkattn::Error: ") + e.what();
      }
      if (problem.empty() && !error.empty()) {
        const bool named = std::any_of(kFields.begin(), kFields.end(), [&](const std::string& f) { return error.find(f) != std::string::npos; });
        if (!named) problem = "the error names none of the batch's fields: " + error;
        else if (verdict.served) problem = "a batch the plan serves was refused: " + error;
      } else if (problem.empty()) {
        if (verdict.must_report) problem = "the corrupted batch ran without an error";
        else if (verdict.served) {
          try {
            problem = check_values(plan, ci, qsl, lens, table, mbps, q, a.out, *a.lse, before, a.params.scale);
          } catch (const std::exception& e) {
            problem = std::string("the reference refused the batch: ") + e.what();
          }
        }
      }
      if (problem.empty()) problem = arena_->check();
      if (problem.empty() && cache_image(*caches_[ci]) != images_[ci]) problem = "the cache's bytes changed";
      tally.count(kind);
      if (!problem.empty()) {
        auto text = [](const std::vector<int32_t>& v) {
          std::string s;
          for (int32_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
          return s;
        };
        tally.fail(seed, kind, problem + " (query_start_loc " + text(qsl) + "; seq_lens " + text(lens) + ")");
      }
    }
  }

  KvCacheConfig cfg_{.num_blocks = 24, .block_size = 5, .num_kv_heads = 2, .head_size = 32, .dtype = DType::f16,
                     .layout = KvLayout::hnd};
  std::vector<GuardedKvCache> guarded_;
  std::unique_ptr<PagedKvCache> plain_;
  std::vector<const PagedKvCache*> caches_;
  std::vector<std::pair<std::vector<uint8_t>, std::vector<uint8_t>>> images_;
  std::unique_ptr<CanaryArena> arena_;
};

TEST_F(HostileDeviceMetadata, CorruptedBatchesAreReportedAndStayInBounds) {
  Outcomes tally("paged_attention device metadata");
  const uint32_t H = 4;
  // A replay plan for mixed batches (up to 4 new tokens per sequence).
  const PagedAttentionPlan mixed(ctx(), cfg_, H, DType::f16, PagedAttentionLimits{.num_seqs = 4, .max_num_tokens = 12, .max_query_len = 4,
                                                                               .max_seq_len = kMaxSeqLen});
  // A replay plan for decode, split into 3 segments.
  PagedAttentionPlanOptions split;
  split.split = SplitKv::on;
  split.num_segments = 3;
  const PagedAttentionPlan decode(ctx(), cfg_, H, DType::f16, PagedAttentionLimits{.num_seqs = 6, .max_num_tokens = 6, .max_query_len = 1,
                                                                                .max_seq_len = kMaxSeqLen}, split);
  // A plan for one batch (padding and a sequence without new tokens among them).
  Lengths own;
  for (auto [q, len] : {std::pair{3u, 20u}, {1u, 33u}, {2u, 0u}, {0u, 12u}, {2u, 7u}}) own.add(q, len);
  const PagedAttentionPlan batch(ctx(), cfg_, H, DType::f16, PagedAttentionLengths{own.qsl, own.lens});
  ASSERT_TRUE(decode.split());
  run_plan(mixed, nullptr, 7'000'000, tally);
  run_plan(decode, nullptr, 7'100'000, tally);
  run_plan(batch, &own, 7'200'000, tally);
  tally.report();
}

}  // namespace
}  // namespace vkattn::test
