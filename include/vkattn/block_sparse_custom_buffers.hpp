// A block-sparse variant's name and its buffers as the ops take them
// (BlockSparseArgs::custom_mods and custom_buffers, BlockMaskBuild's), held
// in place: an engine that builds its arguments anew every step makes no
// heap allocation for them, whatever the names' lengths.
#pragma once
#include <vkattn/tensor.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace vkattn {

// A name of up to kMaxBytes bytes, held in place; converts from and to a
// string. A longer name throws vkattn::Error (register_block_sparse_variant
// refuses to register one, so every registered name fits).
class VariantName {
 public:
  static constexpr std::size_t kMaxBytes = 63;

  VariantName() = default;
  VariantName(std::string_view name) { assign(name); }                  // NOLINT: names convert
  VariantName(const char* name) { assign(name ? std::string_view(name) : std::string_view()); }   // NOLINT: null is ""
  VariantName(const std::string& name) { assign(std::string_view(name)); }   // NOLINT

  std::string_view view() const { return {chars_.data(), size_}; }
  const char* c_str() const { return chars_.data(); }   // null-terminated
  operator std::string_view() const { return view(); }   // NOLINT: reads as a string
  std::string str() const { return std::string(view()); }
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  void clear() { assign({}); }

  friend bool operator==(const VariantName& a, const VariantName& b) { return a.view() == b.view(); }
  friend bool operator==(const VariantName& a, std::string_view b) { return a.view() == b; }
  friend bool operator==(const VariantName& a, const char* b) { return a.view() == std::string_view(b); }
  friend bool operator==(const VariantName& a, const std::string& b) { return a.view() == std::string_view(b); }

 private:
  void assign(std::string_view name);
  std::array<char, kMaxBytes + 1> chars_{};   // with a terminating null
  uint8_t size_ = 0;
};

// One of a variant's buffers, bound by the name the variant declares it with.
struct BlockSparseCustomBuffer {
  VariantName name;
  TensorView view;
};

// Up to kMax buffers (a variant declares at most that many), held in place,
// with the parts of std::vector's interface that building them needs:
//   args.custom_buffers = {{"key_weight", weights}, {"head_shift", shifts}};
// More than kMax throws vkattn::Error.
class BlockSparseCustomBuffers {
 public:
  static constexpr std::size_t kMax = 4;
  using value_type = BlockSparseCustomBuffer;
  using iterator = BlockSparseCustomBuffer*;
  using const_iterator = const BlockSparseCustomBuffer*;

  BlockSparseCustomBuffers() = default;
  BlockSparseCustomBuffers(std::initializer_list<BlockSparseCustomBuffer> buffers) { assign(buffers); }
  BlockSparseCustomBuffers& operator=(std::initializer_list<BlockSparseCustomBuffer> buffers) {
    assign(buffers);
    return *this;
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  iterator begin() { return entries_.data(); }
  iterator end() { return entries_.data() + size_; }
  const_iterator begin() const { return entries_.data(); }
  const_iterator end() const { return entries_.data() + size_; }
  BlockSparseCustomBuffer& operator[](std::size_t i) { return entries_[i]; }
  const BlockSparseCustomBuffer& operator[](std::size_t i) const { return entries_[i]; }

  void clear() { size_ = 0; }
  void push_back(const BlockSparseCustomBuffer& buffer) {
    if (size_ == kMax) too_many(size_ + 1);
    entries_[size_++] = buffer;
  }

 private:
  void assign(std::initializer_list<BlockSparseCustomBuffer> buffers) {
    if (buffers.size() > kMax) too_many(buffers.size());
    clear();
    for (const auto& b : buffers) entries_[size_++] = b;
  }
  [[noreturn]] static void too_many(std::size_t count);
  std::array<BlockSparseCustomBuffer, kMax> entries_{};
  uint32_t size_ = 0;
};

}  // namespace vkattn
