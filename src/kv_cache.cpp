#include <vkattn/context.hpp>
#include <vkattn/error.hpp>
#include <vkattn/kv_cache.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "context_impl.hpp"

namespace vkattn {

std::string_view layout_name(KvLayout l) {
  switch (l) {
    case KvLayout::nhd: return "nhd";
    case KvLayout::hnd: return "hnd";
    case KvLayout::split: return "split";
  }
  return "unknown";
}

KvLayout parse_layout(std::string_view name) {
  for (KvLayout l : {KvLayout::nhd, KvLayout::hnd, KvLayout::split})
    if (layout_name(l) == name) return l;
  throw Error("unknown KV-cache layout '" + std::string(name) + "': expected nhd, hnd or split");
}

namespace {

void check_config(const KvCacheConfig& c) {
  auto bad = [](const std::string& field, const std::string& value, const std::string& expected) {
    throw Error("PagedKvCache: " + field + " = " + value + " is not supported: expected " + expected);
  };
  if (c.num_blocks == 0) bad("num_blocks", "0", "at least 1");
  if (c.block_size == 0 || c.block_size > 1024) bad("block_size", std::to_string(c.block_size), "1 to 1024");
  if (c.num_kv_heads == 0 || c.num_kv_heads > 1024) bad("num_kv_heads", std::to_string(c.num_kv_heads), "1 to 1024");
  if (c.head_size < 16 || c.head_size > 256 || c.head_size % 16)
    bad("head_size", std::to_string(c.head_size), "a multiple of 16 from 16 to 256");
  if (c.dtype != DType::f16 && c.dtype != DType::bf16 && !is_fp8(c.dtype))
    bad("dtype", std::string(dtype_name(c.dtype)), "f16, bf16, fp8_e4m3 or fp8_e5m2");
  for (auto [name, s] : {std::pair{"k_scale", c.k_scale}, std::pair{"v_scale", c.v_scale}})
    if (!(s > 0.0f) || !std::isfinite(s)) bad(name, std::to_string(s), "a finite value > 0");
  if (uint64_t(c.num_blocks) * c.block_size > 0x7fffffffull)
    bad("num_blocks * block_size", std::to_string(uint64_t(c.num_blocks) * c.block_size), "fewer than 2^31 slots");
}

}  // namespace

PagedKvCache::PagedKvCache(Context& ctx, const KvCacheConfig& config)
    : ctx_(&ctx), config_(config), allocator_((check_config(config), config.num_blocks)) {
  auto& impl = ctx.impl();
  block_bytes_ = uint64_t(config.block_size) * config.num_kv_heads * config.head_size * dtype_size(config.dtype);
  uint64_t max_chunk = impl.max_chunk_bytes();
  if (block_bytes_ > max_chunk)
    throw Error("PagedKvCache: one block takes " + std::to_string(block_bytes_) + " bytes, more than the largest buffer (" +
                std::to_string(max_chunk) + " bytes); use a smaller block_size");
  blocks_per_chunk_ = static_cast<uint32_t>(std::min<uint64_t>(max_chunk / block_bytes_, config.num_blocks));
  uint32_t chunks = (config.num_blocks + blocks_per_chunk_ - 1) / blocks_per_chunk_;
  std::vector<uint64_t> table;
  for (KvPart part : {KvPart::key, KvPart::value}) {
    auto& list = part == KvPart::key ? k_chunks_ : v_chunks_;
    for (uint32_t i = 0; i < chunks; ++i) {
      uint32_t blocks = std::min(blocks_per_chunk_, config.num_blocks - i * blocks_per_chunk_);
      try {
        list.emplace_back(ctx, blocks * block_bytes_);
      } catch (const Error& e) {
        throw Error("PagedKvCache: " + std::string(part == KvPart::key ? "K" : "V") + " chunk " + std::to_string(i + 1) +
                    " of " + std::to_string(chunks) + " (" + std::to_string(total_bytes()) + " bytes in all): " + e.what(),
                    e.vk_result());
      }
      table.push_back(list.back().device_address());
    }
  }
  chunk_table_ = Buffer(ctx, table.size() * sizeof(uint64_t));
  chunk_table_.upload(std::span<const uint64_t>(table));
}

uint64_t PagedKvCache::element_in_block(KvPart part, uint32_t t, uint32_t h, uint32_t d) const {
  const uint64_t bs = config_.block_size, nh = config_.num_kv_heads, hs = config_.head_size;
  switch (config_.layout) {
    case KvLayout::nhd: return (t * nh + h) * hs + d;
    case KvLayout::hnd: return (h * bs + t) * hs + d;
    case KvLayout::split: {
      if (part == KvPart::value) return (h * hs + d) * bs + t;
      const uint64_t x = 16 / dtype_size(config_.dtype);
      return ((h * (hs / x) + d / x) * bs + t) * x + d % x;
    }
  }
  return 0;
}

template <class F>
void PagedKvCache::for_block_range(uint32_t first, uint32_t count, F&& f) const {
  if (first > config_.num_blocks || count > config_.num_blocks - first)
    throw Error("PagedKvCache: blocks [" + std::to_string(first) + ", " + std::to_string(uint64_t(first) + count) +
                ") are outside the cache of " + std::to_string(config_.num_blocks) + " blocks");
  for (uint32_t b = first; b < first + count;) {
    uint32_t chunk = b / blocks_per_chunk_;
    uint32_t in_chunk = b - chunk * blocks_per_chunk_;
    uint32_t n = std::min(first + count - b, blocks_per_chunk_ - in_chunk);
    f(chunk, uint64_t(in_chunk) * block_bytes_, uint64_t(n) * block_bytes_, uint64_t(b - first) * block_bytes_);
    b += n;
  }
}

std::vector<uint8_t> PagedKvCache::read_blocks(KvPart part, uint32_t first, uint32_t count) const {
  std::vector<uint8_t> out(uint64_t(count) * block_bytes_);
  for_block_range(first, count, [&](uint32_t chunk, uint64_t off, uint64_t bytes, uint64_t dst) {
    this->chunk(part, chunk).download(out.data() + dst, bytes, off);
  });
  return out;
}

void PagedKvCache::write_blocks(KvPart part, uint32_t first, std::span<const uint8_t> bytes) {
  if (bytes.size() % block_bytes_)
    throw Error("PagedKvCache::write_blocks: " + std::to_string(bytes.size()) + " bytes is not a whole number of blocks of " +
                std::to_string(block_bytes_) + " bytes");
  uint32_t count = static_cast<uint32_t>(bytes.size() / block_bytes_);
  for_block_range(first, count, [&](uint32_t chunk, uint64_t off, uint64_t n, uint64_t src) {
    (part == KvPart::key ? k_chunks_ : v_chunks_)[chunk].upload(bytes.data() + src, n, off);
  });
}

void PagedKvCache::fill(uint32_t word) {
  for (auto* list : {&k_chunks_, &v_chunks_})
    for (auto& b : *list) b.fill(word);
}

}  // namespace vkattn
