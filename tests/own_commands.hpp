// A command pool and one primary command buffer of the test's own, on the
// Context's queue family: ops recorded into it take the recorded form, as an
// engine's command buffers do (not the Context's synchronous one).
#pragma once
#include <gtest/gtest.h>
#include <vkattn/vkattn.hpp>

#include <functional>

#include "context_impl.hpp"

namespace vkattn::test {

class OwnCommands {
 public:
  explicit OwnCommands(Context& ctx) : ctx_(ctx), vk_(ctx.impl().vk) {
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
  ~OwnCommands() { vk_.vkDestroyCommandPool(ctx_.device(), pool_, nullptr); }
  OwnCommands(const OwnCommands&) = delete;
  OwnCommands& operator=(const OwnCommands&) = delete;

  VkCommandBuffer cmd() const { return cmd_; }

  // Begins the command buffer, records, ends, submits it to the Context's
  // queue (no other thread may submit meanwhile), waits, resets it and
  // releases the descriptor sets the recording used.
  void run(const std::function<void(VkCommandBuffer)>& record) {
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    vk_.vkBeginCommandBuffer(cmd_, &bi);
    record(cmd_);
    vk_.vkEndCommandBuffer(cmd_);
    VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence = VK_NULL_HANDLE;
    ASSERT_EQ(vk_.vkCreateFence(ctx_.device(), &fci, nullptr, &fence), VK_SUCCESS);
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd_;
    EXPECT_EQ(vk_.vkQueueSubmit(ctx_.queue(), 1, &si, fence), VK_SUCCESS);
    EXPECT_EQ(vk_.vkWaitForFences(ctx_.device(), 1, &fence, VK_TRUE, UINT64_MAX), VK_SUCCESS);
    vk_.vkDestroyFence(ctx_.device(), fence, nullptr);
    vk_.vkResetCommandBuffer(cmd_, 0);
    ctx_.release_recorded_descriptor_sets();
  }

 private:
  Context& ctx_;
  const detail::VkFunctions& vk_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
};

}  // namespace vkattn::test
