// Context: creating or adopting the device, and the validation layers.
// Submission and device status: submission.cpp.
#include <vkattn/context.hpp>
#include <vkattn/error.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "abi/common.h"
#include "context_impl.hpp"
#include "matrix_element_order.hpp"
#include "pipelines.hpp"
#if VKATTN_PHASE_PROFILE
#include "phase_profile.hpp"
#endif
#include "shader_registry.hpp"

namespace vkattn {
namespace detail {

std::vector<VkQueueFamilyProperties> queue_families(const VkFunctions& vk, VkPhysicalDevice pd) {
  uint32_t n = 0;
  vk.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
  std::vector<VkQueueFamilyProperties> fams(n);
  vk.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, fams.data());
  return fams;
}

namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

std::atomic<uint64_t> next_context_id{1};

VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                     VkDebugUtilsMessageTypeFlagsEXT,
                                                     const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    auto* impl = static_cast<ContextImpl*>(user);
    std::lock_guard lock(impl->validation_mutex);
    impl->validation_messages.emplace_back(data->pMessage ? data->pMessage : "(no message)");
  }
  return VK_FALSE;
}

bool instance_layer_present(const VkFunctions& vk, const char* name) {
  uint32_t n = 0;
  vk.vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  vk.vkEnumerateInstanceLayerProperties(&n, layers.data());
  return std::any_of(layers.begin(), layers.end(), [&](auto& l) { return std::strcmp(l.layerName, name) == 0; });
}

bool instance_extension_present(const VkFunctions& vk, const char* name) {
  uint32_t n = 0;
  vk.vkEnumerateInstanceExtensionProperties(nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vk.vkEnumerateInstanceExtensionProperties(nullptr, &n, exts.data());
  return std::any_of(exts.begin(), exts.end(), [&](auto& e) { return std::strcmp(e.extensionName, name) == 0; });
}

std::vector<std::string> device_extensions_of(const VkFunctions& vk, VkPhysicalDevice pd) {
  uint32_t n = 0;
  vk.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vk.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, exts.data());
  std::vector<std::string> names;
  for (auto& e : exts) names.emplace_back(e.extensionName);
  return names;
}

bool contains(const std::vector<std::string>& v, std::string_view s) { return std::find(v.begin(), v.end(), s) != v.end(); }

// Queue family with compute, preferring one with timestamps. -1 if none.
int compute_queue_family(const VkFunctions& vk, VkPhysicalDevice pd) {
  const std::vector<VkQueueFamilyProperties> fams = queue_families(vk, pd);
  int best = -1;
  for (uint32_t i = 0; i < fams.size(); ++i) {
    if (!(fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (fams[i].timestampValidBits > 0) return static_cast<int>(i);
    if (best < 0) best = static_cast<int>(i);
  }
  return best;
}

// What a device lacks for vkattn's baseline, or "" when it is usable.
std::string unsuitable_reason(const VkFunctions& vk, VkPhysicalDevice pd) {
  VkPhysicalDeviceProperties props;
  vk.vkGetPhysicalDeviceProperties(pd, &props);
  if (props.apiVersion < VK_API_VERSION_1_3)
    return "Vulkan " + std::to_string(VK_API_VERSION_MAJOR(props.apiVersion)) + "." +
           std::to_string(VK_API_VERSION_MINOR(props.apiVersion)) + " (1.3 needed)";
  DeviceFeatureChain f;
  f.link(false, false, false, false);
  vk.vkGetPhysicalDeviceFeatures2(pd, &f.core);
  std::string missing = missing_required_features(f);
  if (compute_queue_family(vk, pd) < 0) missing += std::string(missing.empty() ? "" : ", ") + "a compute queue";
  return missing.empty() ? "" : "lacks " + missing;
}

int device_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
    default: return 0;
  }
}

VkPhysicalDevice choose_physical_device(const VkFunctions& vk, VkInstance instance, int index) {
  uint32_t n = 0;
  vk_check(vk.vkEnumeratePhysicalDevices(instance, &n, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> devs(n);
  vk_check(vk.vkEnumeratePhysicalDevices(instance, &n, devs.data()), "vkEnumeratePhysicalDevices");
  if (n == 0) throw Error("no Vulkan device found: install a driver (for a CPU device, Debian's mesa-vulkan-drivers)");
  auto describe = [&](uint32_t i) {
    VkPhysicalDeviceProperties p;
    vk.vkGetPhysicalDeviceProperties(devs[i], &p);
    return std::to_string(i) + ": " + p.deviceName;
  };
  if (index < -1)
    throw Error("ContextOptions::device_index = " + std::to_string(index) +
                " is not a device index: expected -1 (the best device) or 0.." + std::to_string(n - 1));
  if (index >= 0) {
    if (static_cast<uint32_t>(index) >= n) {
      std::string list;
      for (uint32_t i = 0; i < n; ++i) list += (i ? ", " : "") + describe(i);
      throw Error("device index " + std::to_string(index) + " is out of range: expected 0.." + std::to_string(n - 1) + " (" + list + ")");
    }
    std::string why = unsuitable_reason(vk, devs[index]);
    if (!why.empty()) throw Error("device " + describe(index) + " cannot run vkattn: it " + why);
    return devs[index];
  }
  VkPhysicalDevice best = VK_NULL_HANDLE;
  int best_rank = -1;
  std::string rejected;
  for (uint32_t i = 0; i < n; ++i) {
    std::string why = unsuitable_reason(vk, devs[i]);
    if (!why.empty()) { rejected += "\n  " + describe(i) + " " + why; continue; }
    VkPhysicalDeviceProperties p;
    vk.vkGetPhysicalDeviceProperties(devs[i], &p);
    if (device_rank(p.deviceType) > best_rank) { best = devs[i]; best_rank = device_rank(p.deviceType); }
  }
  if (!best) throw Error("no Vulkan device can run vkattn:" + rejected);
  return best;
}

}  // namespace

void DeviceFeatureChain::link(bool has_coopmat, bool has_coopmat2, bool has_bf16, bool has_executables) {
  core.pNext = &v11;
  v11.pNext = &v12;
  v12.pNext = &v13;
  void** tail = &v13.pNext;
  if (has_coopmat) { *tail = &coopmat; tail = &coopmat.pNext; }
  if (has_coopmat2) { *tail = &coopmat2; tail = &coopmat2.pNext; }
  if (has_bf16) { *tail = &bf16; tail = &bf16.pNext; }
  if (has_executables) { *tail = &executables; tail = &executables.pNext; }
  *tail = nullptr;
}

std::string missing_required_features(const DeviceFeatureChain& f) {
  std::string missing;
  auto need = [&](VkBool32 ok, const char* name) { if (!ok) missing += std::string(missing.empty() ? "" : ", ") + name; };
  need(f.v11.storageBuffer16BitAccess, "storageBuffer16BitAccess");
  need(f.v12.storageBuffer8BitAccess, "storageBuffer8BitAccess");
  need(f.v12.shaderFloat16, "shaderFloat16");
  need(f.core.features.shaderInt16, "shaderInt16");
  need(f.core.features.shaderInt64, "shaderInt64");
  need(f.v12.bufferDeviceAddress, "bufferDeviceAddress");
  need(f.v12.vulkanMemoryModel, "vulkanMemoryModel");
  need(f.v12.vulkanMemoryModelDeviceScope, "vulkanMemoryModelDeviceScope");
  need(f.v13.maintenance4, "maintenance4");
  return missing;
}

void DeviceFeatureChain::copy_enabled(const VkPhysicalDeviceFeatures2& chain) {
  core.features = chain.features;
  // Each struct's features sit after its sType and pNext.
  auto copy = [](auto& into, const VkBaseInStructure* from) {
    void* keep = into.pNext;
    std::memcpy(&into, from, sizeof into);
    into.pNext = keep;
  };
  for (auto* s = static_cast<const VkBaseInStructure*>(chain.pNext); s; s = s->pNext) {
    switch (s->sType) {
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES: copy(v11, s); break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES: copy(v12, s); break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES: copy(v13, s); break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR: copy(coopmat, s); break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV: copy(coopmat2, s); break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR: copy(bf16, s); break;
      // The structs of the features Vulkan 1.1-1.3 promoted, which a device
      // may be created with instead of the VulkanNNFeatures ones (not both:
      // the spec forbids it), each read into the VulkanNNFeatures fields.
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES: {
        const auto* f = reinterpret_cast<const VkPhysicalDevice16BitStorageFeatures*>(s);
        v11.storageBuffer16BitAccess |= f->storageBuffer16BitAccess;
        v11.uniformAndStorageBuffer16BitAccess |= f->uniformAndStorageBuffer16BitAccess;
        v11.storagePushConstant16 |= f->storagePushConstant16;
        v11.storageInputOutput16 |= f->storageInputOutput16;
        break;
      }
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES: {
        const auto* f = reinterpret_cast<const VkPhysicalDevice8BitStorageFeatures*>(s);
        v12.storageBuffer8BitAccess |= f->storageBuffer8BitAccess;
        v12.uniformAndStorageBuffer8BitAccess |= f->uniformAndStorageBuffer8BitAccess;
        v12.storagePushConstant8 |= f->storagePushConstant8;
        break;
      }
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES: {
        const auto* f = reinterpret_cast<const VkPhysicalDeviceShaderFloat16Int8Features*>(s);
        v12.shaderFloat16 |= f->shaderFloat16;
        v12.shaderInt8 |= f->shaderInt8;
        break;
      }
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES: {
        const auto* f = reinterpret_cast<const VkPhysicalDeviceBufferDeviceAddressFeatures*>(s);
        v12.bufferDeviceAddress |= f->bufferDeviceAddress;
        v12.bufferDeviceAddressCaptureReplay |= f->bufferDeviceAddressCaptureReplay;
        v12.bufferDeviceAddressMultiDevice |= f->bufferDeviceAddressMultiDevice;
        break;
      }
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES: {
        const auto* f = reinterpret_cast<const VkPhysicalDeviceVulkanMemoryModelFeatures*>(s);
        v12.vulkanMemoryModel |= f->vulkanMemoryModel;
        v12.vulkanMemoryModelDeviceScope |= f->vulkanMemoryModelDeviceScope;
        v12.vulkanMemoryModelAvailabilityVisibilityChains |= f->vulkanMemoryModelAvailabilityVisibilityChains;
        break;
      }
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SCALAR_BLOCK_LAYOUT_FEATURES:
        v12.scalarBlockLayout |= reinterpret_cast<const VkPhysicalDeviceScalarBlockLayoutFeatures*>(s)->scalarBlockLayout;
        break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SUBGROUP_EXTENDED_TYPES_FEATURES:
        v12.shaderSubgroupExtendedTypes |=
            reinterpret_cast<const VkPhysicalDeviceShaderSubgroupExtendedTypesFeatures*>(s)->shaderSubgroupExtendedTypes;
        break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES: {
        const auto* f = reinterpret_cast<const VkPhysicalDeviceSubgroupSizeControlFeatures*>(s);
        v13.subgroupSizeControl |= f->subgroupSizeControl;
        v13.computeFullSubgroups |= f->computeFullSubgroups;
        break;
      }
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_FEATURES:
        v13.maintenance4 |= reinterpret_cast<const VkPhysicalDeviceMaintenance4Features*>(s)->maintenance4;
        break;
      default: break;
    }
  }
}

bool ContextImpl::has_extension(std::string_view name) const { return contains(device_extensions, name); }

uint32_t ContextImpl::memory_type(uint32_t type_bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid) const {
  for (int pass = 0; pass < 2; ++pass) {   // first without `avoid` flags, then with
    for (uint32_t i = 0; i < memory.memoryTypeCount; ++i) {
      VkMemoryPropertyFlags f = memory.memoryTypes[i].propertyFlags;
      if ((type_bits & (1u << i)) && (f & want) == want && (pass == 1 || (f & avoid) == 0)) return i;
    }
  }
  return UINT32_MAX;
}

uint64_t ContextImpl::max_chunk_bytes() const {
  uint64_t m = std::min({caps.max_storage_buffer_range, caps.max_memory_allocation_size, caps.max_buffer_size});
  if (options.max_chunk_bytes) m = std::min<uint64_t>(m, options.max_chunk_bytes);
  return m;
}

void ContextImpl::check_usable(std::string_view what) const {
  if (lost.load(std::memory_order_acquire))
    throw Error(std::string(what) + ": the Context is unusable since a submission timed out (" + lost_reason +
                "); destroy it and create a new one");
}

uint32_t* ContextImpl::status_words(StatusSlot slot) const {
  return reinterpret_cast<uint32_t*>(static_cast<char*>(status.mapped) + kStatusSlotBytes * static_cast<uint32_t>(slot));
}

ContextImpl::~ContextImpl() {
#if VKATTN_PHASE_PROFILE
  if (device && owns_device) {   // (Context::adopt refuses in this build)
    vk.vkDeviceWaitIdle(device);
    detail::phase_profile_print(*this);
  }
#endif
  if (!device) {
    if (messenger) vk.vkDestroyDebugUtilsMessengerEXT(instance, messenger, nullptr);
    if (owns_instance) vk.vkDestroyInstance(instance, nullptr);
    return;
  }
  // Nothing below may be in use: an own device is waited for as a whole; on
  // an adopted one only vkattn's own submission (the application's recorded
  // work is the application's to wait for). No deadline: a hung GPU turns
  // into VK_ERROR_DEVICE_LOST, after which objects may be destroyed.
  if (owns_device) vk.vkDeviceWaitIdle(device);
  else if (pending_cmd) vk.vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX);
  destroying = true;
  for (auto& a : deferred) release(*this, a);   // kept while a timed-out submission might use them
  if (pipelines) pipelines->save_file();
  pipelines.reset();
  release(*this, status);
  release(*this, sync_workspace);
  recorded_sets.destroy(vk, device);
  sync_sets.destroy(vk, device);
  if (fence) vk.vkDestroyFence(device, fence, nullptr);
  if (command_pool) vk.vkDestroyCommandPool(device, command_pool, nullptr);   // frees pending_cmd too
  if (owns_device) vk.vkDestroyDevice(device, nullptr);
  if (messenger) vk.vkDestroyDebugUtilsMessengerEXT(instance, messenger, nullptr);
  if (owns_instance) vk.vkDestroyInstance(instance, nullptr);
}

// The parts shared by own and adopted contexts, once the handles are set.
void finish_setup(ContextImpl& impl) {
  impl.id = next_context_id.fetch_add(1);
  query_capabilities(impl, impl.device_extensions);
  if (impl.options.force_path) {
    std::string missing = impl.caps.missing_for(*impl.options.force_path);
    if (!missing.empty())
      throw Error("path '" + std::string(path_name(*impl.options.force_path)) + "' was forced, but device '" +
                  impl.caps.device_name + "' lacks " + missing);
  }
  VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = impl.queue_family;
  vk_check(impl.vk.vkCreateCommandPool(impl.device, &pool, nullptr, &impl.command_pool), "vkCreateCommandPool");
  VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  vk_check(impl.vk.vkCreateFence(impl.device, &fence, nullptr, &impl.fence), "vkCreateFence");
  impl.pipelines = std::make_unique<Pipelines>(impl);
  impl.status = allocate(impl, kStatusSlots * kStatusSlotBytes, MemoryKind::host_visible, "the Context's status words");
  std::memset(impl.status.mapped, 0, kStatusSlots * kStatusSlotBytes);
  impl.caps.coopmat_register_order = probe_register_order(impl);
}

// A device index from text ("0", "1", ...): exactly a number in int's range
// (strtoll alone would also take leading blanks and a sign).
int parse_device_index(const std::string& text, const std::string& what) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) || *end || errno == ERANGE || v < 0 ||
      v > std::numeric_limits<int>::max())
    throw Error(what + "='" + text + "' is not a device index (expected 0, 1, ...)");
  return static_cast<int>(v);
}

}  // namespace detail

using namespace detail;

ContextOptions ContextOptions::with_environment() const {
  ContextOptions o = *this;
  if (const char* p = std::getenv("VKATTN_PATH"); p && *p) o.force_path = parse_path(p);
  if (const char* d = std::getenv("VKATTN_DEVICE"); d && *d) o.device_index = parse_device_index(d, "VKATTN_DEVICE");
  if (const char* v = std::getenv("VKATTN_VALIDATION"); v && *v) o.validation = std::string(v) != "0";
  if (const char* c = std::getenv("VKATTN_PIPELINE_CACHE"); c && *c) o.pipeline_cache_path = c;
  return o;
}

Context::Context(ContextOptions options) : impl_(std::make_shared<ContextImpl>()) {
  auto& impl = *impl_;
  impl.options = options.with_environment();
  auto& vk = impl.vk;
  vk.load_global(nullptr);

  std::vector<const char*> layers, exts;
  bool validation = impl.options.validation && instance_layer_present(vk, kValidationLayer);
  if (validation) layers.push_back(kValidationLayer);
  bool debug_utils = validation && instance_extension_present(vk, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  if (debug_utils) exts.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "vkattn";
  app.pEngineName = "vkattn";
  app.apiVersion = VK_API_VERSION_1_3;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  ici.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ici.ppEnabledLayerNames = layers.data();
  ici.enabledExtensionCount = static_cast<uint32_t>(exts.size());
  ici.ppEnabledExtensionNames = exts.data();
  VkDebugUtilsMessengerCreateInfoEXT dci{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  dci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
  dci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
  dci.pfnUserCallback = on_validation_message;
  dci.pUserData = &impl;
  if (debug_utils) ici.pNext = &dci;   // also reports errors of instance creation itself
  vk_check(vk.vkCreateInstance(&ici, nullptr, &impl.instance), "vkCreateInstance");
  impl.owns_instance = true;
  vk.load_instance(impl.instance);
  if (debug_utils)
    vk_check(vk.vkCreateDebugUtilsMessengerEXT(impl.instance, &dci, nullptr, &impl.messenger), "vkCreateDebugUtilsMessengerEXT");

  impl.physical_device = choose_physical_device(vk, impl.instance, impl.options.device_index);
  impl.queue_family = static_cast<uint32_t>(compute_queue_family(vk, impl.physical_device));

  auto available = device_extensions_of(vk, impl.physical_device);
  for (const char* e : {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME,
                        VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME, VK_KHR_SHADER_BFLOAT16_EXTENSION_NAME,
                        VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME,
                        VK_EXT_MEMORY_BUDGET_EXTENSION_NAME, VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME,
                        VK_ARM_SHADER_CORE_BUILTINS_EXTENSION_NAME})
    if (contains(available, e)) impl.device_extensions.emplace_back(e);
#if VKATTN_PHASE_PROFILE
  if (contains(available, VK_KHR_SHADER_CLOCK_EXTENSION_NAME)) impl.device_extensions.emplace_back(VK_KHR_SHADER_CLOCK_EXTENSION_NAME);
#endif
  // VK_EXT_external_memory_host is unused by the library: on CPU devices it
  // lets tests import guard-paged host memory (tests/guarded_memory.hpp),
  // which is of no use on GPUs, where a read of a guard page is a device fault.
  VkPhysicalDeviceProperties props;
  vk.vkGetPhysicalDeviceProperties(impl.physical_device, &props);
  if (props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU && contains(available, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME))
    impl.device_extensions.emplace_back(VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);

  // Query what is supported, then enable exactly the features the kernels use.
  DeviceFeatureChain have, want;
  bool km = impl.has_extension(VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
  bool nm2 = impl.has_extension(VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME);
  bool bf = impl.has_extension(VK_KHR_SHADER_BFLOAT16_EXTENSION_NAME);
  bool ex = impl.has_extension(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  have.link(km, nm2, bf, ex);
  vk.vkGetPhysicalDeviceFeatures2(impl.physical_device, &have.core);
  want.link(km, nm2, bf, ex);
  // Compiler statistics of our pipelines (registers, spills), for VKATTN_PIPELINE_STATS.
  want.executables.pipelineExecutableInfo = have.executables.pipelineExecutableInfo;
  impl.pipeline_executable_info = ex && have.executables.pipelineExecutableInfo;
  want.core.features.shaderInt64 = have.core.features.shaderInt64;
  want.core.features.shaderInt16 = have.core.features.shaderInt16;
  want.v11.storageBuffer16BitAccess = have.v11.storageBuffer16BitAccess;
  want.v12.storageBuffer8BitAccess = have.v12.storageBuffer8BitAccess;
  want.v12.shaderFloat16 = have.v12.shaderFloat16;
  want.v12.shaderInt8 = have.v12.shaderInt8;
  want.v12.bufferDeviceAddress = have.v12.bufferDeviceAddress;
  want.v12.vulkanMemoryModel = have.v12.vulkanMemoryModel;
  want.v12.vulkanMemoryModelDeviceScope = have.v12.vulkanMemoryModelDeviceScope;
  want.v12.scalarBlockLayout = have.v12.scalarBlockLayout;
  want.v12.shaderSubgroupExtendedTypes = have.v12.shaderSubgroupExtendedTypes;
  want.v13.subgroupSizeControl = have.v13.subgroupSizeControl;
  want.v13.computeFullSubgroups = have.v13.computeFullSubgroups;
  want.v13.maintenance4 = have.v13.maintenance4;
  want.coopmat.cooperativeMatrix = have.coopmat.cooperativeMatrix;
  want.coopmat2.cooperativeMatrixWorkgroupScope = have.coopmat2.cooperativeMatrixWorkgroupScope;
  want.coopmat2.cooperativeMatrixFlexibleDimensions = have.coopmat2.cooperativeMatrixFlexibleDimensions;
  want.coopmat2.cooperativeMatrixReductions = have.coopmat2.cooperativeMatrixReductions;
  want.coopmat2.cooperativeMatrixConversions = have.coopmat2.cooperativeMatrixConversions;
  want.coopmat2.cooperativeMatrixPerElementOperations = have.coopmat2.cooperativeMatrixPerElementOperations;
  want.coopmat2.cooperativeMatrixTensorAddressing = have.coopmat2.cooperativeMatrixTensorAddressing;
  want.coopmat2.cooperativeMatrixBlockLoads = have.coopmat2.cooperativeMatrixBlockLoads;
  want.bf16.shaderBFloat16Type = have.bf16.shaderBFloat16Type;
  want.bf16.shaderBFloat16CooperativeMatrix = have.bf16.shaderBFloat16CooperativeMatrix;

  float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = impl.queue_family;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  std::vector<const char*> ext_ptrs;
  for (auto& e : impl.device_extensions) ext_ptrs.push_back(e.c_str());
  VkDeviceCreateInfo dci2{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci2.pNext = &want.core;
  dci2.queueCreateInfoCount = 1;
  dci2.pQueueCreateInfos = &qci;
  dci2.enabledExtensionCount = static_cast<uint32_t>(ext_ptrs.size());
  dci2.ppEnabledExtensionNames = ext_ptrs.data();
#if VKATTN_PHASE_PROFILE
  VkPhysicalDeviceShaderClockFeaturesKHR clock{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR};
  detail::phase_profile_enable(impl, want.core, clock);
#endif
  vk_check(vk.vkCreateDevice(impl.physical_device, &dci2, nullptr, &impl.device), "vkCreateDevice");
  impl.owns_device = true;
  vk.load_device(impl.device);
  vk.vkGetDeviceQueue(impl.device, impl.queue_family, 0, &impl.queue);
  finish_setup(impl);
}

Context Context::adopt(const AdoptInfo& info, ContextOptions options) {
#if VKATTN_PHASE_PROFILE
  // The profiled prefill modules read the subgroup clock, which only a device
  // the Context creates has enabled (phase_profile_enable): on an adopted one
  // their pipelines would be invalid.
  (void)info;
  (void)options;
  throw Error("Context::adopt: this library is a VKATTN_PHASE_PROFILE build (developers' phase profile), whose kernels need "
              "VK_KHR_shader_clock enabled as only a device the Context creates has it: use Context() or a build without "
              "VKATTN_PHASE_PROFILE");
#else
  if (!info.instance || !info.physical_device || !info.device)
    throw Error("Context::adopt: instance, physical_device and device must all be set (got " +
                std::string(info.instance ? "" : "instance=null ") + (info.physical_device ? "" : "physical_device=null ") +
                (info.device ? "" : "device=null") + ")");
  Context ctx{AdoptTag{}};
  ctx.impl_ = std::make_shared<ContextImpl>();
  auto& impl = *ctx.impl_;
  impl.options = options.with_environment();
  auto& vk = impl.vk;
  vk.load_global(info.get_instance_proc_addr);
  vk.load_instance(info.instance);
  impl.instance = info.instance;
  impl.physical_device = info.physical_device;
  std::string why = unsuitable_reason(vk, info.physical_device);
  if (!why.empty()) throw Error("Context::adopt: the device cannot run vkattn: it " + why);
  if (info.enabled_features) {
    if (info.enabled_features->sType != VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2)
      throw Error("Context::adopt: enabled_features must point at the VkPhysicalDeviceFeatures2 given to vkCreateDevice");
    impl.adopted_features = std::make_unique<DeviceFeatureChain>();
    impl.adopted_features->link(false, false, false, false);
    impl.adopted_features->copy_enabled(*info.enabled_features);
    const std::string missing = missing_required_features(*impl.adopted_features);
    if (!missing.empty())
      throw Error("Context::adopt: the device was created without features the kernels need: " + missing +
                  " (enable them in vkCreateDevice)");
  }
  // The queue family: the Context's command pool is made for it, and with a
  // queue its synchronous calls submit compute work there.
  const std::vector<VkQueueFamilyProperties> family = queue_families(vk, info.physical_device);
  if (info.queue_family >= family.size())
    throw Error("Context::adopt: queue_family = " + std::to_string(info.queue_family) + " is not a queue family of the device (it has " +
                std::to_string(family.size()) + ")");
  if (info.queue && !(family[info.queue_family].queueFlags & VK_QUEUE_COMPUTE_BIT))
    throw Error("Context::adopt: queue_family = " + std::to_string(info.queue_family) +
                " has no compute queues (VK_QUEUE_COMPUTE_BIT): give the family of a queue that runs compute work");
  impl.queue = info.queue;
  impl.queue_family = info.queue_family;
  impl.device_extensions = info.enabled_device_extensions;
  vk.load_device(info.device);
  // An extension listed but not enabled in vkCreateDevice has no entry
  // points: its first use would call a null one (it crashed).
  if (contains(impl.device_extensions, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) && !vk.vkCmdPushDescriptorSetKHR)
    throw Error(std::string("Context::adopt: enabled_device_extensions lists ") + VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME +
                ", but the device gives no vkCmdPushDescriptorSetKHR: list only the extensions vkCreateDevice enabled");
  impl.device = info.device;   // set last: ~ContextImpl touches the device only once it is complete
  finish_setup(impl);
  return ctx;
#endif
}

Context::Context(AdoptTag) {}
Context::~Context() = default;
Context::Context(Context&&) noexcept = default;
Context& Context::operator=(Context&&) noexcept = default;

ContextImpl& Context::impl() const {
  if (!impl_) throw Error("this Context was moved from: use the Context it was moved to");
  return *impl_;
}

std::shared_ptr<ContextImpl> detail::shared_impl(const Context& ctx) {
  ctx.impl();   // throws for a moved-from Context
  return ctx.impl_;
}

const Capabilities& Context::capabilities() const { return impl().caps; }
const ContextOptions& Context::options() const { return impl().options; }
VkInstance Context::instance() const { return impl().instance; }
VkPhysicalDevice Context::physical_device() const { return impl().physical_device; }
VkDevice Context::device() const { return impl().device; }
VkQueue Context::queue() const { return impl().queue; }
uint32_t Context::queue_family() const { return impl().queue_family; }
bool Context::owns_device() const { return impl().owns_device; }
uint64_t Context::id() const { return impl().id; }
bool Context::usable() const { return !impl().lost.load(); }
bool Context::validation_enabled() const { return impl().messenger != VK_NULL_HANDLE; }
std::size_t Context::pipelines_created() const { return impl().pipelines->created(); }
void Context::save_pipeline_cache() const { impl().pipelines->save_file(); }

Path Context::path_for(std::string_view kernel) const {
  const auto& caps = impl().caps;
  // A forced path applies to every kernel that has it (or needs no matrix
  // unit); a kernel without that path's module runs its scalar one.
  if (impl().options.force_path)
    return find_module(kernel, path_name(*impl().options.force_path)) ? *impl().options.force_path : Path::scalar;
  for (Path p : caps.paths)
    if (find_module(kernel, path_name(p))) return p;
  return Path::scalar;
}

std::vector<std::pair<std::string, std::vector<std::string>>> Context::kernels() const {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const auto& m : embedded_modules()) {
    auto it = std::find_if(out.begin(), out.end(), [&](auto& k) { return k.first == m.kernel; });
    if (it == out.end()) it = out.insert(out.end(), {m.kernel, {}});
    it->second.emplace_back(m.path);
  }
  return out;
}

std::vector<std::string> Context::validation_messages() const {
  std::lock_guard lock(impl().validation_mutex);
  return impl().validation_messages;
}

void Context::clear_validation_messages() {
  std::lock_guard lock(impl().validation_mutex);
  impl().validation_messages.clear();
}

}  // namespace vkattn
