#include <vkattn/context.hpp>
#include <vkattn/error.hpp>
#include <vkattn/kv_cache.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "abi/common.h"
#include "abi/kv_element_index.h"
#include "context_impl.hpp"
#include "op_support.hpp"

namespace vkattn {

std::string_view layout_name(KvLayout l) {
  switch (l) {
    case KvLayout::nhd: return "nhd";
    case KvLayout::hnd: return "hnd";
    case KvLayout::split: return "split";
  }
  throw Error("layout_name: unknown KV-cache layout value " + std::to_string(static_cast<uint32_t>(l)) +
              " (expected nhd, hnd or split)");
}

KvLayout parse_layout(std::string_view name) {
  for (KvLayout l : {KvLayout::nhd, KvLayout::hnd, KvLayout::split})
    if (layout_name(l) == name) return l;
  throw Error("unknown KV-cache layout '" + std::string(name) + "': expected nhd, hnd or split");
}

namespace {

constexpr uint32_t kMaxChunks = abi::KV_MAX_CHUNKS;

[[noreturn]] void bad_field(std::string_view prefix, const std::string& field, const std::string& value,
                            const std::string& expected) {
  throw Error(std::string(prefix) + field + " = " + value + " is not supported: expected " + expected);
}

void check_config(const KvCacheConfig& c) {
  const std::string_view prefix = "PagedKvCache: ";
  if (c.num_blocks == 0) bad_field(prefix, "num_blocks", "0", "at least 1");
  detail::check_cache_geometry(prefix, c);
  // write_kv_cache stores value * (1 / scale).
  for (auto [name, s] : {std::pair{"k_scale", c.k_scale}, std::pair{"v_scale", c.v_scale}})
    detail::check_reciprocal_scale(prefix, name, s);
  if (uint64_t(c.num_blocks) * c.block_size > 0x7fffffffull)
    bad_field(prefix, "num_blocks * block_size", std::to_string(uint64_t(c.num_blocks) * c.block_size), "fewer than 2^31 slots");
}

}  // namespace

void detail::check_cache_geometry(std::string_view prefix, const KvCacheConfig& c) {
  if (c.block_size == 0 || c.block_size > kMaxKvBlockSize)
    bad_field(prefix, "block_size", std::to_string(c.block_size), "1 to " + std::to_string(kMaxKvBlockSize));
  if (c.num_kv_heads == 0 || c.num_kv_heads > 1024) bad_field(prefix, "num_kv_heads", std::to_string(c.num_kv_heads), "1 to 1024");
  if (c.head_size < 16 || c.head_size > 256 || c.head_size % 16)
    bad_field(prefix, "head_size", std::to_string(c.head_size), "a multiple of 16 from 16 to 256");
  if (c.dtype != DType::f16 && c.dtype != DType::bf16 && !is_fp8(c.dtype))
    bad_field(prefix, "dtype", detail::dtype_text(c.dtype), "f16, bf16, fp8_e4m3 or fp8_e5m2");
  if (c.layout != KvLayout::nhd && c.layout != KvLayout::hnd && c.layout != KvLayout::split)
    bad_field(prefix, "layout", "KvLayout(" + std::to_string(static_cast<uint32_t>(c.layout)) + ")", "nhd, hnd or split");
}

namespace {

uint64_t block_bytes_of(const KvCacheConfig& c) {
  return uint64_t(c.block_size) * c.num_kv_heads * c.head_size * dtype_size(c.dtype);
}

// A cache of its own is cut into chunks of as many blocks as the largest
// buffer holds (block_bytes <= max_chunk_bytes: num_blocks_that_fit).
struct OwnChunks {
  uint32_t blocks_per_chunk, count;
};
OwnChunks own_chunks(const detail::ContextImpl& impl, const KvCacheConfig& config) {
  const auto per = static_cast<uint32_t>(std::min<uint64_t>(impl.max_chunk_bytes() / block_bytes_of(config), config.num_blocks));
  return {per, per ? (config.num_blocks + per - 1) / per : 0};
}

// A cache of its own: whether it fits the device's memory, buffers and chunk
// table. Before anything is allocated, host memory included (the block
// allocator's lists grow with num_blocks).
uint32_t num_blocks_that_fit(const detail::ContextImpl& impl, const KvCacheConfig& config) {
  check_config(config);
  const uint64_t block_bytes = block_bytes_of(config), total = 2 * block_bytes * config.num_blocks;
  const uint64_t budget = impl.caps.device_local_budget_bytes;
  if (budget && total > budget)
    throw Error("PagedKvCache: " + std::to_string(config.num_blocks) + " blocks take " + std::to_string(total) +
                " bytes of K and V, more than the device has available (" + std::to_string(budget) +
                " bytes of device-local memory); use fewer blocks");
  const uint64_t max_chunk = impl.max_chunk_bytes();
  if (block_bytes > max_chunk)
    throw Error("PagedKvCache: one block takes " + std::to_string(block_bytes) + " bytes, more than the largest buffer (" +
                std::to_string(max_chunk) + " bytes); use a smaller block_size");
  const uint32_t n = own_chunks(impl, config).count;
  if (n > kMaxChunks)
    throw Error("PagedKvCache: " + std::to_string(total) + " bytes need " + std::to_string(n) +
                " chunks of at most " + std::to_string(max_chunk) + " bytes; the kernels address at most " +
                std::to_string(kMaxChunks) + " (raise ContextOptions::max_chunk_bytes or use fewer blocks)");
  return config.num_blocks;
}

}  // namespace

PagedKvCache::PagedKvCache(Context& ctx, const KvCacheConfig& config)
    : impl_(detail::shared_impl(ctx)), config_(config), allocator_(num_blocks_that_fit(*impl_, config)) {
  auto& impl = *impl_;
  block_bytes_ = block_bytes_of(config);
  const OwnChunks own = own_chunks(impl, config);
  blocks_per_chunk_ = own.blocks_per_chunk;
  const uint32_t n = own.count;
  for (uint32_t i = 0; i < n; ++i) {
    KvCacheChunk c;
    c.num_blocks = std::min(blocks_per_chunk_, config.num_blocks - i * blocks_per_chunk_);
    for (KvPart part : {KvPart::key, KvPart::value}) {
      try {
        owned_.emplace_back(ctx, c.num_blocks * block_bytes_);
      } catch (const Error& e) {
        throw Error("PagedKvCache: " + std::string(part == KvPart::key ? "K" : "V") + " chunk " + std::to_string(i + 1) +
                    " of " + std::to_string(n) + " (" + std::to_string(total_bytes()) + " bytes in all): " + e.what(),
                    e.vk_result());
      }
      (part == KvPart::key ? c.k_buffer : c.v_buffer) = owned_.back().ref();
      (part == KvPart::key ? c.k_address : c.v_address) = owned_.back().device_address();
    }
    chunks_.push_back(c);
  }
  finish(ctx);
}

PagedKvCache::PagedKvCache(Context& ctx, const KvCacheConfig& config, std::span<const KvCacheChunk> chunks)
    : impl_(detail::shared_impl(ctx)), config_(config), allocator_((check_config(config), 0u)) {
  // (The allocator's host lists are made once the chunks are checked.)
  auto& impl = *impl_;
  block_bytes_ = block_bytes_of(config);
  auto bad = [](const std::string& what) { throw Error("PagedKvCache over the application's memory: " + what); };
  if (chunks.empty() || chunks.size() > kMaxChunks)
    bad(std::to_string(chunks.size()) + " chunks given, expected 1 to " + std::to_string(kMaxChunks));
  blocks_per_chunk_ = chunks[0].num_blocks;
  uint64_t total = 0;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    KvCacheChunk c = chunks[i];
    const std::string at = "chunk " + std::to_string(i);
    if (c.num_blocks == 0) bad(at + " holds 0 blocks");
    if (i + 1 < chunks.size() && c.num_blocks != blocks_per_chunk_)
      bad(at + " holds " + std::to_string(c.num_blocks) + " blocks, expected " + std::to_string(blocks_per_chunk_) +
          " as chunk 0 (every chunk but the last holds the same number)");
    if (i + 1 == chunks.size() && c.num_blocks > blocks_per_chunk_)
      bad("the last chunk holds " + std::to_string(c.num_blocks) + " blocks, more than chunk 0's " + std::to_string(blocks_per_chunk_));
    const uint64_t bytes = uint64_t(c.num_blocks) * block_bytes_;
    for (KvPart part : {KvPart::key, KvPart::value}) {
      const char* name = part == KvPart::key ? "K" : "V";
      BufferRef& buf = part == KvPart::key ? c.k_buffer : c.v_buffer;
      VkDeviceSize offset = part == KvPart::key ? c.k_offset : c.v_offset;
      VkDeviceAddress& addr = part == KvPart::key ? c.k_address : c.v_address;
      if (buf.buffer) {
        if (buf.context_id && buf.context_id != impl.id) bad(at + "'s " + name + " buffer belongs to another Context");
        if (offset > buf.size || bytes > buf.size - offset)
          // (offset and size apart: their sum may wrap past 2^64)
          bad(at + "'s " + name + " blocks need " + std::to_string(bytes) + " bytes from byte " + std::to_string(offset) +
              ", past the end of a buffer of " + std::to_string(buf.size) + " bytes");
        if (!impl.caps.buffer_device_address) bad("the device has no bufferDeviceAddress");
        VkBufferDeviceAddressInfo ai{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
        ai.buffer = buf.buffer;
        addr = impl.vk.vkGetBufferDeviceAddress(impl.device, &ai) + offset;
      } else if (offset) {
        bad(at + "'s " + name + " offset is " + std::to_string(offset) + " without a buffer (give the address itself)");
      }
      if (!addr) bad(at + " has no " + name + " buffer or address");
      if (addr % 16) bad(at + "'s " + name + " address " + std::to_string(addr) + " is not a multiple of 16 bytes");
      if (addr > UINT64_MAX - bytes)
        bad(at + "'s " + name + " blocks (" + std::to_string(bytes) + " bytes from address " + std::to_string(addr) +
            ") run past the end of the address space");
    }
    total += c.num_blocks;
    chunks_.push_back(c);
  }
  // Every block needs memory of its own: where two chunks (or a chunk's K and
  // V) share bytes, writing one block would change another. Sorted by start,
  // an overlap always shows between neighbours.
  struct Range {
    VkDeviceAddress begin, end;
    std::size_t chunk;
    const char* part;
  };
  std::vector<Range> ranges;
  for (std::size_t i = 0; i < chunks_.size(); ++i) {
    const uint64_t bytes = uint64_t(chunks_[i].num_blocks) * block_bytes_;
    ranges.push_back({chunks_[i].k_address, chunks_[i].k_address + bytes, i, "K"});
    ranges.push_back({chunks_[i].v_address, chunks_[i].v_address + bytes, i, "V"});
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (std::size_t i = 1; i < ranges.size(); ++i) {
    const Range &a = ranges[i - 1], &b = ranges[i];
    if (b.begin < a.end)
      bad("chunk " + std::to_string(a.chunk) + "'s " + a.part + " blocks (device addresses " + std::to_string(a.begin) + " to " +
          std::to_string(a.end) + ") overlap chunk " + std::to_string(b.chunk) + "'s " + b.part + " blocks (from " +
          std::to_string(b.begin) + "): every block needs memory of its own");
  }
  if (total != config.num_blocks)
    bad("the chunks hold " + std::to_string(total) + " blocks, expected config.num_blocks = " + std::to_string(config.num_blocks));
  allocator_ = BlockAllocator(config.num_blocks);
  finish(ctx);
}

PagedKvCache::~PagedKvCache() = default;
// A cache moved from keeps no Context (impl_) and context id 0.
PagedKvCache::PagedKvCache(PagedKvCache&& o) noexcept
    : impl_(std::move(o.impl_)), context_id_(std::exchange(o.context_id_, 0)), config_(o.config_),
      block_bytes_(o.block_bytes_), blocks_per_chunk_(o.blocks_per_chunk_), chunks_(std::move(o.chunks_)),
      owned_(std::move(o.owned_)), chunk_table_(std::move(o.chunk_table_)), allocator_(std::move(o.allocator_)) {
  o.chunks_.clear();
  o.owned_.clear();
}
PagedKvCache& PagedKvCache::operator=(PagedKvCache&& o) noexcept {
  if (this == &o) return *this;
  impl_ = std::move(o.impl_);
  context_id_ = std::exchange(o.context_id_, 0);
  config_ = o.config_;
  block_bytes_ = o.block_bytes_;
  blocks_per_chunk_ = o.blocks_per_chunk_;
  chunks_ = std::move(o.chunks_);
  o.chunks_.clear();
  owned_ = std::move(o.owned_);
  o.owned_.clear();
  chunk_table_ = std::move(o.chunk_table_);
  allocator_ = std::move(o.allocator_);
  return *this;
}

void PagedKvCache::check_live(const char* what) const {
  if (!impl_) throw Error(std::string("PagedKvCache::") + what + ": this cache was moved from: use the cache it was moved to");
}

void PagedKvCache::check_part(KvPart part, const char* what) const {
  if (part != KvPart::key && part != KvPart::value)
    throw Error(std::string("PagedKvCache::") + what + ": part KvPart(" + std::to_string(static_cast<int>(part)) +
                ") is neither KvPart::key nor KvPart::value");
}

const KvCacheChunk& PagedKvCache::chunk(uint32_t i) const {
  check_live("chunk");
  if (i >= chunks_.size())
    throw Error("PagedKvCache::chunk: chunk " + std::to_string(i) + " is outside the cache's " + std::to_string(chunks_.size()) +
                " chunks");
  return chunks_[i];
}

BlockAllocator& PagedKvCache::allocator() {
  check_live("allocator");
  return allocator_;
}

// The chunk table, in memory the host maps where it can (nothing submitted),
// else uploaded: the K chunks' addresses, then the V chunks', then from
// KV_CHUNK_TABLE_ZEROS_OFFSET zeros as long as one block of one head
// (every layout keeps a key's dims within that span of its slot), which the
// prefill kernel reads for keys outside its item, then k_scale and v_scale
// (KV_CHUNK_TABLE_SCALES_OFFSET), which block-sparse attention reads.
void PagedKvCache::finish(Context& ctx) {
  context_id_ = impl_->id;
  const uint32_t zeros_bytes = KV_CHUNK_TABLE_ZEROS_BYTES(config_.block_size, config_.head_size, uint32_t(dtype_size(config_.dtype)));
  static_assert(KV_CHUNK_TABLE_ZEROS_OFFSET >= 2 * kMaxChunks * sizeof(uint64_t) &&
                KV_CHUNK_TABLE_ZEROS_OFFSET % 16 == 0);
  const uint32_t scales = KV_CHUNK_TABLE_SCALES_OFFSET(zeros_bytes);
  std::vector<uint64_t> table((scales + 2 * sizeof(float) + 7) / 8, 0);
  for (size_t i = 0; i < chunks_.size(); ++i) {
    table[i] = chunks_[i].k_address;
    table[chunks_.size() + i] = chunks_[i].v_address;
  }
  const float kv_scales[2] = {config_.k_scale, config_.v_scale};
  std::memcpy(reinterpret_cast<char*>(table.data()) + scales, kv_scales, sizeof kv_scales);
  chunk_table_ = Buffer(ctx, table.size() * sizeof(uint64_t), MemoryKind::device_local_mapped);
  chunk_table_.upload(std::span<const uint64_t>(table));
}

VkDeviceAddress PagedKvCache::chunk_table_address() const {
  check_live("chunk_table_address");
  return chunk_table_.device_address();
}

uint64_t PagedKvCache::element_in_block(KvPart part, uint32_t t, uint32_t h, uint32_t d) const {
  check_part(part, "element_in_block");
  const uint32_t bs = config_.block_size, nh = config_.num_kv_heads, hs = config_.head_size;
  for (auto [name, value, limit] : {std::tuple{"token_in_block", t, bs}, std::tuple{"head", h, nh}, std::tuple{"dim", d, hs}})
    if (value >= limit)
      throw Error(std::string("PagedKvCache::element_in_block: ") + name + " = " + std::to_string(value) +
                  " is outside the block: expected below " + std::to_string(limit));
  // The kernels' formula (abi/kv_element_index.h), whose layout ids are KvLayout's values.
  static_assert(uint32_t(KvLayout::nhd) == abi::KV_LAYOUT_NHD && uint32_t(KvLayout::hnd) == abi::KV_LAYOUT_HND &&
                uint32_t(KvLayout::split) == abi::KV_LAYOUT_SPLIT);
  return abi::vka_kv_element_in_block(static_cast<uint32_t>(config_.layout), part == KvPart::value, t, h, d, bs, nh, hs,
                                      16 / dtype_size(config_.dtype));
}

template <class F>
void PagedKvCache::for_block_range(uint32_t first, uint32_t count, const char* what, F&& f) const {
  check_live(what);
  if (first > config_.num_blocks || count > config_.num_blocks - first)
    throw Error("PagedKvCache: blocks [" + std::to_string(first) + ", " + std::to_string(uint64_t(first) + count) +
                ") are outside the cache of " + std::to_string(config_.num_blocks) + " blocks");
  for (const auto& c : chunks_)
    if (!c.k_buffer.buffer || !c.v_buffer.buffer)
      throw Error(std::string("PagedKvCache::") + what + ": the cache was built over bare device addresses, which "
                  "vkattn cannot copy to or from: use your own copies");
  for (uint32_t b = first; b < first + count;) {
    uint32_t chunk = b / blocks_per_chunk_;
    uint32_t in_chunk = b - chunk * blocks_per_chunk_;
    uint32_t n = std::min(first + count - b, blocks_per_chunk_ - in_chunk);
    f(chunk, uint64_t(in_chunk) * block_bytes_, uint64_t(n) * block_bytes_, uint64_t(b - first) * block_bytes_);
    b += n;
  }
}

namespace {

// A synchronous copy between a cache chunk (buffer, byte offset) and the host
// through a staging allocation.
void copy_chunk(detail::ContextImpl& impl, BufferRef buf, VkDeviceSize at, void* host, uint64_t bytes, bool to_device) {
  constexpr uint64_t kStaging = 64ull << 20;
  detail::Allocation staging = detail::allocate(impl, std::min(bytes, kStaging), MemoryKind::host_visible, "cache staging");
  struct Free { detail::ContextImpl& i; detail::Allocation& a; ~Free() { detail::release(i, a); } } free_staging{impl, staging};
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(bytes - done, staging.size);
    char* h = static_cast<char*>(host) + done;
    if (to_device) std::memcpy(staging.mapped, h, n);
    detail::submit_and_wait(impl, [&](VkCommandBuffer cmd) {
      VkBufferCopy region{to_device ? 0 : at + done, to_device ? at + done : 0, n};
      if (to_device) impl.vk.vkCmdCopyBuffer(cmd, staging.buffer, buf.buffer, 1, &region);
      else impl.vk.vkCmdCopyBuffer(cmd, buf.buffer, staging.buffer, 1, &region);
    });
    if (!to_device) std::memcpy(h, staging.mapped, n);
    done += n;
  }
}

}  // namespace

std::vector<uint8_t> PagedKvCache::read_blocks(KvPart part, uint32_t first, uint32_t count) const {
  check_part(part, "read_blocks");
  for_block_range(first, count, "read_blocks", [](uint32_t, uint64_t, uint64_t, uint64_t) {});   // checks, before the host copy exists
  std::vector<uint8_t> out(uint64_t(count) * block_bytes_);
  for_block_range(first, count, "read_blocks", [&](uint32_t chunk, uint64_t off, uint64_t bytes, uint64_t dst) {
    const KvCacheChunk& c = chunks_[chunk];
    const bool k = part == KvPart::key;
    copy_chunk(*impl_, k ? c.k_buffer : c.v_buffer, (k ? c.k_offset : c.v_offset) + off, out.data() + dst, bytes, false);
  });
  return out;
}

void PagedKvCache::write_blocks(KvPart part, uint32_t first, std::span<const uint8_t> bytes) {
  check_live("write_blocks");
  check_part(part, "write_blocks");
  if (bytes.size() % block_bytes_)
    throw Error("PagedKvCache::write_blocks: " + std::to_string(bytes.size()) + " bytes is not a whole number of blocks of " +
                std::to_string(block_bytes_) + " bytes");
  uint32_t count = static_cast<uint32_t>(bytes.size() / block_bytes_);
  for_block_range(first, count, "write_blocks", [&](uint32_t chunk, uint64_t off, uint64_t n, uint64_t src) {
    const KvCacheChunk& c = chunks_[chunk];
    const bool k = part == KvPart::key;
    copy_chunk(*impl_, k ? c.k_buffer : c.v_buffer, (k ? c.k_offset : c.v_offset) + off,
               const_cast<uint8_t*>(bytes.data()) + src, n, true);
  });
}

void PagedKvCache::fill(uint32_t word) {
  for_block_range(0, config_.num_blocks, "fill", [](uint32_t, uint64_t, uint64_t, uint64_t) {});
  auto& impl = *impl_;
  detail::submit_and_wait(impl, [&](VkCommandBuffer cmd) {
    for (const auto& c : chunks_) {
      const VkDeviceSize bytes = uint64_t(c.num_blocks) * block_bytes_;   // a multiple of 16
      impl.vk.vkCmdFillBuffer(cmd, c.k_buffer.buffer, c.k_offset, bytes, word);
      impl.vk.vkCmdFillBuffer(cmd, c.v_buffer.buffer, c.v_offset, bytes, word);
    }
  });
}

}  // namespace vkattn
