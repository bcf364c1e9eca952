#include "phase_profile.hpp"

#include <cstdio>

#include "abi/phase_profile.h"

namespace vkattn::detail {

static_assert(PP_PROFILE_WORD0 + PP_PROFILE_WORDS <= kStatusSlotBytes / 4, "the counts fit a status slot");

void phase_profile_enable(const ContextImpl& impl, VkPhysicalDeviceFeatures2& chain,
                          VkPhysicalDeviceShaderClockFeaturesKHR& features) {
  if (!impl.has_extension(VK_KHR_SHADER_CLOCK_EXTENSION_NAME)) return;
  features.shaderSubgroupClock = VK_TRUE;
  features.pNext = chain.pNext;
  chain.pNext = &features;
}

void phase_profile_print(const ContextImpl& impl) {
  if (!impl.status.mapped) return;
  uint64_t sum[PP_PROFILE_WORDS] = {};
  for (uint32_t slot = 0; slot < kStatusSlots; ++slot) {
    const uint32_t* words = impl.status_words(static_cast<StatusSlot>(slot));
    for (uint32_t i = 0; i < PP_PROFILE_WORDS; ++i) sum[i] += words[PP_PROFILE_WORD0 + i];
  }
  const uint64_t tiles = sum[PP_PROFILE_TILES], items = sum[PP_PROFILE_ITEMS];
  if (items == 0) return;
  uint64_t total = 0;
  for (uint32_t p = 0; p < PP_PROFILE_PHASES; ++p) total += sum[p];
  std::fprintf(stderr, "vkattn phase profile: %llu subgroup-items, %llu subgroup-tiles (%.1f per item); cycles:\n",
               static_cast<unsigned long long>(items), static_cast<unsigned long long>(tiles), double(tiles) / double(items));
  for (uint32_t p = 0; p < PP_PROFILE_PHASES; ++p) {
    const bool per_item = p == PP_PROFILE_PROLOGUE || p == PP_PROFILE_EPILOGUE;
    const double cycles = double(sum[p] << PP_PROFILE_SHIFT) / double(per_item ? items : (tiles ? tiles : 1));
    std::fprintf(stderr, "  %-26s %9.0f per %s  %5.1f%%\n", abi::phase_profile_name(p), cycles, per_item ? "item" : "tile",
                 total ? 100.0 * double(sum[p]) / double(total) : 0.0);
  }
}

}  // namespace vkattn::detail
