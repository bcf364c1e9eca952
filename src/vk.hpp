// Internal: Vulkan types, entry points (vk_functions.hpp) and VkResult checking.
#pragma once
#include <vulkan/vulkan_core.h>

#include <string>
#include <string_view>

#include <vkattn/error.hpp>

#include "vk_functions.hpp"

// VK_KHR_shader_bfloat16 is newer than the 1.4.309 headers; its few enums are
// fixed by the registry, so define them when the headers lack them.
#ifndef VK_KHR_shader_bfloat16
#define VK_KHR_shader_bfloat16 1
#define VK_KHR_SHADER_BFLOAT16_EXTENSION_NAME "VK_KHR_shader_bfloat16"
inline constexpr VkStructureType VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR = VkStructureType(1000141000);
inline constexpr VkComponentTypeKHR VK_COMPONENT_TYPE_BFLOAT16_KHR = VkComponentTypeKHR(1000141000);
typedef struct VkPhysicalDeviceShaderBfloat16FeaturesKHR {
  VkStructureType sType;
  void* pNext;
  VkBool32 shaderBFloat16Type;
  VkBool32 shaderBFloat16DotProduct;
  VkBool32 shaderBFloat16CooperativeMatrix;
} VkPhysicalDeviceShaderBfloat16FeaturesKHR;
#endif

namespace vkattn::detail {

std::string_view vk_result_name(VkResult r);

// Throws vkattn::Error("<what>: <VkResult name>") unless r is VK_SUCCESS.
inline void vk_check(VkResult r, std::string_view what) {
  if (r != VK_SUCCESS)
    throw Error(std::string(what) + " failed: " + std::string(vk_result_name(r)), static_cast<int>(r));
}

}  // namespace vkattn::detail
