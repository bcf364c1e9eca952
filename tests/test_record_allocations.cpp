// Recording an op into the caller's command buffer allocates nothing on the
// host once the op's pipelines exist (ops.hpp): an engine records thousands
// of steps a minute. And a plan, made per step in the planned form, is one
// heap allocation (paged_attention.hpp). The ops are the
// benchmark suites' cases (--quick sizes), each recorded once to warm it up
// and then twice more, counting the calls to operator new the recording
// thread makes meanwhile. This binary replaces the global operator new to
// count them, so it is a program of its own; the validation layers are off
// here, since they allocate on the recording thread themselves.
// (The Vulkan-level counts, memory, buffers, pools, submissions and waits,
// are ServingLoopCalls', in vkattn_tests.)
#include <gtest/gtest.h>
#include <vkattn/vkattn.hpp>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "bench/suites.hpp"
#include "context_impl.hpp"

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

// The test's own command pool and buffer on the Context's queue family: the
// ops take their recorded form, as in an engine's command buffers.
class Recorder {
 public:
  explicit Recorder(Context& ctx) : ctx_(ctx), vk_(ctx.impl().vk) {
    VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = ctx.queue_family();
    EXPECT_EQ(vk_.vkCreateCommandPool(ctx.device(), &pci, nullptr, &pool_), VK_SUCCESS);
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    EXPECT_EQ(vk_.vkAllocateCommandBuffers(ctx.device(), &ai, &cmd_), VK_SUCCESS);
  }
  ~Recorder() { vk_.vkDestroyCommandPool(ctx_.device(), pool_, nullptr); }
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Records `op` once (its pipelines, its first descriptor pool), then twice
  // more counting; returns the count. Nothing is submitted: recording is what
  // an engine does every step. The sets recorded are released afterwards.
  long allocations_of(const tool::BenchOp& op) {
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    vk_.vkBeginCommandBuffer(cmd_, &bi);
    op.record(cmd_, 0);
    counted = 0;
    counting = true;
    op.record(cmd_, 1);
    op.record(cmd_, 2);
    counting = false;
    vk_.vkEndCommandBuffer(cmd_);
    vk_.vkResetCommandBuffer(cmd_, 0);
    ctx_.release_recorded_descriptor_sets();
    return counted.load();
  }

 private:
  Context& ctx_;
  const detail::VkFunctions& vk_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
};

// Whether the Context binds through push descriptors (the param) or sets from its pools.
class RecordAllocations : public ::testing::TestWithParam<bool> {};

TEST_P(RecordAllocations, RecordingAPreparedOpAllocatesNothing) {
  ContextOptions o;
  o.validation = false;
  o.disable_push_descriptors = !GetParam();
  Context ctx(o);
  Recorder recorder(ctx);
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
      EXPECT_EQ(recorder.allocations_of(op), 0) << "bench " << suite << ", " << op.info.name
                                                << ": heap allocations while recording it twice";
    }
  }
  // The counter counts: a recording that allocates is seen.
  tool::BenchOp allocating;
  allocating.record = [](VkCommandBuffer, uint32_t) { delete new std::string(64, 'x'); };
  EXPECT_EQ(recorder.allocations_of(allocating), 4);   // the string and its characters, twice
  EXPECT_GT(ops, 10);
}

INSTANTIATE_TEST_SUITE_P(Binding, RecordAllocations, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "push_descriptors" : "descriptor_sets"; });

}  // namespace
}  // namespace vkattn::test

namespace vkattn::test {
namespace {

// A plan per step (the planned form) is host work O(num_seqs) with one heap
// allocation, its data (paged_attention.hpp says so), for 256 sequences as
// for 1.
TEST(PlanAllocations, APlanAllocatesAsMuchForManySequencesAsForOne) {
  ContextOptions o;
  o.validation = false;
  Context ctx(o);
  const KvCacheConfig cfg{.num_blocks = 4096, .block_size = 16, .num_kv_heads = 2, .head_size = 64};
  auto allocations = [&](uint32_t seqs, int32_t query_len) {
    std::vector<int32_t> starts(seqs + 1), lens(seqs, 300);
    for (uint32_t s = 0; s < seqs; ++s) starts[s + 1] = starts[s] + query_len;
    const PagedAttentionLengths lengths{starts, lens};
    PagedAttentionPlan(ctx, cfg, 8, DType::f16, lengths);   // its first: anything made once
    counted = 0;
    counting = true;
    { PagedAttentionPlan plan(ctx, cfg, 8, DType::f16, lengths); }
    counting = false;
    return counted.load();
  };
  EXPECT_EQ(allocations(1, 1), 1);
  EXPECT_EQ(allocations(256, 1), 1);
  EXPECT_EQ(allocations(1, 40), 1);
  EXPECT_EQ(allocations(16, 40), 1);
}

}  // namespace
}  // namespace vkattn::test
