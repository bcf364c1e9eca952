// Device memory: a non-owning reference to any VkBuffer (the caller's or ours)
// and an owning Buffer for applications and tests.
#pragma once
#include <vulkan/vulkan_core.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace vkattn {

class Context;
namespace detail { struct ContextImpl; }

// A buffer on the Context's device: the caller's own VkBuffer (created with
// VK_BUFFER_USAGE_STORAGE_BUFFER_BIT), or a vkattn::Buffer. `size` lets views
// into it be bounds-checked. `context_id` is set by Buffer::ref() to the id
// of the Context that made the buffer, so that ops reject another Context's
// buffers; 0 (a caller's buffer) is not checked.
struct BufferRef {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize size = 0;
  uint64_t context_id = 0;
};

enum class MemoryKind {
  device_local,          // fastest for kernels; filled through upload()
  host_visible,          // mapped, coherent: for small status or readback buffers
  device_local_mapped,   // mapped, coherent, and device-local where the device has such memory
                         // (resizable BAR, CPU devices), else host-visible: for small inputs the
                         // host rewrites every step (batch metadata) without a copy
};

// One VkBuffer with its own allocation. Movable, not copyable. Usage always
// includes storage, transfer src/dst and (when the device has it) device address.
// Device-local buffers of 1 MiB or more are dedicated allocations
// (VkMemoryDedicatedAllocateInfo): on an H200, random reads over 16 GiB or
// more of plain allocations ran at a quarter of the speed (README, "bench gather").
//
// Lifetime: a Buffer keeps its Context's device alive (a Buffer may outlive
// its Context object). Destroying a Buffer frees its memory at once: the
// caller must make sure no pending command buffer still uses it.
// Threads: upload, download and fill are synchronous submissions (see
// Context); a Buffer may be used by several threads, but writes to the same
// bytes must be ordered by the caller.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Context& ctx, VkDeviceSize size, MemoryKind kind = MemoryKind::device_local);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  VkDeviceSize size() const { return size_; }
  BufferRef ref() const;
  operator BufferRef() const { return ref(); }
  // 0 when the device lacks bufferDeviceAddress.
  VkDeviceAddress device_address() const { return address_; }
  // Non-null for the mapped kinds (host_visible, device_local_mapped).
  void* mapped() const { return mapped_; }

  // Synchronous copies through a staging buffer (or directly when mapped;
  // a copy through a staging buffer allocates and submits).
  void upload(const void* data, VkDeviceSize bytes, VkDeviceSize offset = 0);
  void download(void* data, VkDeviceSize bytes, VkDeviceSize offset = 0) const;
  template <class T> void upload(std::span<const T> v, VkDeviceSize offset = 0) { upload(v.data(), v.size_bytes(), offset); }
  template <class T> std::vector<T> download_as(std::size_t count, VkDeviceSize offset = 0) const {
    std::vector<T> v(count);
    download(v.data(), count * sizeof(T), offset);
    return v;
  }
  // Fills [offset, offset + bytes) with a repeated 32-bit word (vkCmdFillBuffer):
  // offset and bytes multiples of 4; VK_WHOLE_SIZE, the whole words from offset on.
  void fill(uint32_t word, VkDeviceSize offset = 0, VkDeviceSize bytes = VK_WHOLE_SIZE);

 private:
  void release() noexcept;
  detail::ContextImpl& live_impl(const char* what) const;
  std::shared_ptr<detail::ContextImpl> impl_;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  VkDeviceSize size_ = 0;
  VkDeviceAddress address_ = 0;
  void* mapped_ = nullptr;
};

}  // namespace vkattn
