// Hostile host-side inputs to paged attention, generated rather than
// hand-picked: from a fixed seed, thousands of random valid setups (plan
// requests, runs with every view placed at random, prepare calls), each
// broken in one random way, and every one must be refused with a
// vkattn::Error naming what is wrong: never a crash, never another
// exception, never a dispatch.
//
// Every op is called with a real command buffer (one submission per few
// hundred cases, hostile_inputs_fixture.hpp): a missing check would record a
// dispatch, which then runs (and reports, or writes) when the buffer is
// submitted. Each unbroken run is first shown to pass every check (called
// without a command buffer, it fails on exactly that), so that the error a
// case gets is its mutation's. All views lie in canary arenas whose bytes
// must be unchanged afterwards.
//
// A failure prints the case's seed: case_rng(seed) rebuilds that case alone.
// test_hostile_cache_inputs.cpp does the same for write_kv_cache and
// PagedKvCache; test_hostile_regressions.cpp keeps what these found.
#include <optional>

#include "hostile_inputs_fixture.hpp"

namespace vkattn::test {
namespace {

using ref::Rng;

// ---- paged_attention: the plan's inputs ----

// A valid plan request: a cache geometry (with the fixture's caches' or
// random), q heads, q dtype, lengths or limits, options.
struct PlanRequest {
  KvCacheConfig cfg;
  uint32_t num_q_heads = 1;
  DType q_dtype = DType::f16;
  Lengths lengths;
  bool replay = false;
  PagedAttentionLimits limits;
  PagedAttentionPlanOptions options;

  PagedAttentionPlan make(Context& ctx) const {
    return replay ? PagedAttentionPlan(ctx, cfg, num_q_heads, q_dtype, limits, options)
                  : PagedAttentionPlan(ctx, cfg, num_q_heads, q_dtype, PagedAttentionLengths{lengths.qsl, lengths.lens}, options);
  }
};

PlanRequest random_plan_request(Rng& r, const KvCacheConfig& cfg) {
  PlanRequest p;
  p.cfg = cfg;
  p.num_q_heads = cfg.num_kv_heads * (1 + r.below(8));
  p.q_dtype = pick(r, {DType::f16, DType::bf16});
  p.lengths = random_lengths(r, 1, 5, 6, 40);
  p.replay = r.below(3) == 0;
  if (p.replay) {
    p.limits.num_seqs = p.lengths.num_seqs();
    p.limits.max_num_tokens = p.lengths.num_tokens() + r.below(4);
    p.limits.max_query_len = r.below(3) == 0 ? 0 : std::min(p.limits.max_num_tokens, std::max(p.lengths.max_query_len(), 1u));
    p.limits.max_seq_len = r.below(4) == 0 ? 0 : p.lengths.max_seq_len();
  }
  p.options.split = pick(r, {SplitKv::automatic, SplitKv::off, SplitKv::on});
  if (p.options.split == SplitKv::on) p.options.num_segments = r.below(5);
  if (p.options.split == SplitKv::automatic && r.below(4) == 0) p.options.workspace_bytes = r.below(1 << 16);
  return p;
}

// Breaks what a plan and prepare_paged_attention are specialised for: q
// heads, q dtype, or the cache's geometry.
Expect break_shapes(Rng& r, KvCacheConfig& cfg, uint32_t& num_q_heads, DType& q_dtype) {
  switch (r.below(8)) {
    case 0:   // none, or not a whole number per kv head
      if (r.below(2) || cfg.num_kv_heads == 1) num_q_heads = 0;
      else num_q_heads = cfg.num_kv_heads * r.below(8) + 1 + r.below(cfg.num_kv_heads - 1);
      return {"num_q_heads", {"num_q_heads = " + std::to_string(num_q_heads)}};
    case 1:
      num_q_heads = cfg.num_kv_heads * pick<uint32_t>(r, {257, 1024, 1u << 20});
      return {"gqa", {"num_q_heads / num_kv_heads"}};
    case 2:
      q_dtype = bad_dtype(r, {DType::f16, DType::bf16});
      return {"q dtype", {"q dtype"}};
    case 3:
      cfg.head_size = pick<uint32_t>(r, {0, 8, 24, 100, 272, 512, 0xFFFFFFF0u});
      return {"cache head_size", {"head_size = " + std::to_string(cfg.head_size)}};
    case 4:
      cfg.num_kv_heads = pick<uint32_t>(r, {0, 1025, 1u << 31});
      num_q_heads = cfg.num_kv_heads;
      return {"cache num_kv_heads", {"num_kv_heads = " + std::to_string(cfg.num_kv_heads)}};
    case 5:
      cfg.block_size = pick<uint32_t>(r, {0, 1025, 0xFFFFFFFFu});
      return {"cache block_size", {"the cache's block_size = " + std::to_string(cfg.block_size)}};
    case 6:
      cfg.dtype = bad_dtype(r, {DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2});
      return {"cache dtype", {"the cache's dtype = "}};
    default:
      cfg.layout = static_cast<KvLayout>(pick<uint32_t>(r, {3, 7, 0xFFFFFFFFu}));
      return {"cache layout", {"the cache's layout = KvLayout("}};
  }
}

// Breaks a plan request in one random way.
Expect break_plan(Rng& r, PlanRequest& p) {
  auto& qsl = p.lengths.qsl;
  auto& lens = p.lengths.lens;
  const uint32_t S = p.lengths.num_seqs();
  for (;;) {
    switch (r.below(20)) {
      case 0:
        if (p.replay) break;
        if (r.below(2) || qsl.size() < 2) qsl.push_back(qsl.back() + int32_t(r.below(3)));
        else qsl.pop_back();
        return {"query_start_loc size", {"query_start_loc has", "num_seqs + 1"}};
      case 1:
        if (p.replay) break;
        qsl[0] = pick<int32_t>(r, {1, -1, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()});
        return {"query_start_loc[0]", {"query_start_loc[0] = "}};
      case 2: {
        if (p.replay || S == 0) break;
        const uint32_t s = 1 + r.below(S);
        qsl[s] = qsl[s - 1] - 1 - int32_t(r.below(5));
        return {"query_start_loc decreasing", {"query_start_loc is decreasing"}};
      }
      case 3: {
        if (p.replay || S == 0) break;
        const uint32_t s = r.below(S);
        lens[s] = pick<int32_t>(r, {-1, -5, std::numeric_limits<int32_t>::min()});
        return {"seq_lens negative", {"seq_lens[" + std::to_string(s) + "] = -", "expected >= 0"}};
      }
      case 4: {
        if (p.replay) break;
        uint32_t s = S;
        for (uint32_t i = 0; i < S; ++i)
          if (qsl[i + 1] - qsl[i] >= 2) s = i;
        if (s == S) break;
        lens[s] = 1 + int32_t(r.below(uint32_t(qsl[s + 1] - qsl[s] - 1)));
        return {"query_len > seq_len", {"query_len of sequence " + std::to_string(s), "exceeds seq_lens[" + std::to_string(s) + "]"}};
      }
      case 5: case 6: case 7: case 8: case 9: case 10: case 11: case 12:
        return break_shapes(r, p.cfg, p.num_q_heads, p.q_dtype);
      case 13:
        if (!p.replay) break;
        p.limits.max_query_len = p.limits.max_num_tokens + 1 + r.below(100);
        return {"limits.max_query_len", {"limits.max_query_len = "}};
      case 14:
        if (!p.replay) break;
        if (r.below(2)) {
          p.limits.num_seqs = pick<uint32_t>(r, {(1u << 30) + 1, 0xFFFFFFFFu});
          return {"limits.num_seqs", {"limits.num_seqs = " + std::to_string(p.limits.num_seqs)}};
        }
        p.limits.max_num_tokens = pick<uint32_t>(r, {(1u << 30) + 1, 0xFFFFFFFFu});
        p.limits.max_query_len = 1;
        return {"limits.max_num_tokens", {"limits.max_num_tokens = " + std::to_string(p.limits.max_num_tokens)}};
      case 15:   // packed rows (tokens x q heads per kv head) past 32 bits
        p.replay = true;
        p.num_q_heads = p.cfg.num_kv_heads * 256;
        p.limits = {.num_seqs = 1, .max_num_tokens = 1u << 24, .max_query_len = 1};
        return {"packed rows", {"num_tokens * (num_q_heads / num_kv_heads)"}};
      case 16:   // more workgroups than a dispatch holds
        p.replay = true;
        p.cfg.num_kv_heads = 1024;
        p.num_q_heads = 1024;
        p.limits = {.num_seqs = 1u << 30, .max_num_tokens = 1u << 30, .max_query_len = 1};
        p.options.split = SplitKv::off;
        return {"workgroups", {"workgroups are more than one dispatch holds"}};
      case 17:
        p.options.split = SplitKv::on;
        p.options.num_segments = pick<uint32_t>(r, {257, 1000, 0xFFFFFFFFu});
        return {"num_segments", {"num_segments = " + std::to_string(p.options.num_segments)}};
      case 18:
        p.options.split = SplitKv::on;
        p.options.num_segments = 2 + r.below(8);
        p.options.workspace_bytes = r.below(64);
        if (p.replay ? p.limits.max_num_tokens == 0 : p.lengths.num_tokens() == 0) break;
        return {"workspace_bytes", {"workspace", "PagedAttentionPlanOptions::workspace_bytes"}};
      default:
        p.options.split = static_cast<SplitKv>(pick<uint32_t>(r, {3, 17, 0xFFFFFFFFu}));
        return {"split", {"split = SplitKv("}};
    }
  }
}

TEST_F(HostileInputs, PagedAttentionPlans) {
  Outcomes out("PagedAttentionPlan");
  run_cases(1'000'000, 4000, [&](uint64_t seed, VkCommandBuffer) {
    Rng r = case_rng(seed);
    PlanRequest p = random_plan_request(r, r.below(2) ? configs_[r.below(4)] : random_cache_config(r));
    try {
      (void)p.make(ctx());
    } catch (const std::exception& e) {
      out.fail(seed, "valid plan", std::string("the unbroken request was refused: ") + e.what());
      return;
    }
    const Expect e = break_plan(r, p);
    out.expect_error(seed, e, [&] { (void)p.make(ctx()); });
  });
  out.report();
}

// ---- paged_attention: a run's views, parameters, plan and cache ----

struct RunCase {
  uint32_t cache_index = 0;
  bool app_cache = false;   // the geometry's cache over the application's memory
  std::optional<PagedAttentionPlan> plan;
  PagedAttentionArgs args;
  std::vector<ViewRule> rules;
};

// The view a rule names, or null when the (optional) view is absent.
TensorView* view_named(PagedAttentionArgs& a, const std::string& n) {
  auto opt = [](std::optional<TensorView>& v) { return v ? &*v : nullptr; };
  if (n == "q") return &a.q;
  if (n == "out") return &a.out;
  if (n == "lse") return opt(a.lse);
  if (n == "query_start_loc") return &a.batch.query_start_loc;
  if (n == "seq_lens") return &a.batch.seq_lens;
  if (n == "block_table") return &a.batch.block_table;
  if (n == "alibi_slopes") return opt(a.params.alibi_slopes);
  if (n == "sinks") return opt(a.params.sinks);
  if (n == "qq_bias") return opt(a.params.qq_bias);
  if (n == "workspace") return opt(a.workspace);
  return nullptr;
}

class HostilePagedAttention : public HostileInputs {
 protected:
  // A valid run: a plan for a random batch on one of the caches, every view
  // placed at random in the arenas, random layer values.
  RunCase random_run(Rng& r) {
    rewind();
    RunCase c;
    c.cache_index = r.below(static_cast<uint32_t>(caches_.size()));
    c.app_cache = r.below(3) == 0;
    const KvCacheConfig& cfg = configs_[c.cache_index];
    const PlanRequest req = random_plan_request(r, cfg);
    c.plan.emplace(req.make(ctx()));
    const auto& plan = *c.plan;
    const int64_t T = plan.num_tokens(), S = plan.num_seqs(), H = plan.num_q_heads(), D = cfg.head_size;
    const int64_t mbps = std::max<int64_t>(1, (req.lengths.max_seq_len() + cfg.block_size - 1) / cfg.block_size) + r.below(3);
    auto& a = c.args;
    const DType out_dtype = pick(r, {DType::f16, DType::bf16, DType::f32, DType::fp8_e4m3, DType::fp8_e5m2});
    a.q = place_view(r, arena(r), req.q_dtype, {T, H, D}, "q");
    a.out = place_view(r, arena(r), out_dtype, {T, H, D}, "out");
    if (r.below(2)) a.lse = place_view(r, arena(r), DType::f32, {T, H}, "lse");
    a.batch.query_start_loc = place_view(r, arena(r), DType::i32, {S + 1}, "query_start_loc");
    a.batch.seq_lens = place_view(r, arena(r), DType::i32, {S}, "seq_lens");
    a.batch.block_table = place_view(r, arena(r), DType::i32, {S, mbps}, "block_table");
    auto& p = a.params;
    p.scale = static_cast<float>(r.uniform(0.05, 1));
    p.sliding_window = r.below(3) ? 0 : 1 + int32_t(r.below(64));
    p.softcap = r.below(3) ? 0.0f : static_cast<float>(r.uniform(1, 50));
    p.out_scale = static_cast<float>(r.uniform(0.1, 4));
    if (r.below(3) == 0) p.alibi_slopes = place_view(r, arena(r), DType::f32, {H}, "alibi_slopes");
    if (r.below(3) == 0) p.sinks = place_view(r, arena(r), DType::f32, {H}, "sinks");
    if (r.below(3) == 0)
      p.qq_bias = place_view(r, arena(r), DType::f32, {int64_t(plan.max_query_len()) + r.below(3), 1 + r.below(8)}, "qq_bias");
    if (plan.split()) {
      CanaryArena& wa = arena(r);
      a.workspace = place_view(r, wa, DType::f32, {int64_t(plan.workspace_bytes() / 4) + r.below(16)}, "workspace");
      zero_workspace_counters(wa, *a.workspace);
    } else if (r.below(4) == 0) a.workspace = place_view(r, arena(r), DType::f32, {1 + r.below(64)}, "workspace");

    const bool binds = T > 0 && plan.num_workgroups() > 0;
    const std::vector<DType> outs = {DType::f16, DType::bf16, DType::f32, DType::fp8_e4m3, DType::fp8_e5m2};
    c.rules = {{"q", {req.q_dtype}, {T, H, D}, false, binds},
               {"out", outs, {T, H, D}, true, binds},
               {"lse", {DType::f32}, {T, H}, true, binds},
               {"query_start_loc", {DType::i32}, {S + 1}, false, binds},
               {"seq_lens", {DType::i32}, {S}, false, binds},
               {"block_table", {DType::i32}, {S, -1}, false, binds},
               {"alibi_slopes", {DType::f32}, {H}, false, binds},
               {"sinks", {DType::f32}, {H}, false, binds},
               {"qq_bias", {DType::f32}, {-1, -1}, false, binds},
               {"workspace", {DType::f32}, {-1}, plan.split(), binds && plan.split()}};
    return c;
  }

  struct Call {
    const PagedAttentionPlan* plan;
    const PagedKvCache* cache;
    PagedAttentionArgs args;
    bool null_cmd = false;
  };

  // Breaks the run in one random way.
  Expect break_run(Rng& r, RunCase& c, Call& call, std::optional<PagedAttentionPlan>& foreign_plan) {
    auto& a = call.args;
    auto& p = a.params;
    const auto& plan = *c.plan;
    for (;;) {
      const uint32_t what = r.below(24);
      if (what < 12) {   // one of the views
        const ViewRule& rule = c.rules[r.below(static_cast<uint32_t>(c.rules.size()))];
        TensorView* v = view_named(a, rule.name);
        if (!v) continue;
        if (auto e = break_view(r, "paged_attention", rule, *v, foreign_->ref())) return *e;
        continue;
      }
      switch (what) {
        case 12: {   // an output over another view, or a view over an output
          std::vector<std::string> present;
          for (const auto& rule : c.rules)
            if (TensorView* v = view_named(a, rule.name); v && v->numel() > 0 && (rule.name != "workspace" || plan.split()))
              present.push_back(rule.name);
          const std::string x = present[r.below(static_cast<uint32_t>(present.size()))];
          const std::string y = present[r.below(static_cast<uint32_t>(present.size()))];
          auto is_output = [&](const std::string& n) { return n == "out" || n == "lse" || n == "workspace"; };
          if (x == y || (!is_output(x) && !is_output(y))) continue;
          return overlap(*view_named(a, x), x, *view_named(a, y), y);
        }
        case 13:
          p.scale = pick(r, {0.0f, -0.0f, -1.0f, kNaN, kInf, -kInf});
          return {"scale", {"paged_attention: scale = "}};
        case 14:
          p.softcap = pick(r, {-1.0f, -1e-30f, kNaN, kInf, -kInf});
          return {"softcap", {"paged_attention: softcap = "}};
        case 15:
          p.out_scale = pick(r, {0.0f, -0.0f, -2.0f, kNaN, kInf, -kInf, 1e-40f, 2e-39f});   // tiny: 1 / out_scale is inf
          return {"out_scale", {"paged_attention: out_scale = "}};
        case 16:
          p.sliding_window = pick<int32_t>(r, {-1, -64, std::numeric_limits<int32_t>::min()});
          return {"sliding_window", {"paged_attention: sliding_window = -"}};
        case 17:
          if (!p.qq_bias || plan.max_query_len() == 0) continue;
          p.qq_bias->shape[0] = r.below(plan.max_query_len());
          p.qq_bias->strides.clear();
          return {"qq_bias rows", {"qq_bias has", "rows"}};
        case 18:
          if (plan.num_seqs() == 0) continue;
          a.batch.block_table.shape[1] = 0;
          a.batch.block_table.strides.clear();
          return {"block_table columns", {"block_table has 0 columns"}};
        case 19:
          if (!plan.split() || plan.workspace_bytes() == 0) continue;   // (a plan of no tokens needs none)
          if (r.below(2) || plan.workspace_bytes() < 4) {
            a.workspace.reset();
            return {"workspace missing", {"pass a workspace"}};
          }
          a.workspace->shape[0] = r.below(static_cast<uint32_t>(plan.workspace_bytes() / 4));
          a.workspace->strides.clear();
          return {"workspace small", {"the workspace holds"}};
        case 20:
          foreign_plan.emplace(PagedAttentionPlan(*other_, configs_[c.cache_index], plan.num_q_heads(),
                                                  a.q.dtype, PagedAttentionLimits{plan.num_seqs(), plan.num_tokens(), 0, 0}));
          call.plan = &*foreign_plan;
          return {"foreign plan", {"the plan was made for another Context"}};
        case 21:
          call.cache = foreign_caches_[c.cache_index].get();
          return {"foreign cache", {"the cache belongs to another Context"}};
        case 22: {
          if (r.below(2)) {   // an output over the memory of the cache it reads
            if (!c.app_cache || a.out.numel() == 0) continue;
            const uint32_t k = r.below(3);
            if (k == 1 && a.lse) return onto_cache(r, *a.lse, "lse", c.cache_index);
            if (k == 2 && plan.split()) return onto_cache(r, *a.workspace, "workspace", c.cache_index);
            return onto_cache(r, a.out, "out", c.cache_index);
          }
          const auto& mine = configs_[c.cache_index];
          for (std::size_t i = 0; i < caches_.size(); ++i) {
            const auto& o = configs_[i];
            if (o.block_size != mine.block_size || o.num_kv_heads != mine.num_kv_heads || o.head_size != mine.head_size ||
                o.dtype != mine.dtype || o.layout != mine.layout) {
              call.cache = caches_[i].get();
              return {"other geometry", {"the cache differs from the one the plan was made for"}};
            }
          }
          continue;
        }
        default:
          call.null_cmd = true;
          return {"null command buffer", {kNoCommandBuffer}};
      }
    }
  }
};

TEST_F(HostilePagedAttention, RunArguments) {
  Outcomes out("paged_attention");
  run_cases(2'000'000, 8000, [&](uint64_t seed, VkCommandBuffer cmd) {
    Rng r = case_rng(seed);
    RunCase c;
    try {
      c = random_run(r);
    } catch (const std::exception& e) {
      out.fail(seed, "valid run", std::string("making the unbroken run threw: ") + e.what());
      return;
    }
    const PagedKvCache& cache = c.app_cache ? *app_caches_[c.cache_index] : *caches_[c.cache_index];
    // The unbroken run passes every check: without a command buffer, it fails on that alone.
    out.expect_error(seed, {"valid run", {kNoCommandBuffer}}, [&] { paged_attention(ctx(), *c.plan, cache, c.args, VK_NULL_HANDLE); });
    Call call{&*c.plan, &cache, c.args};
    std::optional<PagedAttentionPlan> foreign_plan;
    const Expect e = break_run(r, c, call, foreign_plan);
    out.expect_error(seed, e, [&] { paged_attention(ctx(), *call.plan, *call.cache, call.args, call.null_cmd ? VK_NULL_HANDLE : cmd); });
  });
  out.report();
}

// ---- prepare: pipelines for a plan, a model's layers, a cache ----

TEST_F(HostileInputs, Prepare) {
  Outcomes out("prepare");
  run_cases(6'000'000, 2000, [&](uint64_t seed, VkCommandBuffer) {
    Rng r = case_rng(seed);
    PlanRequest p = random_plan_request(r, r.below(2) ? configs_[r.below(4)] : random_cache_config(r));
    const std::vector<DType> outs = {DType::f16, DType::bf16, DType::f32, DType::fp8_e4m3, DType::fp8_e5m2};
    std::vector<PagedAttentionVariant> variants(1 + r.below(3));
    for (auto& v : variants) {
      v.alibi = r.below(2), v.sinks = r.below(2), v.qq_bias = r.below(2), v.softcap = r.below(2);
      v.sliding_window = r.below(2), v.lse = r.below(2);
      v.out_dtype = outs[r.below(5)];
    }
    auto bad_variant = [&] { variants[r.below(static_cast<uint32_t>(variants.size()))].out_dtype = bad_dtype(r, outs); };
    switch (r.below(5)) {
      case 0: {
        const Expect e = break_shapes(r, p.cfg, p.num_q_heads, p.q_dtype);
        out.expect_error(seed, e, [&] { prepare_paged_attention(ctx(), p.cfg, p.num_q_heads, p.q_dtype, variants); });
        break;
      }
      case 1:
        bad_variant();
        out.expect_error(seed, {"model variant out dtype", {"paged_attention: out dtype"}},
                         [&] { prepare_paged_attention(ctx(), p.cfg, p.num_q_heads, p.q_dtype, variants); });
        break;
      case 2: {
        const PagedAttentionPlan plan = p.make(ctx());
        if (r.below(2)) {
          bad_variant();
          out.expect_error(seed, {"plan variant out dtype", {"paged_attention: out dtype"}}, [&] { plan.prepare(ctx(), variants); });
        } else {
          out.expect_error(seed, {"plan of another Context", {"the plan was made for another Context"}},
                           [&] { plan.prepare(*other_, variants); });
        }
        break;
      }
      case 3: {
        uint32_t heads = p.num_q_heads;
        DType q = DType::f16;
        Expect e = break_shapes(r, p.cfg, heads, q);
        if (e.kind.rfind("cache ", 0) != 0) {   // write_kv_cache has no q: only the cache's geometry applies
          p.cfg.block_size = 0;
          e = {"cache block_size", {"the cache's block_size = 0"}};
        }
        e.kind = "write_kv_cache " + e.kind;
        e.fragments.insert(e.fragments.begin(), "prepare_write_kv_cache");
        out.expect_error(seed, e, [&] { prepare_write_kv_cache(ctx(), p.cfg, DType::f16, DType::i32); });
        break;
      }
      default:
        if (r.below(2))
          out.expect_error(seed, {"write_kv_cache input dtype", {"write_kv_cache: input dtype"}}, [&] {
            prepare_write_kv_cache(ctx(), p.cfg, bad_dtype(r, {DType::f16, DType::bf16, DType::f32}), DType::i32);
          });
        else
          out.expect_error(seed, {"write_kv_cache slot dtype", {"write_kv_cache: slot dtype"}}, [&] {
            prepare_write_kv_cache(ctx(), p.cfg, DType::f16, bad_dtype(r, {DType::i32, DType::i64}));
          });
        break;
    }
  });
  out.report();
}

}  // namespace
}  // namespace vkattn::test
