// Consumer "loader": an application that links the Vulkan loader and calls
// its vk* functions directly, before and after vkattn works on a Context of
// its own. A library defining those names (as one that compiled volk in did)
// would replace the loader's functions: the first call below would crash.
#include <vulkan/vulkan.h>

#include "own_vulkan.hpp"

using namespace consumer;

int main() {
  uint32_t version = 0;
  vk_ok(vkEnumerateInstanceVersion(&version), "the application's vkEnumerateInstanceVersion");
  VkInstance instance = create_instance();
  std::string device_name;
  {
    OwnDevice own(instance, nullptr);
    own.submit_and_wait([](VkCommandBuffer) {});
    {
      vkattn::Context ctx;
      vkattn::PagedKvCache cache(ctx, kCacheConfig);
      Inputs inputs(ctx);
      inputs.write(ctx, cache);
      check(cache_holds_token(cache), "write_kv_cache stored the token");
      device_name = ctx.capabilities().device_name;
    }
    // vkattn's instance and device are gone; the application's still work.
    check(count_physical_devices(instance) > 0, "the application's instance still enumerates devices");
    own.submit_and_wait([](VkCommandBuffer) {});
  }
  vkDestroyInstance(instance, nullptr);
  uint32_t again = 0;
  vk_ok(vkEnumerateInstanceVersion(&again), "vkEnumerateInstanceVersion after vkattn");
  check(again == version, "the same instance version before and after vkattn");
  std::printf("consumer_loader: %s: loader calls (Vulkan %u.%u) before and after vkattn; own device submitted; "
              "write_kv_cache token verified\n",
              device_name.c_str(), VK_API_VERSION_MAJOR(version), VK_API_VERSION_MINOR(version));
}
