// write_kv_cache: argument checks and dispatch; the kernel is shaders/write_kv_cache.comp.
#include <vkattn/context.hpp>
#include <vkattn/ops.hpp>

#include "abi/kv_chunk_division.h"
#include "abi/write_kv_cache.h"
#include "../context_impl.hpp"
#include "../dispatch.hpp"
#include "../op_support.hpp"
#include "write_kv_cache_record.hpp"

namespace vkattn {

using namespace detail;

namespace {
constexpr std::string_view kOp = "write_kv_cache";
using abi::WriteKvCachePush;

const Pipeline& pipeline(ContextImpl& impl, Path path, const KvCacheConfig& c, DType input, DType slots, bool vector_loads) {
  abi::WriteKvCacheSpec spec;
  spec.WKV_NUM_KV_HEADS = c.num_kv_heads;
  spec.WKV_HEAD_SIZE = c.head_size;
  spec.WKV_BLOCK_SIZE = c.block_size;
  spec.WKV_LAYOUT = static_cast<uint32_t>(c.layout);
  spec.WKV_CACHE_DTYPE = static_cast<uint32_t>(c.dtype);
  spec.WKV_INPUT_DTYPE = static_cast<uint32_t>(input);
  spec.WKV_SLOT_DTYPE = static_cast<uint32_t>(slots);
  const bool fp8 = c.dtype == DType::fp8_e4m3 || c.dtype == DType::fp8_e5m2;
  const uint32_t groups = c.num_kv_heads * c.head_size / WKV_PIECE_ELEMENTS(fp8);   // invocations' worth of work per token
  spec.WKV_WORKGROUP_SIZE = groups >= 128 ? 128 : groups >= 64 ? 64 : 32;
  spec.WKV_VECTOR_LOADS = vector_loads ? 1 : 0;
  return impl.pipelines->get({kOp, path, spec_words(spec), 4, sizeof(WriteKvCachePush)});
}
}  // namespace

void prepare_write_kv_cache(Context& ctx, const KvCacheConfig& cache, DType input, DType slots) {
  auto& impl = ctx.impl();
  // The geometry the pipelines are specialised for (there is no cache yet to have checked it).
  check_cache_geometry("prepare_write_kv_cache: the cache's ", cache);
  if (input != DType::f16 && input != DType::bf16 && input != DType::f32)
    throw Error("write_kv_cache: input dtype " + dtype_text(input) + " is not supported: expected f16, bf16 or f32");
  if (slots != DType::i32 && slots != DType::i64)
    throw Error("write_kv_cache: slot dtype " + dtype_text(slots) + " is not supported: expected i32 or i64");
  for (bool vector_loads : {true, false}) pipeline(impl, ctx.path_for(kOp), cache, input, slots, vector_loads);
}

detail::CheckedWrite detail::check_write_kv_cache(Context& ctx, const PagedKvCache& cache, const TensorView& key, const TensorView& value,
                                  const TensorView& slot_mapping, std::string_view op) {
  auto& impl = ctx.impl();
  impl.check_usable(op);
  if (cache.context_id() != impl.id)
    throw Error(std::string(op) + (cache.context_id() ? ": the cache belongs to another Context"
                                                      : ": the cache was moved from: use the cache it was moved to"));
  const auto& c = cache.config();
  const int64_t n = key.shape.empty() ? -1 : key.shape[0];
  const int64_t H = c.num_kv_heads, D = c.head_size;
  check_view(op, "key", key, {DType::f16, DType::bf16, DType::f32}, {-1, H, D}, {"num_tokens", "num_kv_heads", "head_size"});
  check_view(op, "value", value, {key.dtype}, {n, H, D}, {"num_tokens", "num_kv_heads", "head_size"});
  check_view(op, "slot_mapping", slot_mapping, {DType::i64, DType::i32}, {n}, {"num_tokens"});
  check_strides(op, "key", key);
  check_strides(op, "value", value);
  check_strides(op, "slot_mapping", slot_mapping);
  const NamedView inputs[] = {{&key, "key"}, {&value, "value"}, {&slot_mapping, "slot_mapping"}};
  check_apart_from_cache(op, inputs, cache, "an input must not share memory with the cache it writes");
  // The bindings, with their own checks (buffer, Context, bounds, the storage range).
  return {bind_view(impl, key, op, "key"), bind_view(impl, value, op, "value"), bind_view(impl, slot_mapping, op, "slot_mapping")};
}

void detail::record_write_kv_cache(Context& ctx, PagedKvCache& cache, const TensorView& key, const TensorView& value,
                                   const TensorView& slot_mapping, const CheckedWrite& checked, VkCommandBuffer cmd,
                                   ReportingOp op) {
  auto& impl = ctx.impl();
  if (!cmd) throw Error("write_kv_cache: the command buffer is VK_NULL_HANDLE");
  const auto& c = cache.config();
  const int64_t n = key.shape[0];
  if (n == 0) return;

  const BoundView &k = checked.key, &v = checked.value, &s = checked.slot_mapping;
  // 16-byte loads need every row of 8 elements to start on a 16-byte word of the binding.
  const uint32_t vec_elems = 16 / static_cast<uint32_t>(dtype_size(key.dtype));
  auto aligned = [&](const BoundView& b, const TensorView& t) {
    return b.element_offset % vec_elems == 0 && t.stride(0) % vec_elems == 0 && t.stride(1) % vec_elems == 0;
  };
  const Pipeline& p = pipeline(impl, ctx.path_for(kOp), c, key.dtype, slot_mapping.dtype, aligned(k, key) && aligned(v, value));
  Grid grid = fold_grid(impl, static_cast<uint64_t>(n), kOp);
  WriteKvCachePush push{};
  push.chunk_table_address = cache.chunk_table_address();
  push.num_tokens = to_u32(kOp, "num_tokens", n);
  push.num_blocks = c.num_blocks;
  push.blocks_per_chunk = cache.blocks_per_chunk();
  push.chunk_magic = abi::vka_kv_chunk_magic(cache.blocks_per_chunk());
  push.num_k_chunks = cache.num_chunks();
  push.key_offset = k.element_offset;
  push.key_token_stride = to_u32(kOp, "key stride 0", key.stride(0));
  push.key_head_stride = to_u32(kOp, "key stride 1", key.stride(1));
  push.value_offset = v.element_offset;
  push.value_token_stride = to_u32(kOp, "value stride 0", value.stride(0));
  push.value_head_stride = to_u32(kOp, "value stride 1", value.stride(1));
  push.slot_offset = s.element_offset;
  push.grid_x = grid.x;
  push.k_inv_scale = static_cast<float>(1.0 / c.k_scale);
  push.v_inv_scale = static_cast<float>(1.0 / c.v_scale);
  const BufferBinding bindings[] = {k.binding, v.binding, s.binding};
  record_dispatch(impl, cmd, p, bindings, &push, grid, op);
}

void write_kv_cache(Context& ctx, PagedKvCache& cache, const TensorView& key, const TensorView& value,
                    const TensorView& slot_mapping, VkCommandBuffer cmd) {
  const auto checked = detail::check_write_kv_cache(ctx, cache, key, value, slot_mapping, kOp);
  detail::record_write_kv_cache(ctx, cache, key, value, slot_mapping, checked, cmd, ReportingOp::write_kv_cache);
}

void write_kv_cache(Context& ctx, PagedKvCache& cache, const TensorView& key, const TensorView& value,
                    const TensorView& slot_mapping) {
  try {
    ctx.submit_and_wait([&](VkCommandBuffer cmd) { write_kv_cache(ctx, cache, key, value, slot_mapping, cmd); });
  } catch (const Error& e) {
    if (std::string_view(e.what()).starts_with("write_kv_cache: slot_mapping["))
      throw Error(std::string(e.what()) + " (this cache has " + std::to_string(cache.num_slots()) + " slots)", e.vk_result());
    throw;
  }
}

}  // namespace vkattn
