// PagedKvCache: K and V caches of fixed-size blocks, in any of vLLM's layouts
// and dtypes, spread over as many allocations as the device's limits require.
#pragma once
#include <vkattn/block_allocator.hpp>
#include <vkattn/buffer.hpp>
#include <vkattn/dtype.hpp>

#include <cstdint>
#include <memory>
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

inline constexpr uint32_t kMaxKvBlockSize = 1024;   // KvCacheConfig::block_size at most

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

// One chunk of a cache over the application's memory: `num_blocks` whole
// blocks of K and as many of V, each a contiguous run of blocks in the layout's
// order. Either buffers (created with STORAGE_BUFFER, SHADER_DEVICE_ADDRESS,
// and for read_blocks/write_blocks/fill TRANSFER_SRC/DST usage, on memory
// allocated with VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT) with byte offsets,
// or bare device addresses (then read_blocks/write_blocks/fill are not
// available). Offsets and addresses must be multiples of 16 bytes.
// Speed: make large chunks dedicated allocations (VkMemoryDedicatedAllocateInfo),
// as the cache's own are. On an H200 (driver 580), decode over a cache of 16
// GiB or more in plain allocations read at about a quarter of the speed.
struct KvCacheChunk {
  BufferRef k_buffer, v_buffer;
  VkDeviceSize k_offset = 0, v_offset = 0;
  VkDeviceAddress k_address = 0, v_address = 0;   // used where the buffer is VK_NULL_HANDLE
  uint32_t num_blocks = 0;
};

// The cache. Its geometry and scales are fixed at creation. Kernels find a
// block's chunk through a table of device addresses (at most 64 chunks of
// K and 64 of V). The attention kernels hold the first 8 of each in shared
// memory and read a further chunk's address from memory where they use it:
// fewer, larger chunks are the faster.
//
// Threads: ops may read and write one cache from several threads' command
// buffers (ordering them is the caller's business, as for any buffer);
// allocator() is not thread-safe. Lifetime: the cache keeps its Context's
// device alive; its own chunks are freed with it (no pending command buffer
// may use them then); an application's chunks must outlive it. A cache moved
// from holds nothing: its functions and ops given it throw vkattn::Error.
class PagedKvCache {
 public:
  // A cache of its own: num_blocks blocks in as few allocations as the
  // device's limits allow. Throws vkattn::Error when the cache does not fit
  // the device's memory (VK_EXT_memory_budget where the device has it).
  PagedKvCache(Context& ctx, const KvCacheConfig& config);
  // A cache over the application's memory. Every chunk but the last must
  // hold the same number of blocks, they must add up to config.num_blocks,
  // and no two chunks (nor a chunk's K and V) may share bytes.
  PagedKvCache(Context& ctx, const KvCacheConfig& config, std::span<const KvCacheChunk> chunks);
  ~PagedKvCache();
  PagedKvCache(PagedKvCache&&) noexcept;
  PagedKvCache& operator=(PagedKvCache&&) noexcept;

  const KvCacheConfig& config() const { return config_; }
  uint64_t num_slots() const { return uint64_t(config_.num_blocks) * config_.block_size; }
  // Bytes of one block of K (V has the same).
  uint64_t block_bytes() const { return block_bytes_; }
  uint64_t total_bytes() const { return 2 * block_bytes_ * config_.num_blocks; }
  uint32_t blocks_per_chunk() const { return blocks_per_chunk_; }
  uint32_t num_chunks() const { return static_cast<uint32_t>(chunks_.size()); }
  const KvCacheChunk& chunk(uint32_t i) const;   // throws vkattn::Error for i >= num_chunks()
  // Whether the cache allocated its chunks itself.
  bool owns_memory() const { return !owned_.empty(); }
  // Device address of a table of uint64 chunk addresses: K chunks, then V
  // chunks; from byte 1024 on, zeros as long as one block of one head (the
  // prefill kernel's stand-in for keys outside its item).
  VkDeviceAddress chunk_table_address() const;
  uint64_t context_id() const { return context_id_; }

  // Index of an element inside its block: the kernels' own formula (one
  // definition, shared with the shaders). Throws vkattn::Error for a token,
  // head or dim outside the block.
  uint64_t element_in_block(KvPart part, uint32_t token_in_block, uint32_t head, uint32_t dim) const;

  // Synchronous: raw bytes of blocks [first, first + count), as stored.
  std::vector<uint8_t> read_blocks(KvPart part, uint32_t first, uint32_t count) const;
  void write_blocks(KvPart part, uint32_t first, std::span<const uint8_t> bytes);
  // Synchronous: every byte of both caches set to a repeated 32-bit word.
  void fill(uint32_t word);

  BlockAllocator& allocator();

 private:
  void check_live(const char* what) const;   // throws for a cache moved from
  void check_part(KvPart part, const char* what) const;
  void finish(Context& ctx);
  template <class F> void for_block_range(uint32_t first, uint32_t count, const char* what, F&& f) const;
  std::shared_ptr<detail::ContextImpl> impl_;
  uint64_t context_id_ = 0;
  KvCacheConfig config_;
  uint64_t block_bytes_ = 0;
  uint32_t blocks_per_chunk_ = 0;
  std::vector<KvCacheChunk> chunks_;
  std::vector<Buffer> owned_;      // the chunks' buffers when the cache made them (K, V, K, V, ...)
  Buffer chunk_table_;
  BlockAllocator allocator_;
};

}  // namespace vkattn
