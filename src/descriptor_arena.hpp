// Internal: descriptor sets for devices without push descriptors. Sets are
// carved from growing pools and all released together once their command
// buffers have completed.
#pragma once
#include <vector>

#include "vk.hpp"

namespace vkattn::detail {

class DescriptorArena {
 public:
  VkDescriptorSet allocate(const VkFunctions& vk, VkDevice device, VkDescriptorSetLayout layout);
  void reset(const VkFunctions& vk, VkDevice device);      // every set back to the pools
  void destroy(const VkFunctions& vk, VkDevice device);

 private:
  std::vector<VkDescriptorPool> pools_;
  std::size_t current_ = 0;
};

}  // namespace vkattn::detail
