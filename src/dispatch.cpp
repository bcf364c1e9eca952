#include "dispatch.hpp"

#include <array>
#include <string>
#include <vector>

#include "context_impl.hpp"

namespace vkattn::detail {

BoundView bind_view(const ContextImpl& impl, const TensorView& view, std::string_view op, std::string_view name) {
  const auto& caps = impl.caps;
  auto what = [&] { return std::string(op) + ": " + std::string(name); };
  if (!view.buffer.buffer) throw Error(what() + ": the buffer is VK_NULL_HANDLE");
  if (view.buffer.context_id && view.buffer.context_id != impl.id)
    throw Error(what() + ": the buffer belongs to another Context (id " + std::to_string(view.buffer.context_id) +
                ", this one is " + std::to_string(impl.id) + ")");
  const VkDeviceSize esize = dtype_size(view.dtype);
  if (view.offset % esize)
    throw Error(what() + ": byte offset " + std::to_string(view.offset) + " is not a multiple of the element size " + std::to_string(esize));
  VkDeviceSize end = view.end_byte();
  if (end > view.buffer.size)
    throw Error(what() + ": the view " + view.shape_string() + " from byte " + std::to_string(view.offset) + " needs " +
                std::to_string(end) + " bytes, but the buffer holds " + std::to_string(view.buffer.size));
  // Start the binding at the device-aligned offset at or before the view. Both the
  // alignment and element sizes are powers of two, so the gap is whole elements,
  // fewer than 256 (minStorageBufferOffsetAlignment is at most 256 bytes).
  VkDeviceSize align = std::max<VkDeviceSize>(caps.min_storage_buffer_offset_alignment, esize);
  VkDeviceSize start = view.offset - view.offset % align;
  // An empty view at its buffer's end (the only view that starts there) is
  // never read; a descriptor's offset must lie inside its buffer, so it
  // takes the placeholder.
  if (start >= view.buffer.size) return {placeholder_binding(impl), 0};
  VkDeviceSize range = std::max<VkDeviceSize>(end - start, esize);
  range = std::min(range, view.buffer.size - start);
  if (range > caps.max_storage_buffer_range)
    throw Error(what() + ": the view spans " + std::to_string(range) + " bytes, more than the device binds at once (maxStorageBufferRange " +
                std::to_string(caps.max_storage_buffer_range) + ")");
  uint64_t elem = (view.offset - start) / esize;
  return {{view.buffer.buffer, start, range}, static_cast<uint32_t>(elem)};
}

bool rows_of_8_on_words(uint32_t element_offset, std::initializer_list<int64_t> strides) {
  bool on_words = element_offset % 8 == 0;
  for (int64_t s : strides) on_words = on_words && s % 8 == 0;
  return on_words;
}

BufferBinding placeholder_binding(const ContextImpl& impl) { return {impl.status.buffer, 0, kStatusSlotBytes}; }

Grid fold_grid(const ContextImpl& impl, uint64_t count, std::string_view op) {
  const auto& lim = impl.caps.max_workgroup_count;
  Grid g;
  if (count <= lim[0]) {
    g.x = static_cast<uint32_t>(std::max<uint64_t>(count, 1));
    return g;
  }
  g.x = lim[0];
  uint64_t y = (count + g.x - 1) / g.x;
  if (y > lim[1])
    throw Error(std::string(op) + ": " + std::to_string(count) + " workgroups exceed the device's grid (" +
                std::to_string(lim[0]) + " x " + std::to_string(lim[1]) + ")");
  g.y = static_cast<uint32_t>(y);
  return g;
}

void record_dispatch(ContextImpl& impl, VkCommandBuffer cmd, const Pipeline& p, std::span<const BufferBinding> bindings,
                     const void* push, Grid grid, ReportingOp op) {
  const auto& vk = impl.vk;
  constexpr std::size_t kMaxBindings = 20;   // block-sparse attention: 15 views and 4 variant buffers, with the status
  if (bindings.size() + 1 != p.bindings || p.bindings > kMaxBindings)
    throw Error("internal: kernel expects " + std::to_string(p.bindings - 1) + " bindings, got " + std::to_string(bindings.size()));
  // A synchronous op records into the Context's own command buffer: its
  // errors go to the synchronous status slot, its sets to the arena that is
  // reset after its submission.
  const bool synchronous = cmd == impl.sync_cmd.load();
  const StatusSlot slot = synchronous ? StatusSlot::synchronous : recorded_slot(op);
  if (synchronous) impl.sync_ops |= 1u << static_cast<uint32_t>(op);   // under the submit lock
  std::array<VkDescriptorBufferInfo, kMaxBindings> infos;
  std::array<VkWriteDescriptorSet, kMaxBindings> writes;
  const uint32_t n = p.bindings;
  infos[0] = {impl.status.buffer, kStatusSlotBytes * static_cast<uint32_t>(slot), kStatusSlotBytes};
  for (uint32_t i = 1; i < n; ++i) infos[i] = {bindings[i - 1].buffer, bindings[i - 1].offset, bindings[i - 1].range};
  for (uint32_t i = 0; i < n; ++i) {
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vk.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  if (impl.use_push_descriptors()) {
    vk.vkCmdPushDescriptorSetKHR(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, n, writes.data());
  } else {
    VkDescriptorSet set;
    if (synchronous) {   // under the submit lock already
      set = impl.sync_sets.allocate(vk, impl.device, p.set_layout);
    } else {
      std::lock_guard lock(impl.recorded_sets_mutex);
      set = impl.recorded_sets.allocate(vk, impl.device, p.set_layout);
    }
    for (uint32_t i = 0; i < n; ++i) writes[i].dstSet = set;
    vk.vkUpdateDescriptorSets(impl.device, n, writes.data(), 0, nullptr);
    vk.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
  }
  if (p.push_size) vk.vkCmdPushConstants(cmd, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p.push_size, push);
  vk.vkCmdDispatch(cmd, grid.x, grid.y, grid.z);
}

void record_next_dispatch(ContextImpl& impl, VkCommandBuffer cmd, const Pipeline& previous, const Pipeline& p,
                          std::span<const BufferBinding> bindings, const void* push, PushedBytes changed, Grid grid,
                          ReportingOp op) {
  const bool compatible = previous.set_layout == p.set_layout && previous.push_size == p.push_size &&
                          changed.offset + changed.size <= p.push_size;
  if (!compatible) return record_dispatch(impl, cmd, p, bindings, push, grid, op);
  const auto& vk = impl.vk;
  vk.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  if (changed.size)
    vk.vkCmdPushConstants(cmd, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, changed.offset, changed.size,
                          static_cast<const uint8_t*>(push) + changed.offset);
  vk.vkCmdDispatch(cmd, grid.x, grid.y, grid.z);
}

void compute_barrier(ContextImpl& impl, VkCommandBuffer cmd) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  impl.vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb,
                               0, nullptr, 0, nullptr);
}

void transfer_to_compute_barrier(ContextImpl& impl, VkCommandBuffer cmd) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  impl.vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
                               nullptr, 0, nullptr);
}

}  // namespace vkattn::detail
