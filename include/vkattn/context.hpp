// vkattn::Context: the device vkattn runs on, created by the library or
// adopted from the application, with its pipelines and capability report.
//
// Threads. A Context may be used by any number of threads at once, except
// for its destruction and move: they may record ops into different command
// buffers, create plans, caches and buffers, and run synchronous calls (which
// take turns: one submission at a time). A command buffer is the caller's to
// synchronise, as Vulkan requires. Plans are immutable and may be shared.
//
// Lifetime. Buffers and caches keep the Context's device alive, so they may
// be destroyed before or after the Context object. Destroying any object that
// owns device memory frees it at once: the caller must first make sure no
// pending command buffer uses it (as for any Vulkan object). An adopted
// device, instance and queue must outlive every vkattn object made on them.
//
// Submissions. vkattn submits only inside synchronous calls (the ops'
// synchronous forms, Context::submit_and_wait, Buffer::upload/download/fill,
// PagedKvCache::read_blocks/write_blocks/fill, a cache's creation where
// its chunk table cannot be mapped, and the Context's own setup, where a
// device with cooperative matrices gets one dispatch that finds the order of
// a matrix's elements: Capabilities::coopmat_register_order), to the
// Context's queue, and waits for that submission alone. Recorded ops never
// submit, allocate device memory or wait.
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
  // then integrated, virtual, CPU); any other negative value is an error.
  // Environment: VKATTN_DEVICE=N.
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
  // How long a synchronous call waits for its submission: 0 = no deadline (a
  // hung GPU then shows up as VK_ERROR_DEVICE_LOST from the driver). When a
  // deadline passes, the call throws, the Context becomes unusable (every
  // later call throws) and nothing the submission may still use is freed
  // until the Context is destroyed, which waits for it.
  uint64_t submit_timeout_ns = 0;

  // Options with every environment override applied.
  ContextOptions with_environment() const;
};

// Handles of an application's Vulkan objects. The context never destroys them.
// The device must have been created with Vulkan 1.3 and the features the
// kernels need: storageBuffer16BitAccess, storageBuffer8BitAccess,
// shaderFloat16, shaderInt16, shaderInt64, bufferDeviceAddress,
// vulkanMemoryModel, vulkanMemoryModelDeviceScope, maintenance4 (README
// "Adopting a device"). Optional ones (subgroupSizeControl with
// computeFullSubgroups, cooperative matrices, bfloat16) are used only when
// enabled_features says they were enabled and their extensions are listed.
struct AdoptInfo {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical_device = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  // A queue with compute that vkattn's synchronous calls submit to (see
  // "Submissions" above); the application must not use it from another thread
  // during those calls. VK_NULL_HANDLE: vkattn never submits, and synchronous
  // calls throw (an engine that only records needs none).
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  std::vector<std::string> enabled_device_extensions;
  // The feature chain the application gave vkCreateDevice (VkPhysicalDeviceFeatures2
  // and the structs linked from it), read during adopt() only: a required
  // feature missing there is an error, an optional one there is used. Null:
  // vkattn trusts that the required features were enabled and uses no
  // optional one (so no matrix path).
  const VkPhysicalDeviceFeatures2* enabled_features = nullptr;
  // Where vkattn loads its Vulkan entry points from (the application's loader
  // or volk's vkGetInstanceProcAddr); null: libvulkan.so.1. vkattn defines no
  // global Vulkan symbols, so it never replaces the application's.
  PFN_vkGetInstanceProcAddr get_instance_proc_addr = nullptr;
};

class Context;
namespace detail {
struct ContextImpl;
std::shared_ptr<ContextImpl> shared_impl(const Context& ctx);
}  // namespace detail

class Context {
 public:
  // Creates an instance and device (and queue) of its own.
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
  // Unique in this process: BufferRef::context_id of this Context's buffers.
  uint64_t id() const;
  // False once a submission has timed out (ContextOptions::submit_timeout_ns).
  bool usable() const;

  // Records work through `record`, submits it to the context's queue and waits.
  // Then throws the first device-side error that work reported (see
  // check_device_status): each synchronous call sees only its own. `record`
  // records ops in their recorded forms: a synchronous call made inside it
  // (this, an op's synchronous form, Buffer::upload, ...) throws; one made
  // by another thread that `record` waits for never returns (synchronous
  // calls take turns). Ops recorded into another command buffer, a secondary
  // one that `record` executes included, report as recorded ops do: through
  // check_device_status, not here.
  void submit_and_wait(const std::function<void(VkCommandBuffer)>& record);
  // Kernels that find bad device-side input (a slot beyond the cache, a block
  // table or query_start_loc corrupted on the device) record it in a status
  // word instead of touching memory out of bounds. Ops recorded into the
  // caller's command buffers keep one status per op (paged_attention,
  // prefix_prefill with its fused cache write, block_sparse_attention,
  // build_block_mask, write_kv_cache), holding the first problem each met
  // in any command buffer of any thread. This throws vkattn::Error
  // describing one of them, named by its op, and clears it (call again for
  // the next). It may be called at any time, while such submissions run
  // too: a kernel publishes a report only after its details, so a report is
  // read whole or not yet; once every submission holding such ops has
  // completed, every report they made is there (an op still running may
  // report again after its report is cleared). Of several threads calling
  // it at once, one gets each report. It reads mapped memory: no wait, no
  // submission.
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
  // Pipelines the ops have created so far (prepare_* and first uses), not
  // counting the Context's own setup.
  std::size_t pipelines_created() const;

  // Internal state (for vkattn's tools and tests). Throws for a moved-from Context.
  detail::ContextImpl& impl() const;

 private:
  struct AdoptTag {};
  explicit Context(AdoptTag);
  friend std::shared_ptr<detail::ContextImpl> detail::shared_impl(const Context&);
  std::shared_ptr<detail::ContextImpl> impl_;
};

}  // namespace vkattn
