// Internal: one VkBuffer with its own VkDeviceMemory. The public Buffer wraps
// one; the Context's own buffers (status words, the synchronous ops'
// workspace) use it directly, since they live inside the ContextImpl that a
// Buffer would keep alive.
#pragma once
#include <vkattn/buffer.hpp>

#include <string_view>

#include "vk.hpp"

namespace vkattn::detail {

struct ContextImpl;

struct Allocation {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkDeviceSize size = 0;
  VkDeviceAddress address = 0;   // 0 without bufferDeviceAddress
  void* mapped = nullptr;        // host-visible kinds only
};

// Throws vkattn::Error naming `what` on failure (nothing is left allocated).
Allocation allocate(ContextImpl& impl, VkDeviceSize size, MemoryKind kind, std::string_view what);
void release(const ContextImpl& impl, Allocation& a) noexcept;

}  // namespace vkattn::detail
