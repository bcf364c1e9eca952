// A canary arena: one mapped buffer that holds a test's views at (random)
// offsets, every byte between and around them filled with a pattern. After a
// run, every byte that is not an element of an output view must be exactly
// what it was before (the pattern, or the inputs the test wrote): a kernel
// that writes one byte past a view, into the gap of a strided view, or into
// an input is caught by its first run, whatever the driver does with
// out-of-range writes.
#pragma once
#include <vkattn/vkattn.hpp>
#include <vkattn_ref/random.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace vkattn::test {

class CanaryArena {
 public:
  CanaryArena(Context& ctx, VkDeviceSize bytes, uint64_t seed)
      : buf_(ctx, bytes, MemoryKind::device_local_mapped), rng_(seed), expected_(bytes), writable_(bytes) {
    reset();
  }
  BufferRef ref() const { return buf_.ref(); }
  VkDeviceAddress address() const { return buf_.device_address(); }
  VkDeviceSize size() const { return buf_.size(); }
  uint8_t* data() const { return static_cast<uint8_t*>(buf_.mapped()); }

  // Forgets every placement and refills the whole buffer with the pattern.
  void reset() {
    for (std::size_t i = 0; i < expected_.size(); i += 8) {
      const uint64_t word = rng_.next() | 0x8080808080808080ull;   // no zero byte: zeros are what kernels write most
      std::memcpy(&expected_[i], &word, std::min<std::size_t>(8, expected_.size() - i));
    }
    std::memcpy(data(), expected_.data(), expected_.size());
    rewind();
  }
  // Forgets every placement; the bytes stay as they are (and as expected).
  void rewind() {
    if (any_writable_) std::fill(writable_.begin(), writable_.end(), 0);
    any_writable_ = false;
    next_ = 0;
    regions_.clear();
  }
  // Room for `bytes` at an offset that is a multiple of `align`, after a
  // random gap of 16 to 16 + extra_gap canary bytes (a view shifted by less
  // than its element still misses its neighbours); throws when the arena is full.
  VkDeviceSize place(VkDeviceSize bytes, VkDeviceSize align, const std::string& name, uint32_t extra_gap = 80) {
    VkDeviceSize at = next_ + 16 + rng_.below(extra_gap + 1);
    at = (at + align - 1) / align * align;
    if (at + bytes + 64 > size()) throw Error("CanaryArena: no room for " + name + " (" + std::to_string(bytes) + " bytes)");
    next_ = at + bytes;
    high_water_ = std::max(high_water_, next_);
    regions_.push_back({at, bytes, name});
    return at;
  }
  // Writes bytes the kernels read (they become part of what must not change).
  void write(VkDeviceSize offset, const void* src, std::size_t n) {
    std::memcpy(data() + offset, src, n);
    std::memcpy(expected_.data() + offset, src, n);
  }
  // The bytes of `v`'s elements (not the gaps between strided rows) may change.
  void allow_writes(const TensorView& v) {
    const std::size_t es = dtype_size(v.dtype);
    std::vector<int64_t> idx(v.shape.size(), 0);
    if (v.numel() == 0) return;
    any_writable_ = true;
    while (true) {
      int64_t e = 0;
      for (std::size_t d = 0; d < idx.size(); ++d) e += idx[d] * v.stride(d);
      std::fill_n(writable_.begin() + v.offset + e * es, es, 1);
      std::size_t d = idx.size();
      while (d > 0 && ++idx[d - 1] == v.shape[d - 1]) idx[--d] = 0;
      if (d == 0) return;
    }
  }
  // "" when every byte outside the writable elements is as expected, else
  // where the first changed byte is (which placement it is in or after).
  // The bytes are read in one copy: a GPU's mapped device memory is uncached,
  // and reading it byte by byte made the hostile tests take minutes there.
  // Unless `whole`, only the bytes up to the furthest placement so far (and
  // a margin) are read, where a write past a view lands; the fixtures read
  // the whole arena once, at the end.
  std::string check(bool whole = false) const {
    const std::size_t n = whole ? expected_.size() : std::min<std::size_t>(expected_.size(), high_water_ + kCheckMargin);
    std::vector<uint8_t> now(n);
    std::memcpy(now.data(), data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      if (writable_[i] || now[i] == expected_[i]) continue;
      std::string where = "before every view";
      for (const auto& r : regions_)
        if (i >= r.offset) where = i < r.offset + r.bytes ? "inside " + r.name + " (not one of its output elements)"
                                                          : "past " + r.name + " (" + std::to_string(i - r.offset - r.bytes + 1) + " bytes after its end)";
      return "arena byte " + std::to_string(i) + " " + where + " changed from " + std::to_string(expected_[i]) + " to " +
             std::to_string(now[i]);
    }
    return "";
  }
  // Makes the current contents (e.g. outputs a run wrote) the expected ones.
  void accept_current() { std::memcpy(expected_.data(), data(), expected_.size()); }

 private:
  struct Region {
    VkDeviceSize offset, bytes;
    std::string name;
  };
  Buffer buf_;
  ref::Rng rng_;
  std::vector<uint8_t> expected_, writable_;
  bool any_writable_ = false;
  static constexpr VkDeviceSize kCheckMargin = 64 << 10;
  VkDeviceSize next_ = 0, high_water_ = 0;
  std::vector<Region> regions_;
};

}  // namespace vkattn::test
