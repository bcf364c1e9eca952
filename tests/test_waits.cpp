// Waiting for synchronous submissions: by default without a deadline; with
// ContextOptions::submit_timeout_ns, a submission that outlasts it makes the
// Context unusable and nothing it may still use is freed (the Context's
// destruction waits for it). The slow kernel is tests/shaders/wait_for_host.comp,
// which runs until the test lets it finish.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <thread>

#include "context_impl.hpp"
#include "vk_test.hpp"

extern const unsigned char test_spv_wait_for_host[];
extern const std::size_t test_spv_wait_for_host_size;

namespace vkattn::test {
namespace {

// The slow kernel's pipeline and its flag word, on one Context.
class HostGate {
 public:
  explicit HostGate(Context& ctx) : ctx_(ctx), flag_(ctx, 256, MemoryKind::host_visible) {
    const auto& vk = ctx.impl().vk;
    VkDevice dev = ctx.device();
    static_cast<uint32_t*>(flag_.mapped())[0] = 0;
    VkShaderModuleCreateInfo smi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    smi.codeSize = test_spv_wait_for_host_size;
    smi.pCode = reinterpret_cast<const uint32_t*>(test_spv_wait_for_host);
    ok(vk.vkCreateShaderModule(dev, &smi, nullptr, &module_));
    VkDescriptorSetLayoutBinding b{0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    VkDescriptorSetLayoutCreateInfo dli{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    dli.bindingCount = 1;
    dli.pBindings = &b;
    ok(vk.vkCreateDescriptorSetLayout(dev, &dli, nullptr, &set_layout_));
    VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    pli.setLayoutCount = 1;
    pli.pSetLayouts = &set_layout_;
    ok(vk.vkCreatePipelineLayout(dev, &pli, nullptr, &layout_));
    VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = module_;
    ci.stage.pName = "main";
    ci.layout = layout_;
    ok(vk.vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &ci, nullptr, &pipeline_));
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1};
    VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    dpi.maxSets = 1;
    dpi.poolSizeCount = 1;
    dpi.pPoolSizes = &size;
    ok(vk.vkCreateDescriptorPool(dev, &dpi, nullptr, &pool_));
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = pool_;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &set_layout_;
    ok(vk.vkAllocateDescriptorSets(dev, &ai, &set_));
    VkDescriptorBufferInfo info{flag_.handle(), 0, VK_WHOLE_SIZE};
    VkWriteDescriptorSet w{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    w.dstSet = set_;
    w.descriptorCount = 1;
    w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w.pBufferInfo = &info;
    vk.vkUpdateDescriptorSets(dev, 1, &w, 0, nullptr);
  }
  // Destroyed only once nothing runs the kernel any more (after open()).
  ~HostGate() {
    const auto& vk = ctx_.impl().vk;
    VkDevice dev = ctx_.device();
    vk.vkDestroyDescriptorPool(dev, pool_, nullptr);
    vk.vkDestroyPipeline(dev, pipeline_, nullptr);
    vk.vkDestroyPipelineLayout(dev, layout_, nullptr);
    vk.vkDestroyDescriptorSetLayout(dev, set_layout_, nullptr);
    vk.vkDestroyShaderModule(dev, module_, nullptr);
  }
  void record(VkCommandBuffer cmd) const {
    const auto& vk = ctx_.impl().vk;
    vk.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
    vk.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout_, 0, 1, &set_, 0, nullptr);
    vk.vkCmdDispatch(cmd, 1, 1, 1);
  }
  void open() { reinterpret_cast<std::atomic<uint32_t>*>(flag_.mapped())->store(1); }
  uint32_t polls() const { return static_cast<const uint32_t*>(flag_.mapped())[1]; }

 private:
  static void ok(VkResult r) { ASSERT_EQ(r, VK_SUCCESS); }
  Context& ctx_;
  Buffer flag_;
  VkShaderModule module_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  VkDescriptorSet set_ = VK_NULL_HANDLE;
};

TEST(Waits, WithoutADeadlineASlowSubmissionIsWaitedFor) {
  Context ctx(test_options());
  HostGate gate(ctx);
  // The kernel runs until another thread opens the gate, a while later.
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    gate.open();
  });
  EXPECT_NO_THROW(ctx.submit_and_wait([&](VkCommandBuffer cmd) { gate.record(cmd); }));
  opener.join();
  EXPECT_GT(gate.polls(), 0u);   // it did wait for the host
  EXPECT_TRUE(ctx.usable());
  EXPECT_NO_THROW(ctx.submit_and_wait([](VkCommandBuffer) {}));
  for (const auto& m : ctx.validation_messages()) ADD_FAILURE() << "validation error: " << m;
}

TEST(Waits, ATimeoutMakesTheContextUnusableAndFreesNothingInFlight) {
  ContextOptions o = test_options();
  o.submit_timeout_ns = 20'000'000;   // 20 ms; the kernel runs until the gate opens
  auto ctx = std::make_unique<Context>(o);
  auto gate = std::make_unique<HostGate>(*ctx);
  EXPECT_VKATTN_ERROR(ctx->submit_and_wait([&](VkCommandBuffer cmd) { gate->record(cmd); }), "did not complete within",
                      "unusable");
  EXPECT_FALSE(ctx->usable());
  // Every later call refuses, synchronous or recorded.
  EXPECT_VKATTN_ERROR(ctx->submit_and_wait([](VkCommandBuffer) {}), "unusable", "timed out");
  Buffer b(*ctx, 64);
  EXPECT_VKATTN_ERROR(b.fill(0), "unusable");
  KvCacheConfig cfg{.num_blocks = 4, .block_size = 16, .num_kv_heads = 1, .head_size = 64};
  PagedKvCache cache(*ctx, cfg);
  Buffer k(*ctx, 64 * 2), slots(*ctx, 8);
  auto kv = TensorView::contiguous(k, DType::f16, {1, 1, 64});
  VkCommandBuffer never_used = reinterpret_cast<VkCommandBuffer>(uintptr_t(1));
  EXPECT_VKATTN_ERROR(write_kv_cache(*ctx, cache, kv, kv, TensorView::contiguous(slots, DType::i64, {1}), never_used),
                      "unusable");
  // Nothing the submission uses was freed: the validation layers saw no
  // command buffer or descriptor set freed while pending.
  for (const auto& m : ctx->validation_messages()) ADD_FAILURE() << "validation error: " << m;
  // Let the kernel finish; destroying the Context waits for the submission,
  // then frees it.
  gate->open();
  ctx->impl().vk.vkDeviceWaitIdle(ctx->device());
  EXPECT_GT(gate->polls(), 0u);
  gate.reset();
  ctx.reset();
}

}  // namespace
}  // namespace vkattn::test
