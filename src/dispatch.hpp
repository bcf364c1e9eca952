// Internal: binding buffers, pushing constants and sizing grids for a dispatch.
#pragma once
#include <vkattn/tensor.hpp>

#include <array>
#include <initializer_list>
#include <span>
#include <string_view>

#include "pipelines.hpp"
#include "reporting_op.hpp"

namespace vkattn::detail {

struct ContextImpl;

struct BufferBinding {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;
  VkDeviceSize range = VK_WHOLE_SIZE;
};

// A view bound as a storage buffer: the binding starts at an aligned offset at
// or before the view, and `element_offset` (in the view's elements) is what
// the shader adds to reach the view's first element.
struct BoundView {
  BufferBinding binding;
  uint32_t element_offset = 0;
};
BoundView bind_view(const ContextImpl& impl, const TensorView& view, std::string_view op, std::string_view name);

// Whether a 16-bit view's rows of 8 elements start on 16-byte words of its
// binding, so that a shader may load them 16 bytes at a time: its element
// offset in the binding (BoundView::element_offset) and every stride are
// multiples of 8 elements.
bool rows_of_8_on_words(uint32_t element_offset, std::initializer_list<int64_t> strides);

// A binding for an absent optional view: the status words, never read there.
BufferBinding placeholder_binding(const ContextImpl& impl);

// Workgroup grid for `count` workgroups. Dimension x is capped at the device's
// limit (65535 on some devices) and the rest folds into y; shaders rebuild the
// linear index as gl_WorkGroupID.y * grid_x + gl_WorkGroupID.x and skip ids >= count.
struct Grid {
  uint32_t x = 1, y = 1, z = 1;
};
Grid fold_grid(const ContextImpl& impl, uint64_t count, std::string_view op);

// Binds the status buffer at binding 0 (the slot of `op`, or the synchronous
// one) and `bindings` at 1.., pushes constants, dispatches.
void record_dispatch(ContextImpl& impl, VkCommandBuffer cmd, const Pipeline& pipeline,
                     std::span<const BufferBinding> bindings, const void* push, Grid grid, ReportingOp op);

// The next dispatch of the same op, recorded right after `previous` with the
// same bindings and push constants except the bytes [offset, offset + size).
// Where the two pipeline layouts are compatible (same set layout and push
// range), the descriptors and constants bound for `previous` stay bound
// across vkCmdBindPipeline, so only those bytes are pushed: on some drivers
// a descriptor push costs as much as the dispatch. Otherwise as record_dispatch.
struct PushedBytes {
  uint32_t offset = 0, size = 0;
};
void record_next_dispatch(ContextImpl& impl, VkCommandBuffer cmd, const Pipeline& previous, const Pipeline& pipeline,
                          std::span<const BufferBinding> bindings, const void* push, PushedBytes changed, Grid grid,
                          ReportingOp op);

// Barrier between dependent dispatches of one op.
void compute_barrier(ContextImpl& impl, VkCommandBuffer cmd);
// Barrier between a transfer (a fill, a copy) and the dispatches that read or
// write what it wrote.
void transfer_to_compute_barrier(ContextImpl& impl, VkCommandBuffer cmd);

}  // namespace vkattn::detail
