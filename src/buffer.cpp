#include <vkattn/buffer.hpp>
#include <vkattn/context.hpp>
#include <vkattn/error.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "context_impl.hpp"

namespace vkattn {

using detail::vk_check;

namespace {
constexpr VkDeviceSize kStagingBytes = 64ull << 20;

std::string bytes_text(VkDeviceSize b) { return std::to_string(b) + " bytes"; }
}  // namespace

Buffer::Buffer(Context& ctx, VkDeviceSize size, MemoryKind kind) : ctx_(&ctx), size_(size) {
  auto& impl = ctx.impl();
  const auto& vk = impl.vk;
  const auto& caps = impl.caps;
  if (size == 0) throw Error("Buffer: size is 0: expected at least 1 byte");
  uint64_t limit = std::min(caps.max_buffer_size, caps.max_memory_allocation_size);
  if (size > limit)
    throw Error("Buffer: " + bytes_text(size) + " exceeds the device's largest buffer of " + bytes_text(limit) +
                " (maxBufferSize / maxMemoryAllocationSize); split the data over several buffers");
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = size;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (caps.buffer_device_address) bci.usage |= VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  vk_check(vk.vkCreateBuffer(impl.device, &bci, nullptr, &buffer_), "vkCreateBuffer");

  VkMemoryRequirements req;
  vk.vkGetBufferMemoryRequirements(impl.device, buffer_, &req);
  uint32_t type = kind == MemoryKind::device_local
                      ? impl.memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
                      : impl.memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                         VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (type == UINT32_MAX && kind == MemoryKind::device_local)
    type = impl.memory_type(req.memoryTypeBits, 0);
  if (type == UINT32_MAX) {
    release();
    throw Error("Buffer: no memory type fits a " + std::string(kind == MemoryKind::device_local ? "device-local" : "host-visible") + " buffer");
  }
  VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.pNext = caps.buffer_device_address ? &flags : nullptr;
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = type;
  VkResult r = vk.vkAllocateMemory(impl.device, &mai, nullptr, &memory_);
  if (r != VK_SUCCESS) {
    release();
    throw Error("Buffer: allocating " + bytes_text(size) + " of " +
                (kind == MemoryKind::device_local ? "device-local" : "host-visible") +
                " memory failed: " + std::string(detail::vk_result_name(r)), r);
  }
  vk_check(vk.vkBindBufferMemory(impl.device, buffer_, memory_, 0), "vkBindBufferMemory");
  if (impl.memory.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT &&
      kind == MemoryKind::host_visible)
    vk_check(vk.vkMapMemory(impl.device, memory_, 0, VK_WHOLE_SIZE, 0, &mapped_), "vkMapMemory");
  if (caps.buffer_device_address) {
    VkBufferDeviceAddressInfo ai{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
    ai.buffer = buffer_;
    address_ = vk.vkGetBufferDeviceAddress(impl.device, &ai);
  }
}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& o) noexcept { *this = std::move(o); }

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    ctx_ = std::exchange(o.ctx_, nullptr);
    buffer_ = std::exchange(o.buffer_, VK_NULL_HANDLE);
    memory_ = std::exchange(o.memory_, VK_NULL_HANDLE);
    size_ = std::exchange(o.size_, 0);
    address_ = std::exchange(o.address_, 0);
    mapped_ = std::exchange(o.mapped_, nullptr);
  }
  return *this;
}

void Buffer::release() noexcept {
  if (!ctx_) return;
  auto& impl = ctx_->impl();
  if (buffer_) impl.vk.vkDestroyBuffer(impl.device, buffer_, nullptr);
  if (memory_) impl.vk.vkFreeMemory(impl.device, memory_, nullptr);   // unmaps too
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
  ctx_ = nullptr;
}

namespace {
void check_range(const char* what, VkDeviceSize offset, VkDeviceSize bytes, VkDeviceSize size) {
  if (offset > size || bytes > size - offset)
    throw Error(std::string("Buffer::") + what + ": range [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) +
                ") is outside the buffer of " + std::to_string(size) + " bytes");
}
}  // namespace

void Buffer::upload(const void* data, VkDeviceSize bytes, VkDeviceSize offset) {
  check_range("upload", offset, bytes, size_);
  if (bytes == 0) return;
  if (mapped_) {
    std::memcpy(static_cast<char*>(mapped_) + offset, data, bytes);
    return;
  }
  Buffer staging(*ctx_, std::min(bytes, kStagingBytes), MemoryKind::host_visible);
  auto& impl = ctx_->impl();
  for (VkDeviceSize done = 0; done < bytes;) {
    VkDeviceSize n = std::min(bytes - done, staging.size());
    std::memcpy(staging.mapped(), static_cast<const char*>(data) + done, n);
    detail::submit_and_wait(impl, [&](VkCommandBuffer cmd) {
      VkBufferCopy region{0, offset + done, n};
      impl.vk.vkCmdCopyBuffer(cmd, staging.handle(), buffer_, 1, &region);
    });
    done += n;
  }
}

void Buffer::download(void* data, VkDeviceSize bytes, VkDeviceSize offset) const {
  check_range("download", offset, bytes, size_);
  if (bytes == 0) return;
  if (mapped_) {
    std::memcpy(data, static_cast<const char*>(mapped_) + offset, bytes);
    return;
  }
  Buffer staging(*ctx_, std::min(bytes, kStagingBytes), MemoryKind::host_visible);
  auto& impl = ctx_->impl();
  for (VkDeviceSize done = 0; done < bytes;) {
    VkDeviceSize n = std::min(bytes - done, staging.size());
    detail::submit_and_wait(impl, [&](VkCommandBuffer cmd) {
      VkBufferCopy region{offset + done, 0, n};
      impl.vk.vkCmdCopyBuffer(cmd, buffer_, staging.handle(), 1, &region);
    });
    std::memcpy(static_cast<char*>(data) + done, staging.mapped(), n);
    done += n;
  }
}

void Buffer::fill(uint32_t word, VkDeviceSize offset, VkDeviceSize bytes) {
  if (bytes == VK_WHOLE_SIZE) bytes = size_ - std::min(offset, size_);
  check_range("fill", offset, bytes, size_);
  if (offset % 4 || bytes % 4) throw Error("Buffer::fill: offset and size must be multiples of 4 (got " + std::to_string(offset) + ", " + std::to_string(bytes) + ")");
  if (bytes == 0) return;
  auto& impl = ctx_->impl();
  detail::submit_and_wait(impl, [&](VkCommandBuffer cmd) { impl.vk.vkCmdFillBuffer(cmd, buffer_, offset, bytes, word); });
}

}  // namespace vkattn
