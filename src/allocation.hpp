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

// Whether an allocation is made dedicated to its buffer
// (VkMemoryDedicatedAllocateInfo). Every Allocation is one buffer with its own
// memory either way; the flag lets the driver place and page that memory for
// the buffer alone. On an H200 (driver 580) random reads from a footprint of
// 16 GiB or more of plain allocations ran at a quarter of the rate of the same
// footprint in dedicated ones (`vkattn bench gather`, README), so large
// device-local allocations are dedicated.
enum class Dedicated { automatic, yes, no };
inline constexpr VkDeviceSize kDedicatedFromBytes = 1ull << 20;   // automatic: device-local allocations of at least this

// Throws vkattn::Error naming `what` on failure (nothing is left allocated).
Allocation allocate(ContextImpl& impl, VkDeviceSize size, MemoryKind kind, std::string_view what,
                    Dedicated dedicated = Dedicated::automatic);
void release(const ContextImpl& impl, Allocation& a) noexcept;

}  // namespace vkattn::detail
