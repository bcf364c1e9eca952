// A block-sparse variant's name and its buffers as the ops take them
// (BlockSparseArgs::custom_mods and custom_buffers, BlockMaskBuild's), held
// in place: an engine that builds its arguments anew every step makes no
// heap allocation for them, whatever the names' lengths.
#pragma once
#include <vkattn/in_place_vector.hpp>
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
class BlockSparseCustomBuffers : public detail::InPlaceVector<BlockSparseCustomBuffers, BlockSparseCustomBuffer, 4> {
 public:
  static constexpr std::size_t kMax = 4;

  using InPlaceVector::InPlaceVector;
  BlockSparseCustomBuffers& operator=(std::initializer_list<BlockSparseCustomBuffer> buffers) {
    assign(buffers);
    return *this;
  }

  [[noreturn]] static void too_many(std::size_t count);
};

}  // namespace vkattn
