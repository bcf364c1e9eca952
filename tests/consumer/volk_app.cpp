// Consumer "volk": an application that compiles volk itself and reaches
// Vulkan through volk's global function pointers, before and after vkattn
// works on a Context of its own. vkattn must neither define those pointers
// nor load them for its own device.
#include <volk.h>

#include "own_vulkan.hpp"

using namespace consumer;

int main() {
  vk_ok(volkInitialize(), "volkInitialize");
  uint32_t version = volkGetInstanceVersion();
  VkInstance instance = create_instance();
  volkLoadInstance(instance);
  std::string device_name;
  {
    OwnDevice own(instance, nullptr);
    own.submit_and_wait([](VkCommandBuffer) {});
    const PFN_vkQueueSubmit submit_before = vkQueueSubmit;
    const PFN_vkCreateInstance create_before = vkCreateInstance;
    {
      vkattn::Context ctx;
      vkattn::PagedKvCache cache(ctx, kCacheConfig);
      Inputs inputs(ctx);
      inputs.write(ctx, cache);
      check(cache_holds_token(cache), "write_kv_cache stored the token");
      device_name = ctx.capabilities().device_name;
    }
    check(vkQueueSubmit == submit_before && vkCreateInstance == create_before,
          "volk's pointers are still the ones the application loaded");
    check(volkGetLoadedInstance() == instance, "volk still has the application's instance");
    check(count_physical_devices(instance) > 0, "the application's instance still enumerates devices");
    own.submit_and_wait([](VkCommandBuffer) {});
  }
  vkDestroyInstance(instance, nullptr);
  std::printf("consumer_volk: %s: volk pointers (Vulkan %u.%u) used before and after vkattn and left unchanged; "
              "write_kv_cache token verified\n",
              device_name.c_str(), VK_API_VERSION_MAJOR(version), VK_API_VERSION_MINOR(version));
}
