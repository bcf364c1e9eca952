// TensorView: a typed, strided view into a caller's buffer. Ops take views and
// check them (shape, dtype, bounds) before anything is recorded.
//
// A view is a plain value that owns no memory (its extents are held in place,
// up to Extents::kMaxRank of them), so an engine may build its views anew every
// step without a heap allocation, copy them freely, and share them between
// threads; the buffer it names must outlive every recording that uses it.
#pragma once
#include <vkattn/buffer.hpp>
#include <vkattn/dtype.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

namespace vkattn {

// Up to kMaxRank integers held in place, with the parts of std::vector's
// interface that shapes and strides need. More than kMaxRank throws
// vkattn::Error (the ops take at most 4).
class Extents {
 public:
  static constexpr std::size_t kMaxRank = 8;
  using value_type = int64_t;
  using size_type = std::size_t;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;

  Extents() = default;
  Extents(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
  Extents(const std::vector<int64_t>& values) { assign(values.begin(), values.end()); }   // NOLINT: a vector converts
  Extents& operator=(std::initializer_list<int64_t> values) {
    assign(values.begin(), values.end());
    return *this;
  }

  template <class It, class = std::enable_if_t<!std::is_integral_v<It>>>
  void assign(It first, It last) {
    clear();
    for (; first != last; ++first) push_back(static_cast<int64_t>(*first));
  }
  void assign(size_type count, int64_t value) {
    clear();
    resize(count, value);
  }

  size_type size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t* data() { return values_.data(); }
  const int64_t* data() const { return values_.data(); }
  iterator begin() { return values_.data(); }
  iterator end() { return values_.data() + size_; }
  const_iterator begin() const { return values_.data(); }
  const_iterator end() const { return values_.data() + size_; }
  int64_t& operator[](size_type i) { return values_[i]; }
  int64_t operator[](size_type i) const { return values_[i]; }
  int64_t& front() { return values_[0]; }
  int64_t front() const { return values_[0]; }
  int64_t& back() { return values_[size_ - 1]; }
  int64_t back() const { return values_[size_ - 1]; }

  void clear() { size_ = 0; }
  void push_back(int64_t value) {
    if (size_ == kMaxRank) too_many(size_ + 1);
    values_[size_++] = value;
  }
  void pop_back() { --size_; }
  void resize(size_type count, int64_t value = 0) {
    if (count > kMaxRank) too_many(count);
    for (size_type i = size_; i < count; ++i) values_[i] = value;
    size_ = static_cast<uint32_t>(count);
  }
  iterator insert(const_iterator pos, int64_t value);
  iterator erase(const_iterator pos);

  std::vector<int64_t> to_vector() const { return {begin(), end()}; }
  friend bool operator==(const Extents& a, const Extents& b) {
    if (a.size_ != b.size_) return false;
    for (size_type i = 0; i < a.size_; ++i)
      if (a.values_[i] != b.values_[i]) return false;
    return true;
  }
  friend bool operator!=(const Extents& a, const Extents& b) { return !(a == b); }

 private:
  [[noreturn]] static void too_many(size_type count);
  std::array<int64_t, kMaxRank> values_{};
  uint32_t size_ = 0;
};

struct TensorView {
  BufferRef buffer;
  VkDeviceSize offset = 0;          // bytes from the start of the buffer; a multiple of the element size
  DType dtype = DType::f32;
  Extents shape;                    // outermost first
  Extents strides;                  // in elements; empty means contiguous (row-major)

  // A contiguous row-major view.
  static TensorView contiguous(BufferRef buffer, DType dtype, Extents shape, VkDeviceSize offset = 0);

  int64_t numel() const;
  int64_t stride(std::size_t dim) const;   // the effective stride, contiguous when strides is empty
  // Bytes from the buffer's start up to one past the last element the view touches.
  VkDeviceSize end_byte() const;
  std::string shape_string() const;        // "[37, 8, 128]"
};

}  // namespace vkattn
