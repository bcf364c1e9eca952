// Device memory: a non-owning reference to any VkBuffer (the caller's or ours)
// and an owning Buffer for applications and tests.
#pragma once
#include <vulkan/vulkan_core.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace vkattn {

class Context;

// A caller's buffer, with its size so that views into it can be bounds-checked.
// It must have been created with VK_BUFFER_USAGE_STORAGE_BUFFER_BIT.
struct BufferRef {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize size = 0;
};

enum class MemoryKind {
  device_local,   // fastest for kernels; filled through upload()
  host_visible,   // mapped, coherent: for small status or readback buffers
};

// One VkBuffer with its own allocation. Movable, not copyable. Usage always
// includes storage, transfer src/dst and (when the device has it) device address.
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
  BufferRef ref() const { return {buffer_, size_}; }
  operator BufferRef() const { return ref(); }
  // 0 when the device lacks bufferDeviceAddress.
  VkDeviceAddress device_address() const { return address_; }
  // Non-null for MemoryKind::host_visible.
  void* mapped() const { return mapped_; }

  // Synchronous copies through a staging buffer (or directly when mapped).
  void upload(const void* data, VkDeviceSize bytes, VkDeviceSize offset = 0);
  void download(void* data, VkDeviceSize bytes, VkDeviceSize offset = 0) const;
  template <class T> void upload(std::span<const T> v, VkDeviceSize offset = 0) { upload(v.data(), v.size_bytes(), offset); }
  template <class T> std::vector<T> download_as(std::size_t count, VkDeviceSize offset = 0) const {
    std::vector<T> v(count);
    download(v.data(), count * sizeof(T), offset);
    return v;
  }
  // Fills [offset, offset + bytes) with a repeated 32-bit word (vkCmdFillBuffer).
  void fill(uint32_t word, VkDeviceSize offset = 0, VkDeviceSize bytes = VK_WHOLE_SIZE);

 private:
  void release() noexcept;
  Context* ctx_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  VkDeviceSize size_ = 0;
  VkDeviceAddress address_ = 0;
  void* mapped_ = nullptr;
};

}  // namespace vkattn
