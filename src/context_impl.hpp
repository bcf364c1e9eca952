// Internal: what a Context holds. Buffers, caches and the Context object
// share it (std::shared_ptr), so whichever is destroyed last frees the device.
#pragma once
#include <vkattn/buffer.hpp>
#include <vkattn/context.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "allocation.hpp"
#include "descriptor_arena.hpp"
#include "reporting_op.hpp"
#include "vk.hpp"

namespace vkattn::detail {

class Pipelines;

// Device features vkattn enables (own device) or expects (adopted device).
struct DeviceFeatureChain {
  VkPhysicalDeviceFeatures2 core{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceVulkan11Features v11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan13Features v13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR coopmat{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
  VkPhysicalDeviceCooperativeMatrix2FeaturesNV coopmat2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV};
  VkPhysicalDeviceShaderBfloat16FeaturesKHR bf16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR executables{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  // Links the structs whose extensions are present.
  void link(bool has_coopmat, bool has_coopmat2, bool has_bf16, bool has_executables);
  // Copies the features an application's chain enables into the members
  // (structs of the types above, found by sType; links are kept); those it
  // lacks stay off.
  void copy_enabled(const VkPhysicalDeviceFeatures2& chain);
};

// What a device lacks of the features the kernels need ("" when nothing).
std::string missing_required_features(const DeviceFeatureChain& f);
// The physical device's queue families (vkGetPhysicalDeviceQueueFamilyProperties).
std::vector<VkQueueFamilyProperties> queue_families(const VkFunctions& vk, VkPhysicalDevice pd);

// Which of the status buffer's slots a dispatch reports into: synchronous
// ops, which run one at a time, have their own, so that their errors reach
// the call that caused them (ContextImpl::sync_ops says whose); ops recorded
// into the caller's command buffers have one per ReportingOp, which
// Context::check_device_status reads, so that a report names its op.
enum class StatusSlot : uint32_t { synchronous = 0 };
inline constexpr StatusSlot recorded_slot(ReportingOp op) { return static_cast<StatusSlot>(1 + static_cast<uint32_t>(op)); }
inline constexpr uint32_t kStatusSlots = 1 + kReportingOps;
inline constexpr VkDeviceSize kStatusSlotBytes = 256;   // >= any minStorageBufferOffsetAlignment

struct ContextImpl {
  uint64_t id = 0;                                // unique per Context in this process
  ContextOptions options;
  VkFunctions vk;
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical_device = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;                 // synchronous submissions only; null: none allowed
  uint32_t queue_family = 0;
  bool owns_instance = false, owns_device = false;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  std::vector<std::string> device_extensions;   // enabled
  bool pipeline_executable_info = false;         // VK_KHR_pipeline_executable_properties enabled (own device only)
  // Adopted devices: the features the application enabled (null: only the
  // required ones are assumed). Own devices enable everything supported.
  std::unique_ptr<DeviceFeatureChain> adopted_features;
  Capabilities caps;
  VkPhysicalDeviceMemoryProperties memory{};

  std::unique_ptr<Pipelines> pipelines;           // internally synchronised
  Allocation status;                              // kStatusSlots x kStatusSlotBytes, host visible

  // Synchronous submissions: one at a time, under submit_mutex.
  std::mutex submit_mutex;
  std::atomic<std::thread::id> submit_owner{};    // the thread holding submit_mutex, if any
  VkCommandPool command_pool = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  VkCommandBuffer pending_cmd = VK_NULL_HANDLE;   // submitted, not yet seen complete
  DescriptorArena sync_sets;
  Allocation sync_workspace;                      // grows to the largest synchronous op's need
  // Whether sync_workspace's arrival counters are known to be zero: set
  // only once a synchronous split run completed without a report (split runs
  // leave them zero); a call that threw before its submission, or whose
  // kernels reported, leaves it false, and the next call clears them again.
  bool sync_workspace_zeroed = false;
  // The command buffer a synchronous op is recording into, so that its
  // dispatches take the synchronous status slot and descriptor arena.
  std::atomic<VkCommandBuffer> sync_cmd{VK_NULL_HANDLE};
  uint32_t sync_ops = 0;   // bit per ReportingOp that the synchronous submission recorded (under the submit lock)
  // Set when a submission timed out: the context refuses all further work.
  std::atomic<bool> lost{false};
  std::string lost_reason;                        // written once, before `lost`
  // Once `lost`, the timed-out submission may still use any memory, so
  // release() keeps allocations here, and the destructor frees them after
  // waiting for it (staging freed while a copy ran crashed lavapipe).
  mutable std::mutex deferred_mutex;
  mutable std::vector<Allocation> deferred;
  bool destroying = false;                        // set by the destructor once it has waited

  // Context::check_device_status reads and clears a recorded op's report
  // under it, so that of several threads calling it at once one gets it.
  std::mutex recorded_status_mutex;

  // Descriptor sets of ops recorded into the caller's command buffers.
  std::mutex recorded_sets_mutex;
  DescriptorArena recorded_sets;

  mutable std::mutex validation_mutex;
  std::vector<std::string> validation_messages;

  bool use_push_descriptors() const { return caps.push_descriptors && !options.disable_push_descriptors; }
  bool has_extension(std::string_view name) const;
  uint32_t memory_type(uint32_t type_bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid = 0) const;
  // Largest single buffer the library allocates.
  uint64_t max_chunk_bytes() const;
  // Throws vkattn::Error when a timed-out submission made the context unusable.
  void check_usable(std::string_view what) const;
  uint32_t* status_words(StatusSlot slot) const;

  ~ContextImpl();
};

// Records, submits to the context's queue and waits, under the submit lock,
// without looking at the kernels' status words; `check` runs under the same
// lock once the submission completed (Context::submit_and_wait reads the
// synchronous status slot there).
void submit_and_wait(ContextImpl& impl, const std::function<void(VkCommandBuffer)>& record,
                     const std::function<void()>& check = {});

// Throws the error a status slot holds (and clears it), if any.
void throw_status(ContextImpl& impl, StatusSlot slot);

// Fills caps (and memory) for physical_device; `enabled_exts` decides which
// extension-backed capabilities count. Defined in capabilities.cpp.
void query_capabilities(ContextImpl& impl, const std::vector<std::string>& enabled_exts);

// The shared state behind a Context (throws for a moved-from one).
std::shared_ptr<ContextImpl> shared_impl(const Context& ctx);

}  // namespace vkattn::detail
