// Consumer "adopt": an application that creates its own instance and device
// with the features vkattn needs (README "Adopting a device"), hands them to
// vkattn, records write_kv_cache into its own command buffer, submits it on
// its own queue and keeps using the device afterwards. Then again with a
// Context adopted without a queue: recording works, synchronous calls throw.
// The validation layer, where installed, watches the application's instance:
// vkattn's work must be valid on a device with only the documented features.
#include <vulkan/vulkan.h>

#include "own_vulkan.hpp"

using namespace consumer;

namespace {

void barrier(VkCommandBuffer cmd, VkPipelineStageFlags from, VkAccessFlags written, VkPipelineStageFlags to,
             VkAccessFlags read) {
  VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  b.srcAccessMask = written;
  b.dstAccessMask = read;
  vkCmdPipelineBarrier(cmd, from, to, 0, 1, &b, 0, nullptr, 0, nullptr);
}

// Into the application's command buffer: its own clearing of the block (so
// that what is read back was written by this submission), write_kv_cache,
// and its own copy of the K and V blocks into `readback` (K, then V).
void record(vkattn::Context& ctx, vkattn::PagedKvCache& cache, Inputs& inputs, const vkattn::Buffer& readback,
            VkCommandBuffer cmd) {
  const vkattn::KvCacheChunk& chunk = cache.chunk(kBlock / cache.blocks_per_chunk());
  VkDeviceSize in_chunk = (kBlock % cache.blocks_per_chunk()) * cache.block_bytes();
  vkCmdFillBuffer(cmd, chunk.k_buffer.buffer, chunk.k_offset + in_chunk, cache.block_bytes(), 0);
  vkCmdFillBuffer(cmd, chunk.v_buffer.buffer, chunk.v_offset + in_chunk, cache.block_bytes(), 0);
  barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  inputs.record(ctx, cache, cmd);
  barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_TRANSFER_READ_BIT);
  VkBufferCopy k{chunk.k_offset + in_chunk, 0, cache.block_bytes()};
  VkBufferCopy v{chunk.v_offset + in_chunk, cache.block_bytes(), cache.block_bytes()};
  vkCmdCopyBuffer(cmd, chunk.k_buffer.buffer, readback.handle(), 1, &k);
  vkCmdCopyBuffer(cmd, chunk.v_buffer.buffer, readback.handle(), 1, &v);
  barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
          VK_ACCESS_HOST_READ_BIT);
}

// One adopted Context: the token written through the application's own submission.
void write_on_own_queue(OwnDevice& own, const vkattn::AdoptInfo& info) {
  vkattn::Context ctx = vkattn::Context::adopt(info);
  check(!ctx.owns_device() && ctx.device() == own.device, "the Context works on the application's device");
  vkattn::PagedKvCache cache(ctx, kCacheConfig);
  Inputs inputs(ctx);
  vkattn::Buffer readback(ctx, 2 * cache.block_bytes(), vkattn::MemoryKind::host_visible);
  own.submit_and_wait([&](VkCommandBuffer cmd) { record(ctx, cache, inputs, readback, cmd); });
  ctx.check_device_status();   // throws on a device-side error
  auto* bytes = static_cast<const uint8_t*>(readback.mapped());
  check(block_holds_token(cache, vkattn::KvPart::key, bytes) &&
            block_holds_token(cache, vkattn::KvPart::value, bytes + cache.block_bytes()),
        "the application's copy of the cache holds the token");
  if (info.queue) {
    check(cache_holds_token(cache), "read_blocks (a synchronous call on the adopted queue) sees the token");
    return;
  }
  try {
    cache.read_blocks(vkattn::KvPart::key, kBlock, 1);
    check(false, "a synchronous call on a Context adopted without a queue throws");
  } catch (const vkattn::Error& e) {
    check(std::strstr(e.what(), "AdoptInfo::queue") != nullptr, "the error names AdoptInfo::queue");
  }
}

}  // namespace

int main() {
  ValidationLog validation;
  VkInstance instance = create_instance(&validation);
  // The features vkattn needs (README "Adopting a device"), and no others.
  VkPhysicalDeviceVulkan13Features f13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  f13.maintenance4 = VK_TRUE;
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, &f13};
  f12.storageBuffer8BitAccess = f12.shaderFloat16 = f12.bufferDeviceAddress = VK_TRUE;
  f12.vulkanMemoryModel = f12.vulkanMemoryModelDeviceScope = VK_TRUE;
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, &f12};
  f11.storageBuffer16BitAccess = VK_TRUE;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f11};
  features.features.shaderInt16 = features.features.shaderInt64 = VK_TRUE;
  std::string device_name;
  {
    OwnDevice own(instance, &features);
    own.submit_and_wait([](VkCommandBuffer) {});
    vkattn::AdoptInfo info{.instance = instance, .physical_device = own.physical, .device = own.device,
                           .queue = own.queue, .queue_family = own.family, .enabled_features = &features,
                           .get_instance_proc_addr = vkGetInstanceProcAddr};
    write_on_own_queue(own, info);
    info.queue = VK_NULL_HANDLE;
    write_on_own_queue(own, info);
    // Every vkattn object is gone; the device is still the application's.
    own.submit_and_wait([](VkCommandBuffer) {});
    vk_ok(vkDeviceWaitIdle(own.device), "vkDeviceWaitIdle after vkattn");
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(own.physical, &p);
    device_name = p.deviceName;
  }
  destroy_instance(instance, &validation);
  std::printf("consumer_adopt: %s: adopted device, write_kv_cache recorded into the application's command buffer "
              "and submitted on its queue, token verified (with and without an adopted queue; synchronous call "
              "without one throws); device used after; validation %s\n",
              device_name.c_str(), validation.enabled ? "clean" : "not installed");
}
