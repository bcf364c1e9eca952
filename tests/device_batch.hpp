// A paged-attention batch as an engine keeps it: host vectors for planning,
// and the same values in mapped device memory that the kernels read (and a
// test may rewrite, as an engine does between steps or as corruption would).
#pragma once
#include <vkattn/vkattn.hpp>

#include <cstring>
#include <vector>

namespace vkattn::test {

class DeviceBatch {
 public:
  DeviceBatch(Context& ctx, std::vector<int32_t> query_start_loc, std::vector<int32_t> seq_lens,
              std::vector<int32_t> block_table, uint32_t max_blocks_per_seq)
      : qsl_(std::move(query_start_loc)), lens_(std::move(seq_lens)), table_(std::move(block_table)),
        max_blocks_(max_blocks_per_seq),
        buf_(ctx, (qsl_.size() + lens_.size() + table_.size() + 3) * 4, MemoryKind::device_local_mapped) {
    upload();
  }
  std::vector<int32_t>& query_start_loc() { return qsl_; }
  std::vector<int32_t>& seq_lens() { return lens_; }
  std::vector<int32_t>& block_table() { return table_; }
  // Host lengths for a plan.
  PagedAttentionLengths lengths() const { return {qsl_, lens_}; }
  // Writes the host vectors to the device copy (sizes must not change).
  void upload() {
    auto* w = static_cast<int32_t*>(buf_.mapped());
    std::memcpy(w, qsl_.data(), qsl_.size() * 4);
    std::memcpy(w + qsl_.size() + 1, lens_.data(), lens_.size() * 4);   // one word apart: unaligned views
    std::memcpy(w + qsl_.size() + lens_.size() + 2, table_.data(), table_.size() * 4);
  }
  PagedAttentionBatchView view() const {
    const int64_t S = int64_t(lens_.size());
    PagedAttentionBatchView v;
    v.query_start_loc = TensorView::contiguous(buf_, DType::i32, {S + 1});
    v.seq_lens = TensorView::contiguous(buf_, DType::i32, {S}, (qsl_.size() + 1) * 4);
    v.block_table = TensorView::contiguous(buf_, DType::i32, {S, int64_t(max_blocks_)}, (qsl_.size() + lens_.size() + 2) * 4);
    return v;
  }

 private:
  std::vector<int32_t> qsl_, lens_, table_;
  uint32_t max_blocks_;
  Buffer buf_;
};

}  // namespace vkattn::test
