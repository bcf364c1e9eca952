#include <vkattn/block_allocator.hpp>
#include <vkattn/error.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

namespace vkattn {

BlockAllocator::BlockAllocator(uint32_t num_blocks) : refs_(num_blocks, 0) {
  free_.reserve(num_blocks);
  for (uint32_t b = num_blocks; b-- > 0;) free_.push_back(b);   // block 0 is handed out first
}

namespace {

// "block 7 is outside the cache (blocks 0..3)", or "(it has no blocks)".
std::string outside(const char* what, uint32_t block, std::size_t blocks) {
  return std::string("BlockAllocator::") + what + ": block " + std::to_string(block) + " is outside the cache (" +
         (blocks ? "blocks 0.." + std::to_string(blocks - 1) : std::string("it has no blocks")) + ")";
}

}  // namespace

void BlockAllocator::check_block(uint32_t block, const char* what) const {
  if (block >= refs_.size()) throw Error(outside(what, block, refs_.size()));
  if (refs_[block] == 0)
    throw Error(std::string("BlockAllocator::") + what + ": block " + std::to_string(block) + " is not allocated");
}

std::vector<uint32_t> BlockAllocator::allocate(uint32_t n) {
  if (n > free_.size())
    throw Error("BlockAllocator::allocate: " + std::to_string(n) + " blocks requested, only " + std::to_string(free_.size()) +
                " of " + std::to_string(refs_.size()) + " are free");
  std::vector<uint32_t> out(free_.end() - n, free_.end());
  std::reverse(out.begin(), out.end());
  free_.resize(free_.size() - n);
  for (uint32_t b : out) refs_[b] = 1;
  return out;
}

void BlockAllocator::free(std::span<const uint32_t> blocks) {
  for (uint32_t b : blocks) check_block(b, "free");   // all or nothing
  // A block listed twice must hold two references.
  std::vector<uint32_t> sorted(blocks.begin(), blocks.end());
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
    if (j - i > refs_[sorted[i]])
      throw Error("BlockAllocator::free: block " + std::to_string(sorted[i]) + " is freed " + std::to_string(j - i) +
                  " times but holds " + std::to_string(refs_[sorted[i]]) + " reference(s)");
    i = j;
  }
  for (uint32_t b : blocks)
    if (--refs_[b] == 0) free_.push_back(b);
}

std::vector<uint32_t> BlockAllocator::fork(std::span<const uint32_t> blocks) {
  for (uint32_t b : blocks) check_block(b, "fork");
  for (uint32_t b : blocks) ++refs_[b];
  return {blocks.begin(), blocks.end()};
}

uint32_t BlockAllocator::ref_count(uint32_t block) const {
  if (block >= refs_.size()) throw Error(outside("ref_count", block, refs_.size()));
  return refs_[block];
}

uint32_t BlockTable::max_blocks_per_sequence() const {
  std::size_t m = 0;
  for (auto& r : rows_) m = std::max(m, r.size());
  return static_cast<uint32_t>(m);
}

std::vector<uint32_t>& BlockTable::sequence(std::size_t s) {
  if (s >= rows_.size())
    throw Error("BlockTable::sequence: sequence " + std::to_string(s) + " is outside the table of " + std::to_string(rows_.size()) +
                " sequences");
  return rows_[s];
}

std::vector<int32_t> BlockTable::flattened() const {
  const std::size_t width = std::max<uint32_t>(max_blocks_per_sequence(), 1);
  std::vector<int32_t> out(std::max<std::size_t>(rows_.size(), 1) * width, 0);
  for (std::size_t s = 0; s < rows_.size(); ++s)
    for (std::size_t j = 0; j < rows_[s].size(); ++j) {
      if (rows_[s][j] > uint32_t(INT32_MAX))   // the kernels' tables are int32
        throw Error("BlockTable::flattened: sequence " + std::to_string(s) + " holds block " + std::to_string(rows_[s][j]) +
                    " at " + std::to_string(j) + ": expected block ids below 2^31 (the table is int32)");
      out[s * width + j] = static_cast<int32_t>(rows_[s][j]);
    }
  return out;
}

Buffer BlockTable::upload(Context& ctx) const {
  auto flat = flattened();
  Buffer b(ctx, flat.size() * sizeof(int32_t));
  b.upload(std::span<const int32_t>(flat));
  return b;
}

}  // namespace vkattn
