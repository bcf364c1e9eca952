// What each consumer application asks of vkattn: one token of K and V (f32)
// written by write_kv_cache to slot 37 (block 2, token 5) of a small f16
// cache, and every stored value checked.
#pragma once
#include <vkattn/vkattn.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace consumer {

inline void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "FAILED: %s\n", what);
  std::exit(1);
}

inline const vkattn::KvCacheConfig kCacheConfig{.num_blocks = 4, .block_size = 16, .num_kv_heads = 1, .head_size = 16};
constexpr uint32_t kBlock = 2, kToken = 5, kDims = 16;
constexpr int64_t kSlot = kBlock * 16 + kToken;

// Exact in f16, different for K and V and for every dimension.
inline float expected(vkattn::KvPart part, uint32_t d) {
  return part == vkattn::KvPart::key ? 0.5f * d + 1 : -0.25f * d - 1;
}

inline float f16_to_float(uint16_t h) {   // zero and normal numbers are all this needs
  int e = (h >> 10) & 31;
  float v = e == 0 ? 0.0f : std::ldexp(1.0f + (h & 1023) / 1024.0f, e - 15);
  return h & 0x8000 ? -v : v;
}

// Inputs in mapped memory, written by the host: creating them submits nothing.
struct Inputs {
  vkattn::Buffer key, value, slot;
  explicit Inputs(vkattn::Context& ctx)
      : key(ctx, kDims * 4, vkattn::MemoryKind::host_visible),
        value(ctx, kDims * 4, vkattn::MemoryKind::host_visible),
        slot(ctx, 8, vkattn::MemoryKind::host_visible) {
    for (uint32_t d = 0; d < kDims; ++d) {
      static_cast<float*>(key.mapped())[d] = expected(vkattn::KvPart::key, d);
      static_cast<float*>(value.mapped())[d] = expected(vkattn::KvPart::value, d);
    }
    std::memcpy(slot.mapped(), &kSlot, 8);
  }
  void write(vkattn::Context& ctx, vkattn::PagedKvCache& cache) {   // synchronous
    vkattn::write_kv_cache(ctx, cache, view(key), view(value), slots());
  }
  void record(vkattn::Context& ctx, vkattn::PagedKvCache& cache, VkCommandBuffer cmd) {
    vkattn::write_kv_cache(ctx, cache, view(key), view(value), slots(), cmd);
  }
  static vkattn::TensorView view(const vkattn::Buffer& b) {
    return vkattn::TensorView::contiguous(b, vkattn::DType::f32, {1, 1, kDims});
  }
  vkattn::TensorView slots() const { return vkattn::TensorView::contiguous(slot, vkattn::DType::i64, {1}); }
};

// Whether block kBlock of `part`, as stored (`block` holds its bytes), has the token.
inline bool block_holds_token(const vkattn::PagedKvCache& cache, vkattn::KvPart part, const uint8_t* block) {
  for (uint32_t d = 0; d < kDims; ++d) {
    uint16_t h;
    std::memcpy(&h, block + 2 * cache.element_in_block(part, kToken, 0, d), 2);
    if (f16_to_float(h) != expected(part, d)) {
      std::fprintf(stderr, "%s dim %u: stored %g, expected %g\n", part == vkattn::KvPart::key ? "K" : "V", d,
                   f16_to_float(h), expected(part, d));
      return false;
    }
  }
  return true;
}

// Reads both blocks back with the cache's synchronous read_blocks.
inline bool cache_holds_token(const vkattn::PagedKvCache& cache) {
  for (auto part : {vkattn::KvPart::key, vkattn::KvPart::value})
    if (!block_holds_token(cache, part, cache.read_blocks(part, kBlock, 1).data())) return false;
  return true;
}

}  // namespace consumer
