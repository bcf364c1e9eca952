// The order of a lane's elements of a cooperative matrix on the Context's
// device (Capabilities::coopmat_register_order).
#pragma once
#include <cstdint>
#include <span>

namespace vkattn::detail {
struct ContextImpl;

// Whether the probe's output (abi/matrix_element_order.h) is the order the
// decode kernel's register-built matrices assume, with an f32 accumulator's
// elements in the same positions (the prefill kernel's softmax in registers).
bool is_register_order(std::span<const uint32_t> probe_words);

// Runs shaders/matrix_element_order.comp once on the Context's queue (for
// f16, and for bf16 where the device has bf16 matrices) and checks its
// output; false without KHR cooperative matrices, with subgroups other than
// 32 wide, or without a queue.
bool probe_register_order(ContextImpl& impl);
}  // namespace vkattn::detail
