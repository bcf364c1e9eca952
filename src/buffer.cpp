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
}  // namespace

Buffer::Buffer(Context& ctx, VkDeviceSize size, MemoryKind kind) : impl_(detail::shared_impl(ctx)) {
  detail::Allocation a = detail::allocate(*impl_, size, kind, "Buffer");
  buffer_ = a.buffer;
  memory_ = a.memory;
  size_ = a.size;
  address_ = a.address;
  mapped_ = a.mapped;
}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& o) noexcept { *this = std::move(o); }

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    impl_ = std::move(o.impl_);
    buffer_ = std::exchange(o.buffer_, VK_NULL_HANDLE);
    memory_ = std::exchange(o.memory_, VK_NULL_HANDLE);
    size_ = std::exchange(o.size_, 0);
    address_ = std::exchange(o.address_, 0);
    mapped_ = std::exchange(o.mapped_, nullptr);
  }
  return *this;
}

BufferRef Buffer::ref() const { return {buffer_, size_, impl_ ? impl_->id : 0}; }

void Buffer::release() noexcept {
  if (!impl_) return;
  detail::Allocation a{buffer_, memory_, size_, address_, mapped_};
  detail::release(*impl_, a);
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
  impl_.reset();
}

namespace {

// A host-visible buffer for one upload or download, freed when it ends.
struct Staging {
  detail::ContextImpl& impl;
  detail::Allocation a;
  Staging(detail::ContextImpl& i, VkDeviceSize size) : impl(i), a(detail::allocate(i, size, MemoryKind::host_visible, "Buffer staging")) {}
  ~Staging() { detail::release(impl, a); }
};

void check_range(const char* what, VkDeviceSize offset, VkDeviceSize bytes, VkDeviceSize size) {
  if (offset > size || bytes > size - offset)
    throw Error(std::string("Buffer::") + what + ": range [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) +
                ") is outside the buffer of " + std::to_string(size) + " bytes");
}
}  // namespace

detail::ContextImpl& Buffer::live_impl(const char* what) const {
  if (!impl_) throw Error(std::string("Buffer::") + what + ": the buffer is empty (default-constructed or moved from)");
  return *impl_;
}

void Buffer::upload(const void* data, VkDeviceSize bytes, VkDeviceSize offset) {
  check_range("upload", offset, bytes, size_);
  if (bytes == 0) return;
  if (mapped_) {
    std::memcpy(static_cast<char*>(mapped_) + offset, data, bytes);
    return;
  }
  auto& impl = live_impl("upload");
  Staging staging(impl, std::min(bytes, kStagingBytes));
  for (VkDeviceSize done = 0; done < bytes;) {
    VkDeviceSize n = std::min(bytes - done, staging.a.size);
    std::memcpy(staging.a.mapped, static_cast<const char*>(data) + done, n);
    detail::submit_and_wait(impl, [&](VkCommandBuffer cmd) {
      VkBufferCopy region{0, offset + done, n};
      impl.vk.vkCmdCopyBuffer(cmd, staging.a.buffer, buffer_, 1, &region);
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
  auto& impl = live_impl("download");
  Staging staging(impl, std::min(bytes, kStagingBytes));
  for (VkDeviceSize done = 0; done < bytes;) {
    VkDeviceSize n = std::min(bytes - done, staging.a.size);
    detail::submit_and_wait(impl, [&](VkCommandBuffer cmd) {
      VkBufferCopy region{offset + done, 0, n};
      impl.vk.vkCmdCopyBuffer(cmd, buffer_, staging.a.buffer, 1, &region);
    });
    std::memcpy(static_cast<char*>(data) + done, staging.a.mapped, n);
    done += n;
  }
}

void Buffer::fill(uint32_t word, VkDeviceSize offset, VkDeviceSize bytes) {
  // VK_WHOLE_SIZE: the rest of the buffer in whole words, as vkCmdFillBuffer takes it.
  if (bytes == VK_WHOLE_SIZE) bytes = (size_ - std::min(offset, size_)) / 4 * 4;
  check_range("fill", offset, bytes, size_);
  if (offset % 4 || bytes % 4) throw Error("Buffer::fill: offset and size must be multiples of 4 (got " + std::to_string(offset) + ", " + std::to_string(bytes) + ")");
  if (bytes == 0) return;
  auto& impl = live_impl("fill");
  detail::submit_and_wait(impl, [&](VkCommandBuffer cmd) { impl.vk.vkCmdFillBuffer(cmd, buffer_, offset, bytes, word); });
}

}  // namespace vkattn
