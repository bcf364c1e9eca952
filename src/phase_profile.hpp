// The prefill kernel's phase profile in developers' builds (CMake option
// VKATTN_PHASE_PROFILE; shaders/include/abi/phase_profile.h has what the
// kernel counts). Nothing of it is compiled into other builds.
#pragma once
#include "context_impl.hpp"

namespace vkattn::detail {

// Chains VK_KHR_shader_clock's subgroup clock into the features of a device
// the Context creates (`features` outlives vkCreateDevice), where the device
// offers the extension; the extension's name is already in impl's list.
void phase_profile_enable(const ContextImpl& impl, VkPhysicalDeviceFeatures2& chain,
                          VkPhysicalDeviceShaderClockFeaturesKHR& features);

// Prints the counts, summed over the Context's status slots, to stderr:
// cycles per subgroup and tile for the key loop's phases, per subgroup and
// item for the prologue and epilogue, and each phase's share. Nothing when
// no item was counted.
void phase_profile_print(const ContextImpl& impl);

}  // namespace vkattn::detail
