#include "vk_functions.hpp"

#include <dlfcn.h>

#include <vkattn/error.hpp>

namespace vkattn::detail {

namespace {

// libvulkan.so.1's vkGetInstanceProcAddr. The library stays open for the
// process's life: instances and devices made through it may outlive any
// one Context (an application's, adopted).
PFN_vkGetInstanceProcAddr system_loader() {
  static PFN_vkGetInstanceProcAddr gipa = [] {
    void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
    return lib ? reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr")) : nullptr;
  }();
  return gipa;
}

}  // namespace

#define VKATTN_LOAD_GLOBAL(name) name = reinterpret_cast<PFN_##name>(vkGetInstanceProcAddr(nullptr, #name));
#define VKATTN_LOAD_INSTANCE(name) name = reinterpret_cast<PFN_##name>(vkGetInstanceProcAddr(instance, #name));
#define VKATTN_LOAD_DEVICE(name) name = reinterpret_cast<PFN_##name>(vkGetDeviceProcAddr(device, #name));

void VkFunctions::load_global(PFN_vkGetInstanceProcAddr gipa) {
  vkGetInstanceProcAddr = gipa ? gipa : system_loader();
  if (!vkGetInstanceProcAddr)
    throw Error("no Vulkan loader found (libvulkan.so.1): install the Vulkan loader (Debian: libvulkan1) and a driver");
  VKATTN_GLOBAL_FUNCTIONS(VKATTN_LOAD_GLOBAL)
  if (!vkCreateInstance) throw Error("the Vulkan loader's vkGetInstanceProcAddr returned no vkCreateInstance");
}

void VkFunctions::load_instance(VkInstance instance) { VKATTN_INSTANCE_FUNCTIONS(VKATTN_LOAD_INSTANCE) }

void VkFunctions::load_device(VkDevice device) {
  if (!vkGetDeviceProcAddr) throw Error("the Vulkan instance offers no vkGetDeviceProcAddr");
  VKATTN_DEVICE_FUNCTIONS(VKATTN_LOAD_DEVICE)
}

}  // namespace vkattn::detail
