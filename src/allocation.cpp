#include "allocation.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "context_impl.hpp"

namespace vkattn::detail {

namespace {

std::string bytes_text(VkDeviceSize b) { return std::to_string(b) + " bytes"; }

std::string_view kind_name(MemoryKind k) {
  switch (k) {
    case MemoryKind::device_local: return "device-local";
    case MemoryKind::host_visible: return "host-visible";
    case MemoryKind::device_local_mapped: return "mapped device-local";
  }
  return "?";
}

// The memory type for a kind: device_local_mapped takes memory that is both
// device-local and host-visible where the device has it (resizable BAR, CPU
// devices), else host-visible memory.
uint32_t choose_type(const ContextImpl& impl, uint32_t bits, MemoryKind kind) {
  constexpr VkMemoryPropertyFlags local = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  constexpr VkMemoryPropertyFlags mapped = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  switch (kind) {
    case MemoryKind::device_local: {
      uint32_t t = impl.memory_type(bits, local);
      return t != UINT32_MAX ? t : impl.memory_type(bits, 0);
    }
    case MemoryKind::host_visible: return impl.memory_type(bits, mapped, local);
    case MemoryKind::device_local_mapped: {
      uint32_t t = impl.memory_type(bits, local | mapped);
      return t != UINT32_MAX ? t : impl.memory_type(bits, mapped);
    }
  }
  return UINT32_MAX;
}

}  // namespace

Allocation allocate(ContextImpl& impl, VkDeviceSize size, MemoryKind kind, std::string_view what, Dedicated dedicate) {
  const auto& vk = impl.vk;
  const auto& caps = impl.caps;
  const std::string who(what);
  if (size == 0) throw Error(who + ": size is 0: expected at least 1 byte");
  const uint64_t limit = std::min(caps.max_buffer_size, caps.max_memory_allocation_size);
  if (size > limit)
    throw Error(who + ": " + bytes_text(size) + " exceeds the device's largest buffer of " + bytes_text(limit) +
                " (maxBufferSize / maxMemoryAllocationSize); split the data over several buffers");
  Allocation a;
  a.size = size;
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = size;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (caps.buffer_device_address) bci.usage |= VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  vk_check(vk.vkCreateBuffer(impl.device, &bci, nullptr, &a.buffer), who + ": vkCreateBuffer");

  VkMemoryRequirements req;
  vk.vkGetBufferMemoryRequirements(impl.device, a.buffer, &req);
  const uint32_t type = choose_type(impl, req.memoryTypeBits, kind);
  if (type == UINT32_MAX) {
    release(impl, a);
    throw Error(who + ": no memory type fits a " + std::string(kind_name(kind)) + " buffer");
  }
  const bool dedicated = dedicate == Dedicated::yes ||
                         (dedicate == Dedicated::automatic && kind == MemoryKind::device_local && size >= kDedicatedFromBytes);
  VkMemoryDedicatedAllocateInfo own{VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO};
  own.buffer = a.buffer;
  VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  flags.pNext = dedicated ? &own : nullptr;
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.pNext = caps.buffer_device_address ? static_cast<const void*>(&flags) : dedicated ? static_cast<const void*>(&own) : nullptr;
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = type;
  if (VkResult r = vk.vkAllocateMemory(impl.device, &mai, nullptr, &a.memory); r != VK_SUCCESS) {
    release(impl, a);
    throw Error(who + ": allocating " + bytes_text(size) + " of " + std::string(kind_name(kind)) +
                " memory failed: " + std::string(vk_result_name(r)), r);
  }
  try {
    vk_check(vk.vkBindBufferMemory(impl.device, a.buffer, a.memory, 0), who + ": vkBindBufferMemory");
    if (kind != MemoryKind::device_local)
      vk_check(vk.vkMapMemory(impl.device, a.memory, 0, VK_WHOLE_SIZE, 0, &a.mapped), who + ": vkMapMemory");
  } catch (...) {
    release(impl, a);
    throw;
  }
  if (caps.buffer_device_address) {
    VkBufferDeviceAddressInfo ai{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
    ai.buffer = a.buffer;
    a.address = vk.vkGetBufferDeviceAddress(impl.device, &ai);
  }
  return a;
}

void release(const ContextImpl& impl, Allocation& a) noexcept {
  if (!a.buffer && !a.memory) return;
  if (impl.lost.load(std::memory_order_acquire) && !impl.destroying) {
    // A timed-out submission may still read or write it: freed by the
    // Context's destructor once it has waited (leaked if even the list
    // cannot grow, rather than freed under the GPU).
    try {
      std::lock_guard lock(impl.deferred_mutex);
      impl.deferred.push_back(a);
    } catch (...) {
    }
    a = Allocation{};
    return;
  }
  if (a.buffer) impl.vk.vkDestroyBuffer(impl.device, a.buffer, nullptr);
  if (a.memory) impl.vk.vkFreeMemory(impl.device, a.memory, nullptr);   // unmaps too
  a = Allocation{};
}

}  // namespace vkattn::detail
