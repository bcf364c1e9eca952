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

}  // namespace
}  // namespace vkattn::test
