// Recording an op into the caller's command buffer allocates nothing on the
// host once the op's pipelines exist (ops.hpp): an engine records thousands
// of steps a minute. Nor does a plan, made per step in the planned form, nor
// the views an engine builds for a step (paged_attention.hpp, tensor.hpp). The ops are the
// benchmark suites' cases (--quick sizes), each recorded once to warm it up
// and then twice more, counting the calls to operator new the recording
// thread makes meanwhile. This binary replaces the global operator new to
// count them, so it is a program of its own; the validation layers are off
// here, since they allocate on the recording thread themselves.
// (The Vulkan-level counts, memory, buffers, pools, submissions and waits,
// are ServingLoopCalls', in vkattn_tests.)
#include <gtest/gtest.h>
#include <vkattn/vkattn.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "bench/suites.hpp"
#include "context_impl.hpp"
#include "device_batch.hpp"
#include "own_commands.hpp"

namespace {

thread_local bool counting = false;
std::atomic<long> counted{0};

void* counted_alloc(std::size_t n, std::size_t align) {
  if (counting) counted.fetch_add(1, std::memory_order_relaxed);
  if (n == 0) n = 1;
  return align <= alignof(std::max_align_t) ? std::malloc(n) : std::aligned_alloc(align, (n + align - 1) / align * align);
}

}  // namespace

void* operator new(std::size_t n) {
  if (void* p = counted_alloc(n, 0)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  if (void* p = counted_alloc(n, static_cast<std::size_t>(a))) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n, 0); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace vkattn::test {
namespace {

// Records `op` into the test's own command buffer (as into an engine's) once
// (its pipelines, its first descriptor pool), then twice more counting;
// returns the count. Nothing is submitted: recording is what an engine does
// every step. The sets recorded are released afterwards.
long allocations_of(Context& ctx, const OwnCommands& commands, const tool::BenchOp& op) {
  const auto& vk = ctx.impl().vk;
  const VkCommandBuffer cmd = commands.cmd();
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  vk.vkBeginCommandBuffer(cmd, &bi);
  op.record(cmd, 0);
  counted = 0;
  counting = true;
  op.record(cmd, 1);
  op.record(cmd, 2);
  counting = false;
  vk.vkEndCommandBuffer(cmd);
  vk.vkResetCommandBuffer(cmd, 0);
  ctx.release_recorded_descriptor_sets();
  return counted.load();
}

// A Context without the validation layers (they allocate on the recording
// thread themselves), binding through push descriptors or sets from its pools.
ContextOptions counting_options(bool push_descriptors = true) {
  ContextOptions o;
  o.validation = false;
  o.disable_push_descriptors = !push_descriptors;
  return o;
}

// Whether the Context binds through push descriptors (the param) or sets from its pools.
class RecordAllocations : public ::testing::TestWithParam<bool> {};

TEST_P(RecordAllocations, RecordingAPreparedOpAllocatesNothing) {
  Context ctx(counting_options(GetParam()));
  OwnCommands commands(ctx);
  const tool::DecodeOptions d;
  const std::vector<std::pair<const char*, std::vector<tool::BenchOp>>> suites = {
      {"write-kv-cache", tool::write_kv_cache_cases(ctx, true)},
      {"decode", tool::decode_cases(ctx, true, d)},
      {"prefill", tool::prefill_cases(ctx, true, d)},
      {"sparse", tool::sparse_cases(ctx, true)}};
  int ops = 0;
  for (const auto& [suite, cases] : suites) {
    EXPECT_FALSE(cases.empty()) << suite;
    for (const auto& op : cases) {
      ++ops;
      EXPECT_EQ(allocations_of(ctx, commands, op), 0) << "bench " << suite << ", " << op.info.name
                                                << ": heap allocations while recording it twice";
    }
  }
  // The counter counts: a recording that allocates is seen.
  tool::BenchOp allocating;
  allocating.record = [](VkCommandBuffer, uint32_t) { delete new std::string(64, 'x'); };
  EXPECT_EQ(allocations_of(ctx, commands, allocating), 4);   // the string and its characters, twice
  EXPECT_GT(ops, 10);
}

// prefix_prefill with its fused cache write (slot_mapping), which no bench
// case records: the attention's recording and write_kv_cache's, with the
// views built inside the recording.
TEST_P(RecordAllocations, RecordingPrefixPrefillWithItsCacheWriteAllocatesNothing) {
  Context ctx(counting_options(GetParam()));
  OwnCommands commands(ctx);
  const KvCacheConfig cfg{.num_blocks = 8, .block_size = 16, .num_kv_heads = 2, .head_size = 64};
  PagedKvCache cache(ctx, cfg);
  // Two sequences: 20 cached tokens and 10 new (blocks 0, 1), and 5 new (block 2).
  DeviceBatch batch(ctx, {0, 10, 15}, {30, 5}, {0, 1, 2, 3}, 2);
  const PrefixPrefillPlan plan(ctx, cfg, 4, DType::f16, batch.lengths());
  const int64_t T = 15;
  Buffer q(ctx, T * 4 * 64 * 2), out(ctx, T * 4 * 64 * 2), kv(ctx, 2 * T * 2 * 64 * 2), slots(ctx, T * 4);
  Buffer workspace(ctx, std::max<uint64_t>(plan.workspace_bytes(), 16));
  // The views are made anew for every recording, as an engine whose token
  // count changes every step makes them: they allocate nothing either.
  tool::BenchOp op;
  op.record = [&](VkCommandBuffer cmd, uint32_t) {
    PrefixPrefillArgs a;
    a.q = TensorView::contiguous(q, DType::f16, {T, 4, 64});
    a.out = TensorView::contiguous(out, DType::f16, {T, 4, 64});
    a.key = TensorView::contiguous(kv, DType::f16, {T, 2, 64});
    a.key.strides = {2 * 64, 64, 1};
    a.value = TensorView::contiguous(kv, DType::f16, {T, 2, 64}, T * 2 * 64 * 2);
    a.slot_mapping = TensorView::contiguous(slots, DType::i32, {T});
    a.batch = batch.view();
    a.params.scale = 0.125f;
    a.workspace = TensorView::contiguous(workspace, DType::f32, {int64_t(workspace.size() / 4)});
    prefix_prefill(ctx, plan, cache, a, cmd);
  };
  EXPECT_EQ(allocations_of(ctx, commands, op), 0);
}

// An engine's step as README's serving loop makes it: a plan from this
// step's lengths, the step's views made anew (its token count changes), the
// new tokens' K/V written to the cache and the attention recorded, with ALiBi
// and an LSE output. Once the pipelines exist, nothing of it allocates.
TEST_P(RecordAllocations, AnEnginesWholeStepAllocatesNothing) {
  Context ctx(counting_options(GetParam()));
  OwnCommands commands(ctx);
  const KvCacheConfig cfg{.num_blocks = 16, .block_size = 16, .num_kv_heads = 2, .head_size = 64};
  PagedKvCache cache(ctx, cfg);
  // Three sequences: two decoding (40 and 17 tokens of context), one a 9-token prefill chunk.
  const std::vector<int32_t> qsl{0, 1, 2, 11}, lens{41, 18, 9};
  DeviceBatch batch(ctx, qsl, lens, {0, 1, 2, 3, 4, 5, 6, 7, 8}, 3);
  const int64_t T = 11, H = 4, D = 64;
  Buffer q(ctx, T * H * D * 2), out(ctx, T * H * D * 2), kv(ctx, 2 * T * 2 * D * 2), slots(ctx, T * 8), lse(ctx, T * H * 4),
      slopes(ctx, H * 4);
  const PagedAttentionVariant variant{.alibi = true, .lse = true};
  prepare_paged_attention(ctx, cfg, H, DType::f16, std::span(&variant, 1));
  tool::BenchOp op;
  op.record = [&](VkCommandBuffer cmd, uint32_t) {
    const PagedAttentionPlan plan(ctx, cfg, H, DType::f16, PagedAttentionLengths{qsl, lens});
    write_kv_cache(ctx, cache, TensorView::contiguous(kv, DType::f16, {T, 2, D}),
                   TensorView::contiguous(kv, DType::f16, {T, 2, D}, T * 2 * D * 2), TensorView::contiguous(slots, DType::i64, {T}), cmd);
    PagedAttentionArgs a;
    a.q = TensorView::contiguous(q, DType::f16, {T, H, D});
    a.out = TensorView::contiguous(out, DType::f16, {T, H, D});
    a.lse = TensorView::contiguous(lse, DType::f32, {T, H});
    a.batch = batch.view();
    a.params.scale = 0.125f;
    a.params.alibi_slopes = TensorView::contiguous(slopes, DType::f32, {H});
    paged_attention(ctx, plan, cache, a, cmd);
  };
  EXPECT_EQ(allocations_of(ctx, commands, op), 0);
}

// Block-sparse attention with its views and mask made anew every step
// (causal and a window, documents, ALiBi, LSE), and the mask built on the
// device the same way, then both again with a custom variant
// (tests/variants/stripes.glsl, registered in this program under a 35-byte
// name) whose name and buffers are given every step: nothing allocates.
TEST_P(RecordAllocations, BlockSparseWithItsViewsMadeEachStepAllocatesNothing) {
  Context ctx(counting_options(GetParam()));
  OwnCommands commands(ctx);
  const int64_t H = 2, L = 128, D = 64, QB = 2, KB = 2;
  Buffer q(ctx, H * L * D * 2), k(ctx, H * L * D * 2), v(ctx, H * L * D * 2), out(ctx, H * L * D * 2), lse(ctx, H * L * 4),
      lists(ctx, 4 * (2 * H * QB + 2 * H * QB * KB)), docs(ctx, L * 4), slopes(ctx, H * 4), weights(ctx, L * 4),
      shifts(ctx, H * 4);
  const BlockSparseMods mods{.all = kMaskCausal | kMaskWindow | kMaskDocument, .any = 0, .score = kScoreAlibi};
  auto mask_of = [&] {
    BlockMask m;
    m.q_block_size = m.kv_block_size = 64;
    m.kv_num_blocks = TensorView::contiguous(lists, DType::i32, {1, H, QB});
    m.kv_indices = TensorView::contiguous(lists, DType::i32, {1, H, QB, KB}, 4 * H * QB);
    m.full_kv_num_blocks = TensorView::contiguous(lists, DType::i32, {1, H, QB}, 4 * (H * QB + H * QB * KB));
    m.full_kv_indices = TensorView::contiguous(lists, DType::i32, {1, H, QB, KB}, 4 * (2 * H * QB + H * QB * KB));
    return m;
  };
  auto values_of = [&](bool alibi) {
    BlockSparseModValues x;
    x.window = 100;
    x.document_ids = TensorView::contiguous(docs, DType::i32, {L});
    if (alibi) x.alibi_slopes = TensorView::contiguous(slopes, DType::f32, {H});
    return x;
  };
  for (const bool custom : {false, true}) {
    const std::string which = custom ? " with a custom variant" : "";
    auto variant_of = [&](auto& args) {
      if (!custom) return;
      args.custom_mods = "stripes_named_past_any_small_string";
      args.custom_buffers = {{"key_weight", TensorView::contiguous(weights, DType::f32, {L})},
                             {"head_shift", TensorView::contiguous(shifts, DType::i32, {H})}};
    };
    tool::BenchOp build;
    build.record = [&](VkCommandBuffer cmd, uint32_t) {
      BlockMaskBuild b;
      b.mods = {.all = mods.all, .any = 0, .score = 0};
      b.values = values_of(false);
      b.q_len = b.kv_len = L;
      b.mask = mask_of();
      variant_of(b);
      build_block_mask(ctx, b, cmd);
    };
    EXPECT_EQ(allocations_of(ctx, commands, build), 0) << "build_block_mask" << which;
    tool::BenchOp attention;
    attention.record = [&](VkCommandBuffer cmd, uint32_t) {
      BlockSparseArgs a;
      a.q = TensorView::contiguous(q, DType::f16, {1, H, L, D});
      a.k = TensorView::contiguous(k, DType::f16, {1, H, L, D});
      a.v = TensorView::contiguous(v, DType::f16, {1, H, L, D});
      a.out = TensorView::contiguous(out, DType::f16, {1, H, L, D});
      a.lse = TensorView::contiguous(lse, DType::f32, {1, H, L});
      a.mask = mask_of();
      a.mods = mods;
      a.values = values_of(true);
      variant_of(a);
      block_sparse_attention(ctx, a, cmd);
    };
    EXPECT_EQ(allocations_of(ctx, commands, attention), 0) << "block_sparse_attention" << which;
  }
}

INSTANTIATE_TEST_SUITE_P(Binding, RecordAllocations, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "push_descriptors" : "descriptor_sets"; });

// A plan per step (the planned form) is host work O(num_seqs) that
// allocates nothing (paged_attention.hpp says so: its data is held in the
// object), for 256 sequences as for 1; nor does copying one, or a
// prefix-prefill plan.
TEST(PlanAllocations, APlanAllocatesNothing) {
  Context ctx(counting_options());
  const KvCacheConfig cfg{.num_blocks = 4096, .block_size = 16, .num_kv_heads = 2, .head_size = 64};
  auto allocations = [&](uint32_t seqs, int32_t query_len) {
    std::vector<int32_t> starts(seqs + 1), lens(seqs, 300);
    for (uint32_t s = 0; s < seqs; ++s) starts[s + 1] = starts[s] + query_len;
    const PagedAttentionLengths lengths{starts, lens};
    PagedAttentionPlan(ctx, cfg, 8, DType::f16, lengths);   // its first: anything made once
    PrefixPrefillPlan(ctx, cfg, 8, DType::f16, lengths);
    counted = 0;
    counting = true;
    {
      PagedAttentionPlan plan(ctx, cfg, 8, DType::f16, lengths);
      PagedAttentionPlan copy = plan;
      plan = copy;
      PrefixPrefillPlan prefix(ctx, cfg, 8, DType::f16, lengths);
    }
    counting = false;
    return counted.load();
  };
  EXPECT_EQ(allocations(1, 1), 0);
  EXPECT_EQ(allocations(256, 1), 0);
  EXPECT_EQ(allocations(1, 40), 0);
  EXPECT_EQ(allocations(16, 40), 0);
}

}  // namespace
}  // namespace vkattn::test
