// Context::adopt: what it takes from the application's feature chain.
#include "context_impl.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

class Adopt : public VkTest {
 protected:
  // The handles of the fixture's own Context, adopted a second time.
  AdoptInfo info(const VkPhysicalDeviceFeatures2* features) {
    AdoptInfo a;
    a.instance = ctx().instance();
    a.physical_device = ctx().physical_device();
    a.device = ctx().device();
    a.queue = ctx().queue();
    a.queue_family = ctx().queue_family();
    a.enabled_features = features;
    return a;
  }
};

TEST_F(Adopt, RequiredFeaturesMissingFromTheChainAreNamed) {
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f12.storageBuffer8BitAccess = f12.shaderFloat16 = f12.bufferDeviceAddress = f12.vulkanMemoryModel = VK_TRUE;
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, &f12};
  f11.storageBuffer16BitAccess = VK_TRUE;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f11};
  features.features.shaderInt64 = VK_TRUE;
  EXPECT_VKATTN_ERROR(Context::adopt(info(&features)), "shaderInt16", "vulkanMemoryModelDeviceScope", "maintenance4",
                      "vkCreateDevice");
  VkPhysicalDeviceFeatures not_a_chain{};
  EXPECT_VKATTN_ERROR(Context::adopt(info(reinterpret_cast<const VkPhysicalDeviceFeatures2*>(&not_a_chain))),
                      "VkPhysicalDeviceFeatures2");
}

TEST_F(Adopt, OptionalFeaturesCountOnlyWhenEnabled) {
  // Without a chain: the required features are trusted, no optional one is
  // used, so the matrix paths and subgroup size control are off (a forced
  // matrix path would be refused).
  ScopedUnsetEnv no_forced_path("VKATTN_PATH");
  Context bare = Context::adopt(info(nullptr));
  EXPECT_FALSE(bare.capabilities().subgroup_size_control);
  EXPECT_FALSE(bare.capabilities().coopmat);
  EXPECT_EQ(bare.capabilities().paths, std::vector<Path>{Path::scalar});
  // With the chain the fixture's device was made with (everything it supports),
  // the adopted context sees what the fixture's does.
  detail::DeviceFeatureChain all;
  all.link(false, false, false, false);
  ctx().impl().vk.vkGetPhysicalDeviceFeatures2(ctx().physical_device(), &all.core);
  Context full = Context::adopt(info(&all.core));
  EXPECT_EQ(full.capabilities().subgroup_size_control, ctx().capabilities().subgroup_size_control);
}

// A device may be created with the promoted features' own structs instead of
// VkPhysicalDeviceVulkan11/12/13Features. Adopt read only the latter, and
// refused such a device as lacking features it had.
TEST_F(Adopt, FeaturesEnabledThroughTheirOwnStructsCount) {
  ScopedUnsetEnv no_forced_path("VKATTN_PATH");
  VkPhysicalDeviceMaintenance4Features m4{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_FEATURES};
  VkPhysicalDeviceSubgroupSizeControlFeatures ssc{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES, &m4};
  VkPhysicalDeviceVulkanMemoryModelFeatures mm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES, &ssc};
  VkPhysicalDeviceBufferDeviceAddressFeatures bda{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES, &mm};
  VkPhysicalDeviceShaderFloat16Int8Features f16i8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES, &bda};
  VkPhysicalDevice8BitStorageFeatures s8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES, &f16i8};
  VkPhysicalDevice16BitStorageFeatures s16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES, &s8};
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &s16};
  // What the device offers, as these structs report it (the fixture's device
  // was made with everything it supports).
  ctx().impl().vk.vkGetPhysicalDeviceFeatures2(ctx().physical_device(), &features);
  Context adopted = Context::adopt(info(&features));
  EXPECT_EQ(adopted.capabilities().subgroup_size_control, ctx().capabilities().subgroup_size_control);
  EXPECT_EQ(adopted.capabilities().buffer_device_address, ctx().capabilities().buffer_device_address);
}

// A queue family the device does not have was taken as given: the command
// pool was made for it (VUID-vkCreateCommandPool-queueFamilyIndex-01937) and
// every synchronous call submitted from it.
TEST_F(Adopt, AQueueFamilyTheDeviceDoesNotHaveIsRefused) {
  AdoptInfo a = info(nullptr);
  a.queue_family = 1000;
  EXPECT_VKATTN_ERROR(Context::adopt(a), "queue_family = 1000 is not a queue family of the device");
  a.queue = VK_NULL_HANDLE;   // without a queue too: the command pool is still made for it
  EXPECT_VKATTN_ERROR(Context::adopt(a), "queue_family = 1000");
}

// An extension listed in AdoptInfo but not enabled in vkCreateDevice has no
// entry points: the first op called a null vkCmdPushDescriptorSetKHR
// (SIGSEGV).
TEST_F(Adopt, AnExtensionListedButNotEnabledIsRefused) {
  ScopedUnsetEnv no_forced_path("VKATTN_PATH");
  const auto& vk = ctx().impl().vk;
  // A second device on the fixture's GPU with the required features and no extensions.
  detail::DeviceFeatureChain all;
  all.link(false, false, false, false);
  vk.vkGetPhysicalDeviceFeatures2(ctx().physical_device(), &all.core);
  float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = ctx().queue_family();
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &all.core;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  VkDevice device = VK_NULL_HANDLE;
  ASSERT_EQ(vk.vkCreateDevice(ctx().physical_device(), &dci, nullptr, &device), VK_SUCCESS);
  AdoptInfo a = info(&all.core);
  a.device = device;
  a.queue = VK_NULL_HANDLE;
  a.enabled_device_extensions = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
  EXPECT_VKATTN_ERROR(Context::adopt(a), "lists VK_KHR_push_descriptor", "vkCreateDevice enabled");
  a.enabled_device_extensions.clear();
  { Context fine = Context::adopt(a); }
  vk.vkDestroyDevice(device, nullptr);
}

}  // namespace
}  // namespace vkattn::test
