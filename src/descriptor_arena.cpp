#include "descriptor_arena.hpp"

namespace vkattn::detail {

namespace {
constexpr uint32_t kSetsPerPool = 256;
constexpr uint32_t kBuffersPerPool = kSetsPerPool * 20;   // the most bindings a kernel has (dispatch.cpp)
}

VkDescriptorSet DescriptorArena::allocate(const VkFunctions& vk, VkDevice device, VkDescriptorSetLayout layout) {
  for (;;) {
    if (current_ == pools_.size()) {
      VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kBuffersPerPool};
      VkDescriptorPoolCreateInfo info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
      info.maxSets = kSetsPerPool;
      info.poolSizeCount = 1;
      info.pPoolSizes = &size;
      VkDescriptorPool pool;
      vk_check(vk.vkCreateDescriptorPool(device, &info, nullptr, &pool), "vkCreateDescriptorPool");
      pools_.push_back(pool);
    }
    VkDescriptorSetAllocateInfo info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    info.descriptorPool = pools_[current_];
    info.descriptorSetCount = 1;
    info.pSetLayouts = &layout;
    VkDescriptorSet set;
    VkResult r = vk.vkAllocateDescriptorSets(device, &info, &set);
    if (r == VK_SUCCESS) return set;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) vk_check(r, "vkAllocateDescriptorSets");
    ++current_;   // this pool is full: move to the next (or a new) one
  }
}

void DescriptorArena::reset(const VkFunctions& vk, VkDevice device) {
  for (VkDescriptorPool p : pools_) vk.vkResetDescriptorPool(device, p, 0);
  current_ = 0;
}

void DescriptorArena::destroy(const VkFunctions& vk, VkDevice device) {
  for (VkDescriptorPool p : pools_) vk.vkDestroyDescriptorPool(device, p, nullptr);
  pools_.clear();
  current_ = 0;
}

}  // namespace vkattn::detail
