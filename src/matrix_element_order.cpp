// Probes where a lane's elements of a 16 x 16 f16 A matrix, and of an f32
// accumulator, lie (shaders/matrix_element_order.comp), once per Context.
#include "matrix_element_order.hpp"

#include <cstring>

#include "abi/matrix_element_order.h"
#include "allocation.hpp"
#include "context_impl.hpp"
#include "dispatch.hpp"
#include "pipelines.hpp"

namespace vkattn::detail {

bool is_register_order(std::span<const uint32_t> words) {
  if (words.size() < MEO_OUTPUT_WORDS || words[0] != MEO_ELEMENTS || words[MEO_ACC_WORDS] != MEO_ELEMENTS) return false;
  for (uint32_t lane = 0; lane < MEO_LANES; ++lane)
    for (uint32_t i = 0; i < MEO_ELEMENTS; ++i) {
      if (words[1 + lane * MEO_ELEMENTS + i] != MEO_POSITION(lane, i)) return false;
      // The accumulator's too: the prefill kernel's softmax takes its rows,
      // and on the KHR path its columns and sets P's A elements from it.
      if (words[MEO_ACC_WORDS + 1 + lane * MEO_ELEMENTS + i] != MEO_POSITION(lane, i)) return false;
    }
  return true;
}

bool probe_register_order(ContextImpl& impl) {
  if (!impl.caps.coopmat || impl.caps.subgroup_size != MEO_LANES || impl.queue == VK_NULL_HANDLE) return false;
  // f16's order, and bf16's where the device has bf16 matrices, in one submission.
  const bool bf16 = impl.caps.bf16_matrices;
  constexpr VkDeviceSize kBytes = MEO_OUTPUT_WORDS * 4;
  Allocation out = allocate(impl, 2 * kBytes, MemoryKind::host_visible, "the matrix element order probe's output");
  struct Release {
    ContextImpl& impl;
    Allocation& a;
    ~Release() { release(impl, a); }
  } release_out{impl, out};
  std::memset(out.mapped, 0, 2 * kBytes);
  const Pipeline& f16 = impl.pipelines->get({"matrix_element_order", Path::coopmat, {}, 2, 0, MEO_LANES, true});
  const Pipeline* b16 = bf16 ? &impl.pipelines->get({"matrix_element_order_bf16", Path::coopmat, {}, 2, 0, MEO_LANES, true}) : nullptr;
  const BufferBinding first[] = {{out.buffer, 0, kBytes}}, second[] = {{out.buffer, kBytes, kBytes}};
  submit_and_wait(impl, [&](VkCommandBuffer cmd) {
    record_dispatch(impl, cmd, f16, first, nullptr, Grid{}, ReportingOp::bench);
    if (b16) record_dispatch(impl, cmd, *b16, second, nullptr, Grid{}, ReportingOp::bench);
  });
  const auto* words = static_cast<const uint32_t*>(out.mapped);
  return is_register_order({words, MEO_OUTPUT_WORDS}) && (!bf16 || is_register_order({words + MEO_OUTPUT_WORDS, MEO_OUTPUT_WORDS}));
}

}  // namespace vkattn::detail
