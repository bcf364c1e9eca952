// The ops. Each comes in two forms:
//  - recorded: appends its dispatches to the caller's command buffer (which must be
//    recording, on a queue family with compute). Barriers the caller owes:
//      before: writes to the inputs -> VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT,
//              VK_ACCESS_2_SHADER_STORAGE_READ_BIT;
//      after:  VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT, VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT
//              -> whatever reads the outputs (the KV cache included).
//    Device-side input errors are reported by Context::check_device_status().
//    Once the op's pipelines exist (its prepare_* call, or a first recording)
//    a recording allocates no memory, host or device, and submits and waits
//    for nothing. (Without push descriptors its descriptor sets come from the
//    Context's pools, which grow only when more sets are outstanding than
//    ever before: Context::release_recorded_descriptor_sets returns them.) Tests:
//    vkattn_record_allocation_tests, ServingLoopCalls.
//  - synchronous: records, submits to the context's queue, waits, and throws on
//    any device-side input error.
// Every view is checked (dtype, shape, bounds) before anything is recorded.
#pragma once
#include <vkattn/kv_cache.hpp>
#include <vkattn/tensor.hpp>

namespace vkattn {

class Context;

// vLLM's reshape_and_cache: key and value [num_tokens, num_kv_heads, head_size]
// (f16, bf16 or f32; last dimension contiguous; neither they nor slot_mapping
// may share memory with the cache) are written to cache slots
// slot_mapping[num_tokens] (i32 or i64; slot = block * block_size + offset in
// block; a negative slot is padding and is skipped). Values are converted to the
// cache dtype, rounding to nearest even and saturating to its largest finite
// value; fp8 caches store value / k_scale (v_scale). Inputs of the cache's own
// dtype (f16 or bf16) are not converted: stored bit for bit, infinities and
// NaN payloads included (as vLLM's "auto" cache dtype). A slot beyond the cache is
// skipped and reported as an error naming the token and the slot.
void write_kv_cache(Context& ctx, PagedKvCache& cache, const TensorView& key, const TensorView& value,
                    const TensorView& slot_mapping, VkCommandBuffer cmd);
void write_kv_cache(Context& ctx, PagedKvCache& cache, const TensorView& key, const TensorView& value,
                    const TensorView& slot_mapping);
// Creates, before the first step, the pipelines write_kv_cache needs for a
// cache and these input and slot dtypes.
void prepare_write_kv_cache(Context& ctx, const KvCacheConfig& cache, DType input, DType slots);

}  // namespace vkattn
