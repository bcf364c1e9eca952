// vkattn::Context: the device vkattn runs on, created by the library or
// adopted from the application, with its pipelines and capability report.
#pragma once
#include <vkattn/capabilities.hpp>
#include <vulkan/vulkan_core.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace vkattn {

struct ContextOptions {
  // Use this path for every kernel instead of the best the device has. Forcing a
  // path the device lacks is an error. Environment: VKATTN_PATH=scalar|coopmat|coopmat2.
  std::optional<Path> force_path;
  // Index into vkEnumeratePhysicalDevices; -1 picks the best (discrete GPU first,
  // then integrated, virtual, CPU). Environment: VKATTN_DEVICE=N.
  int device_index = -1;
  // Enable VK_LAYER_KHRONOS_validation when installed and report its errors
  // (see Context::validation_messages). Environment: VKATTN_VALIDATION=1.
  bool validation = false;
  // Bind buffers with descriptor sets even when push descriptors exist (for testing the fallback).
  bool disable_push_descriptors = false;
  // VkPipelineCache file: read at creation when present, written at destruction.
  // Environment: VKATTN_PIPELINE_CACHE=FILE.
  std::string pipeline_cache_path;
  // Largest single buffer the library allocates (the KV cache is split into chunks
  // of at most this size). 0 = the device's limits. Smaller values exercise chunking.
  uint64_t max_chunk_bytes = 0;

  // Options with every environment override applied.
  ContextOptions with_environment() const;
};

// Handles of an application's Vulkan objects. The context never destroys them.
// The device must have been created with the features in docs (README "Adopting
// a device"): Vulkan 1.3 core with storageBuffer16BitAccess, storageBuffer8BitAccess,
// shaderFloat16, shaderInt8, shaderInt64, bufferDeviceAddress, vulkanMemoryModel;
// cooperative-matrix paths need their extensions listed in enabled_device_extensions.
struct AdoptInfo {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical_device = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;           // a queue with compute; synchronous ops submit here
  uint32_t queue_family = 0;
  std::vector<std::string> enabled_device_extensions;
  PFN_vkGetInstanceProcAddr get_instance_proc_addr = nullptr;   // null: load libvulkan
};

namespace detail { struct ContextImpl; }

class Context {
 public:
  // Creates an instance and device of its own.
  explicit Context(ContextOptions options = {});
  // Works on the application's device.
  static Context adopt(const AdoptInfo& info, ContextOptions options = {});
  ~Context();
  Context(Context&&) noexcept;
  Context& operator=(Context&&) noexcept;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Capabilities& capabilities() const;
  // The path a kernel runs on (forced, or the best the device and kernel have).
  Path path_for(std::string_view kernel) const;
  // Every kernel the library has, with the paths it has modules for.
  std::vector<std::pair<std::string, std::vector<std::string>>> kernels() const;
  const ContextOptions& options() const;

  VkInstance instance() const;
  VkPhysicalDevice physical_device() const;
  VkDevice device() const;
  VkQueue queue() const;
  uint32_t queue_family() const;
  bool owns_device() const;

  // Records work through `record`, submits it to the context's queue and waits.
  // Then checks the status that kernels report (see check_device_status).
  void submit_and_wait(const std::function<void(VkCommandBuffer)>& record);
  // Kernels that find bad device-side input (a slot beyond the cache, say) record
  // it in a status word instead of touching memory out of bounds. Synchronous ops
  // check it themselves; after running recorded ops, call this once their
  // submission has completed: it throws vkattn::Error describing the first problem
  // and clears the status.
  void check_device_status();
  // With descriptor-set binding (no push descriptors), sets recorded into the
  // caller's command buffers stay allocated until this is called; call it when
  // those submissions have completed.
  void release_recorded_descriptor_sets();

  // Validation-layer errors seen so far (only with ContextOptions::validation).
  std::vector<std::string> validation_messages() const;
  void clear_validation_messages();
  bool validation_enabled() const;

  // Writes the pipeline cache file now (it is also written on destruction).
  void save_pipeline_cache() const;
  std::size_t pipelines_created() const;

  detail::ContextImpl& impl() { return *impl_; }
  const detail::ContextImpl& impl() const { return *impl_; }

 private:
  struct AdoptTag {};
  explicit Context(AdoptTag);
  std::unique_ptr<detail::ContextImpl> impl_;
};

}  // namespace vkattn
