// What `vkattn run OP` reports, shared by every op's runner.
#pragma once
#include <vkattn/buffer.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace vkattn::tool {

struct RunResult {
  bool pass = false;
  double max_abs_err = 0;     // against the float64 reference
  double max_rel_err = 0;
  std::string tolerance;      // what PASS means for this op, in words
  std::string failure;        // first mismatch, when !pass
  double gpu_us = 0;          // median GPU time of the op
  double bytes = 0;           // bytes the op must move
  double flops = 0;           // or, for an op bound by arithmetic, the FLOPs it must do
  std::string summary;        // one line describing the case
  std::string path;           // the path the op ran on, where the runner knows it ("": the kernel's default)
};

// 32-bit views (metadata, parameters) packed into one buffer as an engine may
// keep them: each one word past a 16-byte boundary (views need not be aligned).
class PackedWords {
 public:
  // Appends `count` words and returns their byte offset.
  VkDeviceSize place(const void* data, std::size_t count) {
    while (words_.size() % 4 != 1) words_.push_back(-7);
    const std::size_t at = words_.size();
    words_.resize(at + count);
    if (count) std::memcpy(&words_[at], data, count * 4);
    return VkDeviceSize(at * 4);
  }
  // The device buffer holding them all, and a word of padding past the last.
  Buffer upload(Context& ctx) {
    words_.push_back(-7);
    Buffer b(ctx, words_.size() * 4);
    b.upload(words_.data(), words_.size() * 4);
    return b;
  }

 private:
  std::vector<int32_t> words_;
};

}  // namespace vkattn::tool
