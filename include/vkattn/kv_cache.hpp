// PagedKvCache: K and V caches of fixed-size blocks, in any of vLLM's layouts
// and dtypes, spread over as many allocations as the device's limits require.
#pragma once
#include <vkattn/block_allocator.hpp>
#include <vkattn/buffer.hpp>
#include <vkattn/dtype.hpp>

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace vkattn {

class Context;

// Values match the shader ABI (shaders/include/abi/common.h).
enum class KvLayout : uint32_t {
  nhd = 0,    // [num_blocks, block_size, num_kv_heads, head_size]
  hnd = 1,    // [num_blocks, num_kv_heads, block_size, head_size]
  split = 2,  // vLLM: K [num_blocks, heads, head_size/x, block_size, x] with x = 16 bytes / element size;
              //       V [num_blocks, heads, head_size, block_size]
};
std::string_view layout_name(KvLayout l);
KvLayout parse_layout(std::string_view name);   // "nhd", "hnd", "split"

enum class KvPart { key, value };

struct KvCacheConfig {
  uint32_t num_blocks = 0;
  uint32_t block_size = 16;     // tokens per block: any value from 1 to 1024, powers of two or not
  uint32_t num_kv_heads = 1;
  uint32_t head_size = 128;     // a multiple of 16, from 16 to 256
  DType dtype = DType::f16;     // f16, bf16, fp8_e4m3 or fp8_e5m2
  KvLayout layout = KvLayout::nhd;
  float k_scale = 1.0f;         // fp8 only: stored = value / scale, read back as stored * scale
  float v_scale = 1.0f;
};

class PagedKvCache {
 public:
  PagedKvCache(Context& ctx, const KvCacheConfig& config);

  const KvCacheConfig& config() const { return config_; }
  uint64_t num_slots() const { return uint64_t(config_.num_blocks) * config_.block_size; }
  // Bytes of one block of K (V has the same).
  uint64_t block_bytes() const { return block_bytes_; }
  uint64_t total_bytes() const { return 2 * block_bytes_ * config_.num_blocks; }
  uint32_t blocks_per_chunk() const { return blocks_per_chunk_; }
  uint32_t num_chunks() const { return static_cast<uint32_t>(k_chunks_.size()); }
  const Buffer& chunk(KvPart part, uint32_t i) const { return (part == KvPart::key ? k_chunks_ : v_chunks_).at(i); }
  // Device address of a table of uint64 chunk addresses: K chunks, then V chunks.
  VkDeviceAddress chunk_table_address() const { return chunk_table_.device_address(); }

  // Index of an element inside its block (the layout's formula; kv_addressing.glsl has the same).
  uint64_t element_in_block(KvPart part, uint32_t token_in_block, uint32_t head, uint32_t dim) const;

  // Raw bytes of blocks [first, first + count), as stored.
  std::vector<uint8_t> read_blocks(KvPart part, uint32_t first, uint32_t count) const;
  void write_blocks(KvPart part, uint32_t first, std::span<const uint8_t> bytes);
  // Every byte of both caches set to a repeated 32-bit word.
  void fill(uint32_t word);

  BlockAllocator& allocator() { return allocator_; }

 private:
  template <class F> void for_block_range(uint32_t first, uint32_t count, F&& f) const;
  Context* ctx_;
  KvCacheConfig config_;
  uint64_t block_bytes_ = 0;
  uint32_t blocks_per_chunk_ = 0;
  std::vector<Buffer> k_chunks_, v_chunks_;
  Buffer chunk_table_;
  BlockAllocator allocator_;
};

}  // namespace vkattn
