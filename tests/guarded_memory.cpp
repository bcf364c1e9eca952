#include "guarded_memory.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "context_impl.hpp"

namespace vkattn::test {

namespace {

// Guarded buffers the fault reporter knows, in a fixed table: the signal
// handler may neither allocate nor lock.
struct Registration {
  std::atomic<bool> used{false};
  uintptr_t first_guard = 0, last_guard_end = 0;   // the whole mapping, guards included
  uintptr_t data = 0;                              // the caller's first byte
  uint64_t size = 0;
  std::atomic<bool> revoked{false};
  char name[96] = {};
};
std::array<Registration, 1024> registrations;
std::mutex registration_mutex;

int register_buffer(uintptr_t mapping, std::size_t mapping_bytes, const uint8_t* data, uint64_t size, const std::string& name) {
  std::lock_guard lock(registration_mutex);
  for (std::size_t i = 0; i < registrations.size(); ++i) {
    Registration& r = registrations[i];
    if (r.used.load(std::memory_order_acquire)) continue;
    r.first_guard = mapping;
    r.last_guard_end = mapping + mapping_bytes;
    r.data = reinterpret_cast<uintptr_t>(data);
    r.size = size;
    r.revoked.store(false, std::memory_order_relaxed);
    std::snprintf(r.name, sizeof r.name, "%s", name.c_str());
    r.used.store(true, std::memory_order_release);
    return static_cast<int>(i);
  }
  return -1;   // the report then just says "not in a guard page"
}

void unregister_buffer(int i) {
  if (i < 0) return;
  std::lock_guard lock(registration_mutex);
  registrations[i].used.store(false, std::memory_order_release);
}

// Async-signal-safe output: write(2) of text, hex and signed decimal numbers.
void put(const char* s) { (void)!write(STDERR_FILENO, s, std::strlen(s)); }
void put_number(uint64_t v, unsigned base, bool negative = false) {
  char buf[32];
  int n = 0;
  do buf[n++] = "0123456789abcdef"[v % base]; while ((v /= base) > 0);
  if (base == 16) { buf[n++] = 'x'; buf[n++] = '0'; }
  if (negative) buf[n++] = '-';
  char out[32];
  for (int i = 0; i < n; ++i) out[i] = buf[n - 1 - i];
  (void)!write(STDERR_FILENO, out, n);
}

void on_fault(int sig, siginfo_t* info, void*) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
  put("guarded memory: fault at ");
  put_number(a, 16);
  bool found = false;
  for (const Registration& r : registrations) {
    if (!r.used.load(std::memory_order_acquire) || a < r.first_guard || a >= r.last_guard_end) continue;
    put(": byte ");
    if (a >= r.data) put_number(a - r.data, 10);
    else put_number(r.data - a, 10, true);
    put(" of '");
    put(r.name);
    put("' (");
    put_number(r.size, 10);
    put(r.revoked.load(std::memory_order_acquire) ? " bytes, revoked)\n" : " bytes)\n");
    found = true;
    break;
  }
  if (!found) put(": not in a guard page\n");
  // Let the fault happen again with the default action: the process dies of
  // the same signal, as it would have without this handler.
  signal(sig, SIG_DFL);
}

VkDeviceSize round_up(VkDeviceSize v, VkDeviceSize m) { return (v + m - 1) / m * m; }

}  // namespace

bool guarded_memory_available(const Context& ctx) {
  return ctx.capabilities().device_type == "CPU" && ctx.impl().has_extension(VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
}

GuardedBuffer::GuardedBuffer(Context& ctx, VkDeviceSize size, GuardAt at, std::string name)
    : impl_(detail::shared_impl(ctx)), size_(size), at_(at) {
  auto& impl = *impl_;
  const auto& vk = impl.vk;
  if (!guarded_memory_available(ctx))
    throw Error("GuardedBuffer: device '" + impl.caps.device_name + "' is not a CPU device with VK_EXT_external_memory_host");
  if (size == 0) throw Error("GuardedBuffer '" + name + "': size is 0: expected at least 1 byte");

  VkPhysicalDeviceExternalMemoryHostPropertiesEXT host{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &host;
  vk.vkGetPhysicalDeviceProperties2(impl.physical_device, &props);
  // Guard pages must be whole pages, and the import must start and end on its alignment.
  page_ = std::max<std::size_t>(sysconf(_SC_PAGESIZE), host.minImportedHostPointerAlignment);
  buffer_bytes_ = round_up(size, page_);
  mapping_bytes_ = buffer_bytes_ + 2 * page_;
  mapping_ = mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping_ == MAP_FAILED) {
    mapping_ = nullptr;
    throw Error("GuardedBuffer '" + name + "': mmap of " + std::to_string(mapping_bytes_) + " bytes failed");
  }
  auto* base = static_cast<uint8_t*>(mapping_);
  uint8_t* pages = base + page_;
  if (mprotect(base, page_, PROT_NONE) != 0 || mprotect(pages + buffer_bytes_, page_, PROT_NONE) != 0) {
    munmap(mapping_, mapping_bytes_);
    throw Error("GuardedBuffer '" + name + "': mprotect of the guard pages failed");
  }
  offset_ = at == GuardAt::end ? buffer_bytes_ - size : 0;
  data_ = pages + offset_;

  try {
    VkExternalMemoryBufferCreateInfo ext{VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO};
    ext.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
    VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bci.pNext = &ext;
    bci.size = buffer_bytes_;
    bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
    bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    detail::vk_check(vk.vkCreateBuffer(impl.device, &bci, nullptr, &buffer_), "GuardedBuffer: vkCreateBuffer");
    VkMemoryRequirements req;
    vk.vkGetBufferMemoryRequirements(impl.device, buffer_, &req);

    auto get_host_props = reinterpret_cast<PFN_vkGetMemoryHostPointerPropertiesEXT>(
        vk.vkGetDeviceProcAddr(impl.device, "vkGetMemoryHostPointerPropertiesEXT"));
    VkMemoryHostPointerPropertiesEXT hp{VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
    detail::vk_check(get_host_props(impl.device, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT, pages, &hp),
                     "GuardedBuffer: vkGetMemoryHostPointerPropertiesEXT");
    const uint32_t type = impl.memory_type(req.memoryTypeBits & hp.memoryTypeBits, 0);
    if (type == UINT32_MAX || req.size > buffer_bytes_)
      throw Error("GuardedBuffer '" + name + "': no memory type imports host memory for this buffer");

    VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
    flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
    VkImportMemoryHostPointerInfoEXT import{VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT};
    import.pNext = &flags;
    import.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
    import.pHostPointer = pages;
    VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    mai.pNext = &import;
    mai.allocationSize = buffer_bytes_;
    mai.memoryTypeIndex = type;
    detail::vk_check(vk.vkAllocateMemory(impl.device, &mai, nullptr, &memory_), "GuardedBuffer: importing host memory");
    detail::vk_check(vk.vkBindBufferMemory(impl.device, buffer_, memory_, 0), "GuardedBuffer: vkBindBufferMemory");
    VkBufferDeviceAddressInfo ai{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
    ai.buffer = buffer_;
    address_ = vk.vkGetBufferDeviceAddress(impl.device, &ai) + offset_;
  } catch (...) {
    free_memory();
    throw;
  }
  registration_ = register_buffer(reinterpret_cast<uintptr_t>(mapping_), mapping_bytes_, data_, size_, name);
}

GuardedBuffer::~GuardedBuffer() { free_memory(); }

void GuardedBuffer::free_memory() noexcept {
  unregister_buffer(registration_);
  registration_ = -1;
  const auto& vk = impl_->vk;
  if (buffer_) vk.vkDestroyBuffer(impl_->device, buffer_, nullptr);
  if (memory_) vk.vkFreeMemory(impl_->device, memory_, nullptr);
  if (mapping_) munmap(mapping_, mapping_bytes_);
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapping_ = nullptr;
}

const volatile uint8_t* GuardedBuffer::guard() const {
  auto* pages = static_cast<const uint8_t*>(mapping_) + page_;
  return at_ == GuardAt::end ? pages + buffer_bytes_ : pages - page_;
}

void GuardedBuffer::revoke() {
  if (mprotect(static_cast<uint8_t*>(mapping_) + page_, buffer_bytes_, PROT_NONE) != 0)
    throw Error("GuardedBuffer::revoke: mprotect failed");
  if (registration_ >= 0) registrations[registration_].revoked.store(true, std::memory_order_release);
}

GuardedKvCache make_guarded_kv_cache(Context& ctx, const KvCacheConfig& config, GuardAt at, uint32_t blocks_per_chunk) {
  GuardedKvCache g;
  const uint64_t block_bytes = uint64_t(config.block_size) * config.num_kv_heads * config.head_size * dtype_size(config.dtype);
  std::vector<KvCacheChunk> chunks;
  for (uint32_t first = 0; first < config.num_blocks; first += blocks_per_chunk) {
    const uint32_t n = std::min(blocks_per_chunk, config.num_blocks - first);
    const std::string blocks = n == 1 ? "block " + std::to_string(first)
                                      : "blocks " + std::to_string(first) + ".." + std::to_string(first + n - 1);
    g.k.push_back(std::make_unique<GuardedBuffer>(ctx, n * block_bytes, at, "K cache " + blocks));
    g.v.push_back(std::make_unique<GuardedBuffer>(ctx, n * block_bytes, at, "V cache " + blocks));
    KvCacheChunk c;
    c.k_buffer = g.k.back()->ref();
    c.v_buffer = g.v.back()->ref();
    c.k_offset = g.k.back()->offset();
    c.v_offset = g.v.back()->offset();
    c.num_blocks = n;
    chunks.push_back(c);
  }
  g.cache = std::make_unique<PagedKvCache>(ctx, config, chunks);
  return g;
}

void install_guard_fault_reporter() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
  });
}

}  // namespace vkattn::test
