// Internal: what a Context holds.
#pragma once
#include <vkattn/buffer.hpp>
#include <vkattn/context.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "descriptor_arena.hpp"
#include "vk.hpp"

namespace vkattn::detail {

class Pipelines;

// Device features vkattn enables (own device) or expects (adopted device).
struct DeviceFeatureChain {
  VkPhysicalDeviceFeatures2 core{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceVulkan11Features v11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan13Features v13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR coopmat{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
  VkPhysicalDeviceCooperativeMatrix2FeaturesNV coopmat2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV};
  VkPhysicalDeviceShaderBfloat16FeaturesKHR bf16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR executables{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  // Links the structs whose extensions are present.
  void link(bool has_coopmat, bool has_coopmat2, bool has_bf16, bool has_executables);
};

struct ContextImpl {
  ContextOptions options;
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical_device = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  bool owns_instance = false, owns_device = false;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  std::vector<std::string> device_extensions;   // enabled
  bool pipeline_executable_info = false;         // VK_KHR_pipeline_executable_properties enabled (own device only)
  VolkDeviceTable vk{};
  Capabilities caps;
  VkPhysicalDeviceMemoryProperties memory{};

  std::unique_ptr<Pipelines> pipelines;
  std::mutex submit_mutex;
  VkCommandPool command_pool = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  Buffer status;                                  // abi::STATUS_WORDS uint32, host visible

  DescriptorArena recorded_sets, sync_sets;
  DescriptorArena* active_sets = &recorded_sets;  // sync_sets while submit_and_wait records

  mutable std::mutex validation_mutex;
  std::vector<std::string> validation_messages;

  bool use_push_descriptors() const { return caps.push_descriptors && !options.disable_push_descriptors; }
  bool has_extension(std::string_view name) const;
  uint32_t memory_type(uint32_t type_bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid = 0) const;
  // Largest single buffer the library allocates.
  uint64_t max_chunk_bytes() const;

  ~ContextImpl();
};

// Records, submits and waits, without looking at the kernels' status words.
void submit_and_wait(ContextImpl& impl, const std::function<void(VkCommandBuffer)>& record);

// Fills caps (and memory) for physical_device; `enabled_exts` decides which
// extension-backed capabilities count. Defined in capabilities.cpp.
void query_capabilities(ContextImpl& impl, const std::vector<std::string>& enabled_exts);

}  // namespace vkattn::detail
