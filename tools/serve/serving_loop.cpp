#include "serve/serving_loop.hpp"

#include <vkattn_ref/attention_ref.hpp>
#include <vkattn_ref/kv_cache_ref.hpp>
#include <vkattn_ref/number_formats.hpp>
#include <vkattn_ref/random.hpp>
#include <vkattn_ref/tensor_data.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <optional>
#include <sstream>

#include "context_impl.hpp"
#include "gpu_timer.hpp"
#include "runners/paged_attention_runner.hpp"
#include "vk_functions.hpp"

namespace vkattn::tool {

namespace {

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

uint32_t cdiv(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

void check(VkResult r, const char* what) {
  if (r != VK_SUCCESS) throw Error(std::string("serving loop: ") + what + " failed (VkResult " + std::to_string(r) + ")", r);
}

struct Sequence {
  std::vector<uint32_t> blocks;
  int32_t len = 0;
};

// What the metadata buffer holds, at fixed word offsets for both kinds of
// step (a decode step uses a prefix of each array).
struct MetaLayout {
  uint32_t qsl = 0, lens = 0, table = 0, slots = 0, words = 0;
};

}  // namespace

struct ServingLoop::State {
  Context& ctx;
  ServeConfig cfg;
  detail::VkFunctions vk;   // the loop's own entry points
  VkQueue queue = VK_NULL_HANDLE;
  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandBuffer normal_cmd = VK_NULL_HANDLE;
  VkCommandBuffer replay_cmd[2] = {VK_NULL_HANDLE, VK_NULL_HANDLE};   // decode, mixed
  VkFence fence = VK_NULL_HANDLE;
  VkQueryPool timestamps = VK_NULL_HANDLE;
  bool pending = false;

  KvCacheConfig cache_cfg;
  std::vector<std::unique_ptr<PagedKvCache>> caches;
  BlockAllocator allocator{1};
  uint32_t max_blocks = 0;   // per sequence (block-table columns)
  uint32_t max_seqs = 0, max_tokens = 0;
  MetaLayout layout;
  Buffer meta, q, k, v, out, workspace;
  uint64_t workspace_bytes = 0;

  std::deque<Sequence> decoders;
  std::optional<Sequence> prefiller;
  uint64_t step_index = 0;

  // The last step, for verify() and layer_us().
  bool last_mixed = false;
  std::vector<int32_t> qsl, lens, table;
  std::vector<int64_t> slots;
  std::vector<uint16_t> q_host, k_host, v_host;   // rows of the last step, as written
  std::optional<PagedAttentionPlan> plan;         // normal mode: the last step's (held in place: no allocation)
  std::unique_ptr<PagedAttentionPlan> replay_plan[2];

  ref::Rng rng;

  State(Context& c, const ServeConfig& conf) : ctx(c), cfg(conf), rng(conf.seed) {}

  uint32_t seqs(bool mixed) const { return cfg.batch + (mixed ? 1 : 0); }
  uint32_t tokens(bool mixed) const { return cfg.batch + (mixed ? cfg.prefill_chunk : 0); }
  bool mixed_step(uint64_t i) const {
    return cfg.prefill_chunk > 0 && cfg.mixed_every > 0 && i % cfg.mixed_every == cfg.mixed_every - 1;
  }

  // Room for `tokens` more tokens at the end of `s`: new blocks as needed.
  void grow(Sequence& s, uint32_t tokens) {
    const uint32_t need = cdiv(uint64_t(s.len) + tokens, cfg.block_size);
    if (need > max_blocks) throw Error("serving loop: a sequence outgrew its block table (more steps than config.steps)");
    if (need > s.blocks.size()) {
      auto more = allocator.allocate(need - static_cast<uint32_t>(s.blocks.size()));
      s.blocks.insert(s.blocks.end(), more.begin(), more.end());
    }
  }

  int64_t slot_of(const Sequence& s, int32_t pos) const {
    return int64_t(s.blocks[pos / cfg.block_size]) * cfg.block_size + pos % cfg.block_size;
  }

  // The batch's views for a kind of step.
  PagedAttentionArgs args(bool mixed, uint32_t layer) const {
    const int64_t S = seqs(mixed), T = tokens(mixed), H = cfg.num_q_heads, D = cfg.head_size;
    PagedAttentionArgs a;
    a.q = TensorView::contiguous(q, DType::f16, {T, H, D});
    a.out = TensorView::contiguous(out, DType::f16, {T, H, D}, uint64_t(layer) * max_tokens * H * D * 2);
    a.batch.query_start_loc = TensorView::contiguous(meta, DType::i32, {S + 1}, layout.qsl * 4);
    a.batch.seq_lens = TensorView::contiguous(meta, DType::i32, {S}, layout.lens * 4);
    a.batch.block_table = TensorView::contiguous(meta, DType::i32, {S, max_blocks}, layout.table * 4);
    a.params.scale = static_cast<float>(1.0 / std::sqrt(double(D)));
    if (workspace.size()) a.workspace = TensorView::contiguous(workspace, DType::f32, {int64_t(workspace.size() / 4)});
    return a;
  }

  // The views of every layer for both kinds of step, made once, as an engine keeps its tensors.
  struct LayerViews {
    TensorView k, v, slots;
    PagedAttentionArgs attention;
  };
  std::vector<LayerViews> views[2];

  void make_views() {
    for (bool mixed : {false, true}) {
      const int64_t T = tokens(mixed), Hkv = cfg.num_kv_heads, D = cfg.head_size;
      for (uint32_t l = 0; l < cfg.layers; ++l)
        views[mixed].push_back({TensorView::contiguous(k, DType::f16, {T, Hkv, D}), TensorView::contiguous(v, DType::f16, {T, Hkv, D}),
                                TensorView::contiguous(meta, DType::i64, {T}, layout.slots * 4), args(mixed, l)});
    }
  }

  void record_layer(VkCommandBuffer cmd, const PagedAttentionPlan& p, bool mixed, uint32_t layer) {
    PagedKvCache& cache = *caches[layer % caches.size()];
    const LayerViews& lv = views[mixed][layer];
    write_kv_cache(ctx, cache, lv.k, lv.v, lv.slots, cmd);
    barrier(cmd);   // the new tokens are in the cache before attention reads them
    paged_attention(ctx, p, cache, lv.attention, cmd);
    barrier(cmd);   // as the next layer would read this one's output
  }

  void barrier(VkCommandBuffer cmd) const {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
                            nullptr, 0, nullptr);
  }

  // One whole step into `cmd`: every layer, between two timestamps.
  void record_step(VkCommandBuffer cmd, const PagedAttentionPlan& p, bool mixed) {
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    check(vk.vkBeginCommandBuffer(cmd, &bi), "vkBeginCommandBuffer");
    // The host wrote this step's metadata and inputs before submitting.
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_HOST_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT;
    vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_HOST_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    if (timestamps) {
      vk.vkCmdResetQueryPool(cmd, timestamps, 0, 2);
      vk.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, timestamps, 0);
    }
    for (uint32_t l = 0; l < cfg.layers; ++l) record_layer(cmd, p, mixed, l);
    if (timestamps) vk.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, timestamps, 1);
    check(vk.vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
  }

  // Advances the sequences by one step and writes the batch's metadata.
  void schedule(bool mixed) {
    const uint32_t S = seqs(mixed);
    qsl.assign(1, 0);
    lens.clear();
    slots.clear();
    for (Sequence& s : decoders) {
      grow(s, 1);
      slots.push_back(slot_of(s, s.len));
      s.len += 1;
      qsl.push_back(qsl.back() + 1);
      lens.push_back(s.len);
    }
    if (mixed) {
      if (!prefiller) prefiller = Sequence{};
      Sequence& p = *prefiller;
      const uint32_t n = cfg.prefill_chunk;
      grow(p, n);
      for (uint32_t i = 0; i < n; ++i) slots.push_back(slot_of(p, p.len + int32_t(i)));
      p.len += int32_t(n);
      qsl.push_back(qsl.back() + int32_t(n));
      lens.push_back(p.len);
    }
    table.assign(uint64_t(S) * max_blocks, 0);
    for (uint32_t i = 0; i < S; ++i) {
      const Sequence& s = i < decoders.size() ? decoders[i] : *prefiller;
      std::copy(s.blocks.begin(), s.blocks.end(), table.begin() + uint64_t(i) * max_blocks);
    }
    auto* w = static_cast<int32_t*>(meta.mapped());
    std::memcpy(w + layout.qsl, qsl.data(), qsl.size() * 4);
    std::memcpy(w + layout.lens, lens.data(), lens.size() * 4);
    std::memcpy(w + layout.table, table.data(), table.size() * 4);
    std::memcpy(w + layout.slots, slots.data(), slots.size() * 8);
  }

  // After the step ran: a prefiller whose prompt is in replaces the oldest
  // decoder, whose blocks are freed.
  void retire() {
    if (!prefiller || prefiller->len < int32_t(cfg.context)) return;
    allocator.free(decoders.front().blocks);
    decoders.pop_front();
    decoders.push_back(std::move(*prefiller));
    prefiller.reset();
  }

  void random_inputs(bool mixed) {
    const uint64_t T = tokens(mixed);
    auto fill = [&](Buffer& b, std::vector<uint16_t>& host, uint64_t elems, double amplitude) {
      auto vals = ref::round_to(ref::ElemType::f16, ref::random_values(rng, elems, amplitude));
      std::vector<uint8_t> bytes = ref::encode_values(ref::ElemType::f16, vals);
      host.resize(elems);
      std::memcpy(host.data(), bytes.data(), bytes.size());
      std::memcpy(b.mapped(), bytes.data(), bytes.size());
    };
    fill(q, q_host, T * cfg.num_q_heads * cfg.head_size, 2.0);
    fill(k, k_host, T * cfg.num_kv_heads * cfg.head_size, 2.0);
    fill(v, v_host, T * cfg.num_kv_heads * cfg.head_size, 1.0);
  }

  void submit(VkCommandBuffer cmd) {
    check(vk.vkResetFences(ctx.device(), 1, &fence), "vkResetFences");
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd;
    check(vk.vkQueueSubmit(queue, 1, &si, fence), "vkQueueSubmit");
    pending = true;
  }

  double wait() {
    if (!pending) return 0;
    check(vk.vkWaitForFences(ctx.device(), 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    pending = false;
    ctx.check_device_status();
    if (!timestamps) return 0;
    uint64_t t[2];
    check(vk.vkGetQueryPoolResults(ctx.device(), timestamps, 0, 2, sizeof t, t, 8, VK_QUERY_RESULT_64_BIT),
          "vkGetQueryPoolResults");
    return double(t[1] - t[0]) * ctx.capabilities().timestamp_period_ns * 1e-3;
  }
};

ServingLoop::ServingLoop(Context& ctx, const ServeConfig& config, PFN_vkGetInstanceProcAddr own_gipa)
    : s_(std::make_unique<State>(ctx, config)) {
  State& s = *s_;
  const ServeConfig& c = s.cfg;
  if (c.layers == 0 || c.batch == 0 || c.context == 0)
    throw Error("serving loop: layers, batch and context must be positive");
  if (!ctx.queue()) throw Error("serving loop: the Context has no queue to submit to");
  s.vk.load_global(own_gipa);
  s.vk.load_instance(ctx.instance());
  s.vk.load_device(ctx.device());
  s.queue = ctx.queue();
  const VkDevice dev = ctx.device();

  // Caches: every sequence's room, prefiller included, plus blocks for the
  // sequences that replace retired ones while the old ones' are in use.
  const uint32_t cap = c.context + c.steps * std::max(1u, c.prefill_chunk) + 1;
  s.max_blocks = cdiv(cap, c.block_size);
  const uint32_t num_blocks = (c.batch + 2) * s.max_blocks;
  s.cache_cfg = KvCacheConfig{.num_blocks = num_blocks, .block_size = c.block_size, .num_kv_heads = c.num_kv_heads,
                              .head_size = c.head_size, .dtype = c.cache_dtype, .layout = KvLayout::nhd,
                              .k_scale = 0.05f, .v_scale = 0.05f};
  const uint64_t cache_bytes = 2ull * num_blocks * c.block_size * c.num_kv_heads * c.head_size * dtype_size(c.cache_dtype);
  const uint64_t budget = c.cache_budget_bytes ? c.cache_budget_bytes : ctx.capabilities().device_local_bytes * 7 / 10;
  const uint32_t n_caches = static_cast<uint32_t>(std::clamp<uint64_t>(budget / std::max<uint64_t>(cache_bytes, 1), 1, c.layers));
  for (uint32_t i = 0; i < n_caches; ++i) {
    s.caches.push_back(std::make_unique<PagedKvCache>(ctx, s.cache_cfg));
    if (!c.fill_caches) continue;
    if (c.random_values) {
      // Random blocks (finite f16), the same for every cache.
      const uint64_t elems = uint64_t(num_blocks) * c.block_size * c.num_kv_heads * c.head_size;
      ref::Rng r(c.seed + 17);
      for (KvPart part : {KvPart::key, KvPart::value})
        s.caches.back()->write_blocks(part, 0, ref::encode_values(ref::ElemType::f16, ref::random_values(r, elems, 1.5)));
    } else {
      s.caches.back()->fill(0x2E663266u);   // f16 ~0.2 and ~0.1
    }
  }
  s.allocator = BlockAllocator(num_blocks);

  // Sequences: `batch` decoders with `context` tokens already in the cache.
  for (uint32_t i = 0; i < c.batch; ++i) {
    Sequence q;
    s.grow(q, c.context);
    q.len = int32_t(c.context);
    s.decoders.push_back(std::move(q));
  }

  s.max_seqs = c.batch + 1;
  s.max_tokens = c.batch + c.prefill_chunk;
  MetaLayout& m = s.layout;
  m.qsl = 0;
  m.lens = s.max_seqs + 2;
  m.table = m.lens + s.max_seqs + 1;
  m.slots = (m.table + s.max_seqs * s.max_blocks + 2) & ~1u;   // i64 slots on 8 bytes
  m.words = m.slots + 2 * s.max_tokens;
  s.meta = Buffer(ctx, m.words * 4ull, MemoryKind::device_local_mapped);
  const uint64_t T = s.max_tokens;
  s.q = Buffer(ctx, T * c.num_q_heads * c.head_size * 2, MemoryKind::device_local_mapped);
  s.k = Buffer(ctx, T * c.num_kv_heads * c.head_size * 2, MemoryKind::device_local_mapped);
  s.v = Buffer(ctx, T * c.num_kv_heads * c.head_size * 2, MemoryKind::device_local_mapped);
  std::memset(s.q.mapped(), 0x2E, s.q.size());
  std::memset(s.k.mapped(), 0x2E, s.k.size());
  std::memset(s.v.mapped(), 0x2E, s.v.size());
  s.out = Buffer(ctx, uint64_t(c.layers) * T * c.num_q_heads * c.head_size * 2);
  s.workspace = Buffer(ctx, kDefaultPagedAttentionWorkspaceBytes);
  s.workspace.fill(0u, 0, kPagedAttentionWorkspaceCounterBytes);   // its split runs' arrival counters start at 0
  s.make_views();

  // Warm-up: every pipeline any step may use, before the first step.
  const PagedAttentionVariant plain{};
  prepare_paged_attention(ctx, s.cache_cfg, c.num_q_heads, DType::f16, {&plain, 1});
  prepare_write_kv_cache(ctx, s.cache_cfg, DType::f16, DType::i64);

  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = ctx.queue_family();
  check(s.vk.vkCreateCommandPool(dev, &pci, nullptr, &s.pool), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = s.pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  check(s.vk.vkAllocateCommandBuffers(dev, &ai, &s.normal_cmd), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  check(s.vk.vkCreateFence(dev, &fci, nullptr, &s.fence), "vkCreateFence");
  if (c.gpu_timing && ctx.capabilities().timestamp_period_ns > 0) {
    VkQueryPoolCreateInfo qci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qci.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qci.queryCount = 2;
    check(s.vk.vkCreateQueryPool(dev, &qci, nullptr, &s.timestamps), "vkCreateQueryPool");
  }

  if (c.replay) {
    // Plans for limits, and one command buffer per kind of step, recorded once.
    for (bool mixed : {false, true}) {
      if (mixed && c.prefill_chunk == 0) continue;
      PagedAttentionPlanOptions o;
      o.workspace_bytes = s.workspace.size();
      const PagedAttentionLimits lim{s.seqs(mixed), s.tokens(mixed), mixed ? c.prefill_chunk : 1u, cap};
      s.replay_plan[mixed] = std::make_unique<PagedAttentionPlan>(ctx, s.cache_cfg, c.num_q_heads, DType::f16, lim, o);
      check(s.vk.vkAllocateCommandBuffers(dev, &ai, &s.replay_cmd[mixed]), "vkAllocateCommandBuffers");
      s.record_step(s.replay_cmd[mixed], *s.replay_plan[mixed], mixed);
    }
  }
}

ServingLoop::~ServingLoop() {
  State& s = *s_;
  const VkDevice dev = s.ctx.device();
  if (s.pending) s.vk.vkWaitForFences(dev, 1, &s.fence, VK_TRUE, UINT64_MAX);
  if (s.timestamps) s.vk.vkDestroyQueryPool(dev, s.timestamps, nullptr);
  if (s.fence) s.vk.vkDestroyFence(dev, s.fence, nullptr);
  if (s.pool) s.vk.vkDestroyCommandPool(dev, s.pool, nullptr);
}

StepTimes ServingLoop::step() {
  State& s = *s_;
  s.wait();
  s.retire();
  const bool mixed = s.mixed_step(s.step_index++);
  if (s.cfg.random_values) s.random_inputs(mixed);
  StepTimes t;
  t.mixed = mixed;
  t.tokens = s.tokens(mixed);
  const auto start = Clock::now();
  s.schedule(mixed);
  s.last_mixed = mixed;
  VkCommandBuffer cmd = s.replay_cmd[mixed];
  if (!s.cfg.replay) {
    const auto p0 = Clock::now();
    PagedAttentionPlanOptions o;
    o.workspace_bytes = s.workspace.size();
    s.plan.emplace(s.ctx, s.cache_cfg, s.cfg.num_q_heads, DType::f16, PagedAttentionLengths{s.qsl, s.lens}, o);
    t.plan_us = us_since(p0);
    const auto r0 = Clock::now();
    check(s.vk.vkResetCommandBuffer(s.normal_cmd, 0), "vkResetCommandBuffer");
    s.record_step(s.normal_cmd, *s.plan, mixed);
    t.record_us = us_since(r0);
    cmd = s.normal_cmd;
  }
  if (s.cfg.submit) s.submit(cmd);
  t.host_us = us_since(start);
  if (!s.cfg.submit && !s.cfg.replay) check(s.vk.vkResetCommandBuffer(cmd, 0), "vkResetCommandBuffer");
  return t;
}

double ServingLoop::finish() { return s_->wait(); }

uint32_t ServingLoop::num_caches() const { return static_cast<uint32_t>(s_->caches.size()); }

uint64_t ServingLoop::kv_bytes_per_layer() const {
  uint64_t keys = 0;
  for (int32_t l : s_->lens) keys += uint64_t(l);
  return keys * s_->cfg.num_kv_heads * s_->cfg.head_size * 2 * dtype_size(s_->cfg.cache_dtype);
}

double ServingLoop::layer_us(uint32_t repetitions) {
  State& s = *s_;
  s.wait();
  const PagedAttentionPlan& p = s.cfg.replay ? *s.replay_plan[s.last_mixed] : *s.plan;
  const bool mixed = s.last_mixed;
  return median_time_us(
      s.ctx,
      [&, rep = 0u](VkCommandBuffer cmd) mutable {
        // Only the cache differs between layers; take them in turn.
        const uint32_t layer = rep++ % static_cast<uint32_t>(s.caches.size());
        PagedKvCache& cache = *s.caches[layer];
        const auto& lv = s.views[mixed][layer];
        write_kv_cache(s.ctx, cache, lv.k, lv.v, lv.slots, cmd);
        VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
        mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
        mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT;
        s.ctx.impl().vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                            0, 1, &mb, 0, nullptr, 0, nullptr);
        paged_attention(s.ctx, p, cache, lv.attention, cmd);
      },
      repetitions, 1e12);
}

RunResult ServingLoop::verify(uint32_t layer) {
  State& s = *s_;
  s.wait();
  const ServeConfig& c = s.cfg;
  if (!c.random_values) throw Error("serving loop: verify() needs random_values");
  if (layer >= c.layers) throw Error("serving loop: no layer " + std::to_string(layer));
  const bool mixed = s.last_mixed;
  const uint32_t T = s.tokens(mixed), Hq = c.num_q_heads, Hkv = c.num_kv_heads, D = c.head_size;
  PagedKvCache& cache = *s.caches[layer % s.caches.size()];
  RunResult r;
  r.pass = true;
  auto fail = [&](const std::string& what) {
    if (r.pass) r.failure = what;
    r.pass = false;
  };

  // The cache as the kernels saw it (what write_kv_cache made of it).
  const ref::KvGeometry g{s.cache_cfg.num_blocks, c.block_size, Hkv, D, ref::ElemType::f16, ref::KvLayoutRef::nhd};
  std::vector<uint8_t> kc = cache.read_blocks(KvPart::key, 0, s.cache_cfg.num_blocks);
  std::vector<uint8_t> vc = cache.read_blocks(KvPart::value, 0, s.cache_cfg.num_blocks);
  // This step's new tokens landed in their slots, bit for bit (f16 inputs, f16 cache).
  for (uint32_t t = 0; t < T && r.pass; ++t)
    for (uint32_t h = 0; h < Hkv; ++h)
      for (uint32_t d = 0; d < D; ++d) {
        const uint64_t slot = uint64_t(s.slots[t]);
        const uint64_t e = ref::kv_element_index(g, false, uint32_t(slot / c.block_size), uint32_t(slot % c.block_size), h, d);
        uint16_t kb, vb;
        std::memcpy(&kb, &kc[e * 2], 2);
        std::memcpy(&vb, &vc[e * 2], 2);
        const uint64_t i = (uint64_t(t) * Hkv + h) * D + d;
        if (kb != s.k_host[i] || vb != s.v_host[i]) {
          fail("token " + std::to_string(t) + " head " + std::to_string(h) + " dim " + std::to_string(d) +
               " of the step's new K/V is not in slot " + std::to_string(slot));
          break;
        }
      }

  ref::PagedAttentionProblem p;
  std::vector<uint8_t> qb(s.q_host.size() * 2);
  std::memcpy(qb.data(), s.q_host.data(), qb.size());
  p.q = ref::decode_values(ref::ElemType::f16, qb);
  p.num_tokens = T;
  p.num_q_heads = Hq;
  p.num_kv_heads = Hkv;
  p.head_size = D;
  p.query_start_loc = s.qsl;
  p.seq_lens = s.lens;
  p.block_table = s.table;
  p.max_blocks_per_seq = s.max_blocks;
  p.cache = g;
  p.k_cache = std::move(kc);
  p.v_cache = std::move(vc);
  p.scale = 1.0 / std::sqrt(double(D));
  const ref::PagedAttentionResult want = ref::paged_attention(p);

  auto raw = s.out.download_as<uint8_t>(uint64_t(T) * Hq * D * 2, uint64_t(layer) * s.max_tokens * Hq * D * 2);
  const std::vector<double> got = ref::decode_values(ref::ElemType::f16, raw);
  PagedAttentionCase pc;   // the tolerance of an f16 cache, f16 q and out
  const PagedAttentionTolerance tol = paged_attention_tolerance(pc);
  for (uint64_t row = 0; row < uint64_t(T) * Hq && r.pass; ++row) {
    double maxabs = 0;
    for (uint32_t d = 0; d < D; ++d) maxabs = std::max(maxabs, std::fabs(want.out[row * D + d]));
    for (uint32_t d = 0; d < D; ++d) {
      const double w = want.out[row * D + d], x = got[row * D + d], err = std::fabs(x - w);
      r.max_abs_err = std::max(r.max_abs_err, std::isfinite(err) ? err : 0.0);
      if (maxabs > 0) r.max_rel_err = std::max(r.max_rel_err, std::isfinite(err) ? err / maxabs : 0.0);
      if (!(err <= tol.row_atol * maxabs + tol.rtol * std::fabs(w) + tol.floor)) {
        std::ostringstream o;
        o << "layer " << layer << ", token " << row / Hq << ", head " << row % Hq << ", dim " << d << ": out = " << x
          << ", reference " << w;
        fail(o.str());
        break;
      }
    }
  }
  std::ostringstream tt;
  tt << "new K/V bit-exact in their slots; |out - ref| <= " << tol.row_atol << " * max|ref row| + " << tol.rtol << " * |ref|";
  r.tolerance = tt.str();
  return r;
}

}  // namespace vkattn::tool
