// The application's own Vulkan objects, made with whatever declares vkCreateInstance
// & co. in the including file: the loader's prototypes (<vulkan/vulkan.h>) or
// volk's function pointers (<volk.h>). Nothing here goes through vkattn.
#pragma once
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "one_token.hpp"

namespace consumer {

inline void vk_ok(VkResult r, const char* what) {
  if (r != VK_SUCCESS) std::fprintf(stderr, "%s returned %d\n", what, static_cast<int>(r));
  check(r == VK_SUCCESS, what);
}

// Errors the validation layer reported on the application's instance, which
// see vkattn's calls on an adopted device too (for instance a feature the
// device needed but was created without).
struct ValidationLog {
  bool enabled = false;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  std::vector<std::string> errors;
};

inline VKAPI_ATTR VkBool32 VKAPI_CALL log_validation_error(VkDebugUtilsMessageSeverityFlagBitsEXT,
                                                           VkDebugUtilsMessageTypeFlagsEXT,
                                                           const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                           void* log) {
  static_cast<ValidationLog*>(log)->errors.emplace_back(data->pMessage);
  return VK_FALSE;
}

// As vkattn's tests: on whenever installed, unless VKATTN_VALIDATION=0.
inline bool validation_wanted() {
  const char* env = std::getenv("VKATTN_VALIDATION");
  if (env && std::string(env) == "0") return false;
  uint32_t n = 0;
  vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  vkEnumerateInstanceLayerProperties(&n, layers.data());
  for (const auto& l : layers)
    if (std::string(l.layerName) == "VK_LAYER_KHRONOS_validation") return true;
  return false;
}

// A Vulkan 1.3 instance; with `log`, validated where the layer is installed.
inline VkInstance create_instance(ValidationLog* log = nullptr) {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.apiVersion = VK_API_VERSION_1_3;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  const char* layer = "VK_LAYER_KHRONOS_validation";
  const char* extension = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
  const bool validate = log && validation_wanted();
  if (validate) {
    ici.enabledLayerCount = ici.enabledExtensionCount = 1;
    ici.ppEnabledLayerNames = &layer;
    ici.ppEnabledExtensionNames = &extension;
  }
  VkInstance instance = VK_NULL_HANDLE;
  vk_ok(vkCreateInstance(&ici, nullptr, &instance), "the application's vkCreateInstance");
  if (validate) {
    VkDebugUtilsMessengerCreateInfoEXT mci{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
    mci.pfnUserCallback = log_validation_error;
    mci.pUserData = log;
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT"));
    vk_ok(create(instance, &mci, nullptr, &log->messenger), "vkCreateDebugUtilsMessengerEXT");
    log->enabled = true;
  }
  return instance;
}

// Destroys the instance, and fails if the layer reported any error.
inline void destroy_instance(VkInstance instance, ValidationLog* log = nullptr) {
  if (log && log->messenger) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT"));
    destroy(instance, log->messenger, nullptr);
  }
  vkDestroyInstance(instance, nullptr);
  if (!log) return;
  for (const auto& e : log->errors) std::fprintf(stderr, "validation error: %s\n", e.c_str());
  check(log->errors.empty(), "no validation errors");
}

inline uint32_t count_physical_devices(VkInstance instance) {
  uint32_t n = 0;
  vk_ok(vkEnumeratePhysicalDevices(instance, &n, nullptr), "the application's vkEnumeratePhysicalDevices");
  return n;
}

struct OwnDevice {
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  uint32_t family = 0;
  VkQueue queue = VK_NULL_HANDLE;
  VkCommandPool pool = VK_NULL_HANDLE;

  // On the first Vulkan 1.3 device, with a compute queue; `features` is
  // VkDeviceCreateInfo::pNext (null: no features).
  OwnDevice(VkInstance instance, const void* features) {
    uint32_t n = count_physical_devices(instance);
    std::vector<VkPhysicalDevice> devices(n);
    vk_ok(vkEnumeratePhysicalDevices(instance, &n, devices.data()), "vkEnumeratePhysicalDevices");
    for (VkPhysicalDevice d : devices) {
      VkPhysicalDeviceProperties p;
      vkGetPhysicalDeviceProperties(d, &p);
      if (p.apiVersion >= VK_API_VERSION_1_3) { physical = d; break; }
    }
    check(physical != VK_NULL_HANDLE, "a Vulkan 1.3 device");
    uint32_t nf = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &nf, nullptr);
    std::vector<VkQueueFamilyProperties> families(nf);
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &nf, families.data());
    while (family < nf && !(families[family].queueFlags & VK_QUEUE_COMPUTE_BIT)) ++family;
    check(family < nf, "a queue family with compute");
    float priority = 1.0f;
    VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qci.queueFamilyIndex = family;
    qci.queueCount = 1;
    qci.pQueuePriorities = &priority;
    VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.pNext = features;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    vk_ok(vkCreateDevice(physical, &dci, nullptr, &device), "the application's vkCreateDevice");
    vkGetDeviceQueue(device, family, 0, &queue);
    VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pci.queueFamilyIndex = family;
    vk_ok(vkCreateCommandPool(device, &pci, nullptr, &pool), "vkCreateCommandPool");
  }
  ~OwnDevice() {
    vkDestroyCommandPool(device, pool, nullptr);
    vkDestroyDevice(device, nullptr);
  }
  OwnDevice(const OwnDevice&) = delete;
  OwnDevice& operator=(const OwnDevice&) = delete;

  // Records a command buffer of its own, submits it to its queue with a fence of its own and waits.
  void submit_and_wait(const std::function<void(VkCommandBuffer)>& record) {
    VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cai.commandPool = pool;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    VkCommandBuffer cmd;
    vk_ok(vkAllocateCommandBuffers(device, &cai, &cmd), "vkAllocateCommandBuffers");
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vk_ok(vkBeginCommandBuffer(cmd, &begin), "vkBeginCommandBuffer");
    record(cmd);
    vk_ok(vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
    VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    vk_ok(vkCreateFence(device, &fci, nullptr, &fence), "vkCreateFence");
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &cmd;
    vk_ok(vkQueueSubmit(queue, 1, &submit, fence), "the application's vkQueueSubmit");
    vk_ok(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    vkDestroyFence(device, fence, nullptr);
    vkFreeCommandBuffers(device, pool, 1, &cmd);
  }
};

}  // namespace consumer
