// Internal: compute pipelines, created on first use from (kernel, path,
// specialization constants) and cached for the context's lifetime, backed by
// an optional VkPipelineCache file.
#pragma once
#include <vkattn/capabilities.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "vk.hpp"

namespace vkattn::detail {

struct ContextImpl;

struct Pipeline {
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  uint32_t bindings = 0;      // storage buffers, binding 0 being the status buffer
  uint32_t push_size = 0;
  std::string module_path;    // the module used: "scalar", ..., or "universal"
};

struct PipelineRequest {
  std::string_view kernel;
  Path path = Path::scalar;
  std::span<const uint32_t> spec;   // constant_id i = spec[i]
  uint32_t bindings = 0;            // including the status buffer at binding 0
  uint32_t push_size = 0;
  // The subgroup size the kernel's code assumes (0: any). Asked of the
  // driver where it offers subgroup size control; the kernels also check it.
  uint32_t required_subgroup_size = 0;
  // The Context's own setup (the matrix element order probe): not counted by
  // created(), which tells engines how many pipelines their ops needed.
  bool setup = false;
};

// Thread-safe: get() may be called from several threads at once; the
// pipelines it returns live as long as the Context.
class Pipelines {
 public:
  explicit Pipelines(ContextImpl& impl);
  ~Pipelines();
  const Pipeline& get(const PipelineRequest& request);
  void save_file() const;
  std::size_t created() const;
  // Whether a pipeline of `kernel` has been created (tests: which module an op chose).
  bool created_of(std::string_view kernel) const;

 private:
  VkDescriptorSetLayout set_layout(uint32_t bindings);
  VkShaderModule shader_module(std::string_view kernel, std::string_view path, std::string* used_path);
  ContextImpl& impl_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  // Looked up on every recorded dispatch, so without allocating: by a hash
  // of the request, every entry of a bucket compared in full.
  struct Entry {
    std::string kernel;
    std::vector<uint32_t> spec;
    uint32_t path, bindings, push_size, subgroup_size;
    Pipeline pipeline;
    bool matches(const PipelineRequest& r) const;
  };
  std::unordered_map<uint64_t, std::vector<std::unique_ptr<Entry>>> pipelines_;
  std::map<uint32_t, VkDescriptorSetLayout> set_layouts_;
  std::map<std::string, VkShaderModule> modules_;
  std::size_t created_ = 0;
  std::string file_;          // the pipeline cache file, symlinks resolved; "" for none
  mutable std::mutex mutex_;
};

// The pipeline cache file to use for `path` (ContextOptions::pipeline_cache_path):
// `path` with symbolic links resolved (a link to a file not created yet
// included). Throws vkattn::Error unless it names a regular file or a file
// that does not exist yet in an existing directory.
std::string pipeline_cache_file(const std::string& path);

}  // namespace vkattn::detail
