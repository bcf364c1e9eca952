// Probes where a lane's elements of a 16 x 16 f16 A matrix lie
// (shaders/matrix_element_order.comp), once per Context.
#include "matrix_element_order.hpp"

#include <cstring>

#include "abi/matrix_element_order.h"
#include "allocation.hpp"
#include "context_impl.hpp"
#include "dispatch.hpp"
#include "pipelines.hpp"

namespace vkattn::detail {

bool is_register_order(std::span<const uint32_t> words) {
  if (words.size() < MEO_OUTPUT_WORDS || words[0] != MEO_ELEMENTS) return false;
  for (uint32_t lane = 0; lane < MEO_LANES; ++lane)
    for (uint32_t i = 0; i < MEO_ELEMENTS; ++i)
      if (words[1 + lane * MEO_ELEMENTS + i] != MEO_POSITION(lane, i)) return false;
  return true;
}

bool probe_register_order(ContextImpl& impl) {
  if (!impl.caps.coopmat || impl.caps.subgroup_size != MEO_LANES || impl.queue == VK_NULL_HANDLE) return false;
  constexpr VkDeviceSize kBytes = MEO_OUTPUT_WORDS * 4;
  Allocation out = allocate(impl, kBytes, MemoryKind::host_visible, "the matrix element order probe's output");
  struct Release {
    ContextImpl& impl;
    Allocation& a;
    ~Release() { release(impl, a); }
  } release_out{impl, out};
  std::memset(out.mapped, 0, kBytes);
  const Pipeline& p = impl.pipelines->get({"matrix_element_order", Path::coopmat, {}, 2, 0, MEO_LANES, true});
  const BufferBinding bindings[] = {{out.buffer, 0, kBytes}};
  submit_and_wait(impl, [&](VkCommandBuffer cmd) { record_dispatch(impl, cmd, p, bindings, nullptr, Grid{}, ReportingOp::bench); });
  return is_register_order({static_cast<const uint32_t*>(out.mapped), MEO_OUTPUT_WORDS});
}

}  // namespace vkattn::detail
