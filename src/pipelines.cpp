#include "pipelines.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "context_impl.hpp"
#include "block_sparse_variants.hpp"
#include "shader_registry.hpp"

namespace vkattn::detail {

const EmbeddedModule* find_module(std::string_view kernel, std::string_view path) {
  // Variants' kernels (registered at run time) are named KERNEL@VARIANT.
  if (kernel.find('@') != std::string_view::npos) return find_registered_module(kernel, path);
  const EmbeddedModule* universal = nullptr;
  for (const auto& m : embedded_modules()) {
    if (kernel != m.kernel) continue;
    if (path == m.path) return &m;
    if (std::string_view(m.path) == "universal") universal = &m;
  }
  return universal;
}

namespace {

// Larger files are not read (a pipeline cache of vkattn's kernels is a few MiB).
constexpr off_t kMaxCacheFileBytes = off_t(256) << 20;

// A cache file is used only when its header says it came from this very device
// and driver; anything else (truncated, foreign, too large) is ignored and
// rewritten. Only regular files are opened (pipeline_cache_file checked the
// path; O_NONBLOCK keeps a FIFO swapped in since then from blocking).
std::vector<char> read_cache_file(const std::string& path, const VkPhysicalDeviceProperties& props) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat st {};
  std::vector<char> data;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= kMaxCacheFileBytes) {
    data.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = ::read(fd, data.data() + done, data.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    data.resize(done);
  }
  ::close(fd);
  if (data.size() < sizeof(VkPipelineCacheHeaderVersionOne)) return {};
  VkPipelineCacheHeaderVersionOne h;
  std::memcpy(&h, data.data(), sizeof h);
  if (h.headerVersion != VK_PIPELINE_CACHE_HEADER_VERSION_ONE || h.vendorID != props.vendorID ||
      h.deviceID != props.deviceID || std::memcmp(h.pipelineCacheUUID, props.pipelineCacheUUID, VK_UUID_SIZE) != 0)
    return {};
  return data;
}

// Developer aid: with VKATTN_PIPELINE_STATS=1 (and a device that offers
// VK_KHR_pipeline_executable_properties), each new pipeline's compiler
// statistics (registers, spills, shared memory, ...) go to stderr.
bool want_pipeline_stats(const ContextImpl& impl) {
  const char* v = std::getenv("VKATTN_PIPELINE_STATS");
  return impl.pipeline_executable_info && v && std::string_view(v) == "1";
}

void print_pipeline_stats(const ContextImpl& impl, VkPipeline pipeline, const std::string& what) {
  VkPipelineInfoKHR pi{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
  pi.pipeline = pipeline;
  uint32_t n = 0;
  if (impl.vk.vkGetPipelineExecutablePropertiesKHR(impl.device, &pi, &n, nullptr) != VK_SUCCESS) return;
  for (uint32_t e = 0; e < n; ++e) {
    VkPipelineExecutableInfoKHR ei{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    ei.pipeline = pipeline;
    ei.executableIndex = e;
    uint32_t m = 0;
    impl.vk.vkGetPipelineExecutableStatisticsKHR(impl.device, &ei, &m, nullptr);
    std::vector<VkPipelineExecutableStatisticKHR> stats(m, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
    impl.vk.vkGetPipelineExecutableStatisticsKHR(impl.device, &ei, &m, stats.data());
    std::string line = "pipeline stats " + what + ":";
    for (const auto& st : stats) {
      line += std::string(" ") + st.name + "=";
      switch (st.format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: line += st.value.b32 ? "true" : "false"; break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: line += std::to_string(st.value.i64); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: line += std::to_string(st.value.u64); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: line += std::to_string(st.value.f64); break;
        default: line += "?";
      }
    }
    std::fprintf(stderr, "%s\n", line.c_str());
    // The driver's internal representations (e.g. its assembly), when it offers them.
    uint32_t k = 0;
    if (impl.vk.vkGetPipelineExecutableInternalRepresentationsKHR(impl.device, &ei, &k, nullptr) != VK_SUCCESS) continue;
    std::vector<VkPipelineExecutableInternalRepresentationKHR> irs(k, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR});
    impl.vk.vkGetPipelineExecutableInternalRepresentationsKHR(impl.device, &ei, &k, irs.data());
    std::vector<std::vector<char>> text(k);
    for (uint32_t i = 0; i < k; ++i) {
      text[i].resize(irs[i].dataSize);
      irs[i].pData = text[i].data();
    }
    impl.vk.vkGetPipelineExecutableInternalRepresentationsKHR(impl.device, &ei, &k, irs.data());
    for (uint32_t i = 0; i < k; ++i) {
      std::fprintf(stderr, "pipeline IR %s: %s (%s), %zu bytes\n", what.c_str(), irs[i].name, irs[i].description, text[i].size());
      if (irs[i].isText) std::fprintf(stderr, "%.*s\n", int(text[i].size()), text[i].data());
    }
  }
}

}  // namespace

std::string pipeline_cache_file(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string what = "pipeline cache file '" + path + "' (ContextOptions::pipeline_cache_path, VKATTN_PIPELINE_CACHE)";
  std::error_code ec;
  fs::path resolved = fs::weakly_canonical(fs::path(path), ec);
  if (ec) throw Error(what + " cannot be resolved: " + ec.message());
  // weakly_canonical leaves a link to a file not created yet as it is: follow
  // it to where the file will be made, so that the link stays a link.
  for (int hops = 0; fs::is_symlink(fs::symlink_status(resolved, ec)); ++hops) {
    if (hops == 40) throw Error(what + " cannot be resolved: too many levels of symbolic links");
    const fs::path target = fs::read_symlink(resolved, ec);
    if (!ec) resolved = fs::weakly_canonical(resolved.parent_path() / target, ec);
    if (ec) throw Error(what + " cannot be resolved: " + ec.message());
  }
  const fs::file_status st = fs::status(resolved, ec);
  if (st.type() == fs::file_type::not_found) {
    if (!fs::is_directory(resolved.parent_path(), ec))
      throw Error(what + ": the directory '" + resolved.parent_path().string() + "' does not exist");
    return resolved.string();
  }
  if (ec) throw Error(what + " cannot be examined: " + ec.message());
  if (st.type() != fs::file_type::regular) {
    const char* kind = st.type() == fs::file_type::directory ? "a directory"
                       : st.type() == fs::file_type::character || st.type() == fs::file_type::block ? "a device"
                       : st.type() == fs::file_type::fifo ? "a FIFO"
                       : st.type() == fs::file_type::socket ? "a socket"
                                                             : "not a regular file";
    throw Error(what + " is " + kind + ": expected a regular file, or a path where one can be created");
  }
  return resolved.string();
}

Pipelines::Pipelines(ContextImpl& impl) : impl_(impl) {
  std::vector<char> initial;
  if (!impl.options.pipeline_cache_path.empty()) {
    file_ = pipeline_cache_file(impl.options.pipeline_cache_path);
    VkPhysicalDeviceProperties props;
    impl.vk.vkGetPhysicalDeviceProperties(impl.physical_device, &props);
    initial = read_cache_file(file_, props);
  }
  VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  ci.initialDataSize = initial.size();
  ci.pInitialData = initial.empty() ? nullptr : initial.data();
  vk_check(impl.vk.vkCreatePipelineCache(impl.device, &ci, nullptr, &cache_), "vkCreatePipelineCache");
}

Pipelines::~Pipelines() {
  const auto& vk = impl_.vk;
  for (auto& [hash, bucket] : pipelines_)
    for (auto& e : bucket) {
      vk.vkDestroyPipeline(impl_.device, e->pipeline.pipeline, nullptr);
      vk.vkDestroyPipelineLayout(impl_.device, e->pipeline.layout, nullptr);
    }
  for (auto& [n, l] : set_layouts_) vk.vkDestroyDescriptorSetLayout(impl_.device, l, nullptr);
  for (auto& [n, m] : modules_) vk.vkDestroyShaderModule(impl_.device, m, nullptr);
  vk.vkDestroyPipelineCache(impl_.device, cache_, nullptr);
}

std::size_t Pipelines::created() const {
  std::lock_guard lock(mutex_);
  return created_;
}

bool Pipelines::created_of(std::string_view kernel) const {
  std::lock_guard lock(mutex_);
  for (const auto& [hash, bucket] : pipelines_)
    for (const auto& e : bucket)
      if (e->kernel == kernel) return true;
  return false;
}

void Pipelines::save_file() const {
  const std::string& path = file_;
  if (path.empty()) return;
  std::lock_guard lock(mutex_);
  // The path was a regular file (or nothing) when the Context was made; only
  // replace what is still one, so that a device or FIFO put there since is
  // never overwritten.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return;
  size_t n = 0;
  if (impl_.vk.vkGetPipelineCacheData(impl_.device, cache_, &n, nullptr) != VK_SUCCESS || n == 0) return;
  std::vector<char> data(n);
  if (impl_.vk.vkGetPipelineCacheData(impl_.device, cache_, &n, data.data()) != VK_SUCCESS) return;
  // Written beside and renamed, so a concurrent reader never sees half a file.
  // The temporary file must be new (O_EXCL): whatever already has its name (a
  // link planted in a shared directory, a FIFO, another Context's temporary
  // file) is never opened: the next name is tried. An unwritable cache only
  // costs start-up time.
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    tmp = path + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(attempt);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) return;
  }
  if (fd < 0) return;
  bool ok = true;
  for (size_t done = 0; ok && done < n;) {
    const ssize_t w = ::write(fd, data.data() + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    ok = w > 0;
    if (ok) done += static_cast<size_t>(w);
  }
  ok = ::close(fd) == 0 && ok;   // a short file (disk full) must not replace a good one
  std::error_code ec;
  if (ok) std::filesystem::rename(tmp, path, ec);
  if (!ok || ec) std::filesystem::remove(tmp, ec);
}

VkDescriptorSetLayout Pipelines::set_layout(uint32_t bindings) {
  auto it = set_layouts_.find(bindings);
  if (it != set_layouts_.end()) return it->second;
  std::vector<VkDescriptorSetLayoutBinding> b(bindings);
  for (uint32_t i = 0; i < bindings; ++i)
    b[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo ci{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  if (impl_.use_push_descriptors()) ci.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  ci.bindingCount = bindings;
  ci.pBindings = b.data();
  VkDescriptorSetLayout layout;
  vk_check(impl_.vk.vkCreateDescriptorSetLayout(impl_.device, &ci, nullptr, &layout), "vkCreateDescriptorSetLayout");
  set_layouts_[bindings] = layout;
  return layout;
}

VkShaderModule Pipelines::shader_module(std::string_view kernel, std::string_view path, std::string* used_path) {
  const EmbeddedModule* m = find_module(kernel, path);
  if (!m)
    throw Error("kernel '" + std::string(kernel) + "' has no module for path '" + std::string(path) + "'");
  *used_path = m->path;
  std::string key = std::string(m->kernel) + "/" + m->path;
  auto it = modules_.find(key);
  if (it != modules_.end()) return it->second;
  VkShaderModuleCreateInfo ci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  ci.codeSize = m->size;
  ci.pCode = reinterpret_cast<const uint32_t*>(m->code);
  VkShaderModule module;
  vk_check(impl_.vk.vkCreateShaderModule(impl_.device, &ci, nullptr, &module), "vkCreateShaderModule(" + key + ")");
  modules_[key] = module;
  return module;
}

namespace {

// FNV-1a (a word at a time) over everything that makes a pipeline.
uint64_t request_hash(const PipelineRequest& r) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t x) { h = (h ^ x) * 1099511628211ull; };
  for (char c : r.kernel) mix(static_cast<unsigned char>(c));
  mix(static_cast<uint32_t>(r.path));
  mix(r.bindings);
  mix(r.push_size);
  mix(r.required_subgroup_size);
  for (uint32_t w : r.spec) mix(w);
  return h;
}

}  // namespace

bool Pipelines::Entry::matches(const PipelineRequest& r) const {
  return kernel == r.kernel && path == static_cast<uint32_t>(r.path) && bindings == r.bindings &&
         push_size == r.push_size && subgroup_size == r.required_subgroup_size &&
         std::equal(spec.begin(), spec.end(), r.spec.begin(), r.spec.end());
}

const Pipeline& Pipelines::get(const PipelineRequest& r) {
  const uint64_t hash = request_hash(r);
  std::lock_guard lock(mutex_);
  auto& bucket = pipelines_[hash];
  for (const auto& e : bucket)
    if (e->matches(r)) return e->pipeline;

  Pipeline p;
  p.bindings = r.bindings;
  p.push_size = r.push_size;
  VkShaderModule module = shader_module(r.kernel, path_name(r.path), &p.module_path);
  p.set_layout = set_layout(r.bindings);
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, r.push_size};
  VkPipelineLayoutCreateInfo lci{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  lci.setLayoutCount = 1;
  lci.pSetLayouts = &p.set_layout;
  lci.pushConstantRangeCount = r.push_size ? 1 : 0;
  lci.pPushConstantRanges = &range;
  vk_check(impl_.vk.vkCreatePipelineLayout(impl_.device, &lci, nullptr, &p.layout), "vkCreatePipelineLayout");

  std::vector<VkSpecializationMapEntry> entries(r.spec.size());
  for (uint32_t i = 0; i < entries.size(); ++i) entries[i] = {i, i * 4u, 4u};
  VkSpecializationInfo si{static_cast<uint32_t>(entries.size()), entries.data(), r.spec.size_bytes(), r.spec.data()};
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = &si;
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfo rss{VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO};
  const auto& caps = impl_.caps;
  if (r.required_subgroup_size && caps.subgroup_size_control && r.required_subgroup_size >= caps.min_subgroup_size &&
      r.required_subgroup_size <= caps.max_subgroup_size) {
    rss.requiredSubgroupSize = r.required_subgroup_size;
    ci.stage.pNext = &rss;
    ci.stage.flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
  }
  ci.layout = p.layout;
  const bool stats = want_pipeline_stats(impl_);
  if (stats) ci.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR | VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR;
  VkResult res = impl_.vk.vkCreateComputePipelines(impl_.device, cache_, 1, &ci, nullptr, &p.pipeline);
  if (res != VK_SUCCESS) {
    impl_.vk.vkDestroyPipelineLayout(impl_.device, p.layout, nullptr);
    vk_check(res, "creating the pipeline of kernel '" + std::string(r.kernel) + "' (" + p.module_path + ")");
  }
  if (stats) print_pipeline_stats(impl_, p.pipeline, std::string(r.kernel) + " (" + p.module_path + ")");
  if (!r.setup) ++created_;
  bucket.push_back(std::make_unique<Entry>(Entry{std::string(r.kernel), std::vector<uint32_t>(r.spec.begin(), r.spec.end()),
                                                 static_cast<uint32_t>(r.path), r.bindings, r.push_size,
                                                 r.required_subgroup_size, p}));
  return bucket.back()->pipeline;
}

}  // namespace vkattn::detail
