// Internal: the Vulkan entry points vkattn calls, in one table per Context.
//
// vkattn defines no global Vulkan symbols. An application that links the
// loader (vkCreateInstance & co. from libvulkan) or volk (global function
// pointers of those names) keeps its own: a library that defined them too
// would replace the application's functions at link time (a static library's
// data symbol `vkCreateInstance` wins over the loader's function, and the
// application's first Vulkan call jumps into a pointer). Every call here goes
// through ContextImpl::vk, loaded from the loader's vkGetInstanceProcAddr
// (dlopen'ed, or the application's own; see load_vulkan_loader).
#pragma once
#include <vulkan/vulkan_core.h>

namespace vkattn::detail {

// Functions without an instance (vkGetInstanceProcAddr(NULL, name)).
#define VKATTN_GLOBAL_FUNCTIONS(X)          \
  X(vkCreateInstance)                      \
  X(vkEnumerateInstanceVersion)            \
  X(vkEnumerateInstanceLayerProperties)    \
  X(vkEnumerateInstanceExtensionProperties)

// Instance and physical-device functions (vkGetInstanceProcAddr(instance, name)).
#define VKATTN_INSTANCE_FUNCTIONS(X)                                 \
  X(vkDestroyInstance)                                              \
  X(vkEnumeratePhysicalDevices)                                     \
  X(vkGetPhysicalDeviceProperties)                                  \
  X(vkGetPhysicalDeviceProperties2)                                 \
  X(vkGetPhysicalDeviceFeatures2)                                   \
  X(vkGetPhysicalDeviceQueueFamilyProperties)                       \
  X(vkGetPhysicalDeviceMemoryProperties)                            \
  X(vkGetPhysicalDeviceMemoryProperties2)                           \
  X(vkEnumerateDeviceExtensionProperties)                           \
  X(vkCreateDevice)                                                 \
  X(vkGetDeviceProcAddr)                                            \
  X(vkCreateDebugUtilsMessengerEXT)                                 \
  X(vkDestroyDebugUtilsMessengerEXT)                                \
  X(vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)              \
  X(vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV)

// Device functions (vkGetDeviceProcAddr(device, name)): no loader trampoline.
#define VKATTN_DEVICE_FUNCTIONS(X)                       \
  X(vkDestroyDevice)                                    \
  X(vkGetDeviceQueue)                                   \
  X(vkDeviceWaitIdle)                                   \
  X(vkQueueSubmit)                                      \
  X(vkCreateBuffer)                                     \
  X(vkDestroyBuffer)                                    \
  X(vkGetBufferMemoryRequirements)                      \
  X(vkGetBufferDeviceAddress)                           \
  X(vkAllocateMemory)                                   \
  X(vkFreeMemory)                                       \
  X(vkBindBufferMemory)                                 \
  X(vkMapMemory)                                        \
  X(vkCreateCommandPool)                                \
  X(vkDestroyCommandPool)                               \
  X(vkAllocateCommandBuffers)                           \
  X(vkFreeCommandBuffers)                               \
  X(vkResetCommandBuffer)                               \
  X(vkBeginCommandBuffer)                               \
  X(vkEndCommandBuffer)                                 \
  X(vkCreateFence)                                      \
  X(vkDestroyFence)                                     \
  X(vkResetFences)                                      \
  X(vkWaitForFences)                                    \
  X(vkGetFenceStatus)                                   \
  X(vkCreateShaderModule)                               \
  X(vkDestroyShaderModule)                              \
  X(vkCreatePipelineCache)                              \
  X(vkDestroyPipelineCache)                             \
  X(vkGetPipelineCacheData)                             \
  X(vkCreateComputePipelines)                           \
  X(vkDestroyPipeline)                                  \
  X(vkCreatePipelineLayout)                             \
  X(vkDestroyPipelineLayout)                            \
  X(vkCreateDescriptorSetLayout)                        \
  X(vkDestroyDescriptorSetLayout)                       \
  X(vkCreateDescriptorPool)                             \
  X(vkDestroyDescriptorPool)                            \
  X(vkResetDescriptorPool)                              \
  X(vkAllocateDescriptorSets)                           \
  X(vkUpdateDescriptorSets)                             \
  X(vkCreateQueryPool)                                  \
  X(vkDestroyQueryPool)                                 \
  X(vkGetQueryPoolResults)                              \
  X(vkCmdBindPipeline)                                  \
  X(vkCmdBindDescriptorSets)                            \
  X(vkCmdPushDescriptorSetKHR)                          \
  X(vkCmdPushConstants)                                 \
  X(vkCmdDispatch)                                      \
  X(vkCmdPipelineBarrier)                               \
  X(vkCmdCopyBuffer)                                    \
  X(vkCmdFillBuffer)                                    \
  X(vkCmdUpdateBuffer)                                  \
  X(vkCmdResetQueryPool)                                \
  X(vkCmdWriteTimestamp)                                \
  X(vkGetPipelineExecutablePropertiesKHR)               \
  X(vkGetPipelineExecutableStatisticsKHR)               \
  X(vkGetPipelineExecutableInternalRepresentationsKHR)

#define VKATTN_DECLARE_PFN(name) PFN_##name name = nullptr;

// Every entry point of one Context. Null where the instance or device lacks
// the function (an extension that is not enabled).
struct VkFunctions {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  VKATTN_GLOBAL_FUNCTIONS(VKATTN_DECLARE_PFN)
  VKATTN_INSTANCE_FUNCTIONS(VKATTN_DECLARE_PFN)
  VKATTN_DEVICE_FUNCTIONS(VKATTN_DECLARE_PFN)

  // The loader's vkGetInstanceProcAddr: `gipa` when given (an adopted
  // context's), else from libvulkan.so.1, opened once and never closed.
  // Then the global functions. Throws vkattn::Error when there is no loader.
  void load_global(PFN_vkGetInstanceProcAddr gipa);
  void load_instance(VkInstance instance);
  void load_device(VkDevice device);
};

}  // namespace vkattn::detail
