// Host-side bookkeeping of cache blocks: allocation with reference counts (so
// sequences can share a prefix) and per-sequence block tables for the kernels.
#pragma once
#include <vkattn/buffer.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace vkattn {

class BlockAllocator {
 public:
  explicit BlockAllocator(uint32_t num_blocks);
  // n free blocks, each with reference count 1; throws vkattn::Error when fewer are free.
  std::vector<uint32_t> allocate(uint32_t n);
  // Drops one reference from each block; a block returns to the free list at 0.
  // Freeing a block that is not allocated is an error.
  void free(std::span<const uint32_t> blocks);
  // Shares the blocks (one more reference each) and returns them: the blocks of a
  // prefix that a new sequence starts from.
  std::vector<uint32_t> fork(std::span<const uint32_t> blocks);
  uint32_t ref_count(uint32_t block) const;
  uint32_t num_free() const { return static_cast<uint32_t>(free_.size()); }
  uint32_t num_blocks() const { return static_cast<uint32_t>(refs_.size()); }

 private:
  void check_block(uint32_t block, const char* what) const;
  std::vector<uint32_t> refs_;
  std::vector<uint32_t> free_;   // a stack: the most recently freed block is reused first
};

// block_table [num_seqs, max_blocks_per_seq] of int32, padded with 0: row s holds
// the physical blocks of sequence s in order.
class BlockTable {
 public:
  void add_sequence(std::vector<uint32_t> blocks) { rows_.push_back(std::move(blocks)); }
  std::vector<uint32_t>& sequence(std::size_t s);   // throws vkattn::Error past the last sequence
  std::size_t num_sequences() const { return rows_.size(); }
  uint32_t max_blocks_per_sequence() const;
  // The table as uploaded: num_sequences x max_blocks_per_sequence (at least 1)
  // int32 (throws vkattn::Error for a block id of 2^31 or more).
  std::vector<int32_t> flattened() const;
  // Uploads flattened() into a new device buffer.
  Buffer upload(Context& ctx) const;

 private:
  std::vector<std::vector<uint32_t>> rows_;
};

}  // namespace vkattn
