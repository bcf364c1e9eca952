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
#include <vkattn/in_place_vector.hpp>

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
class Extents : public detail::InPlaceVector<Extents, int64_t, 8> {
 public:
  static constexpr std::size_t kMaxRank = 8;

  using InPlaceVector::InPlaceVector;
  Extents(const std::vector<int64_t>& values) { assign(values.begin(), values.end()); }   // NOLINT: a vector converts
  Extents& operator=(std::initializer_list<int64_t> values) {
    assign(values);
    return *this;
  }

  std::vector<int64_t> to_vector() const { return {begin(), end()}; }
  friend bool operator==(const Extents& a, const Extents& b) {
    if (a.size() != b.size()) return false;
    for (size_type i = 0; i < a.size(); ++i)
      if (a[i] != b[i]) return false;
    return true;
  }
  friend bool operator!=(const Extents& a, const Extents& b) { return !(a == b); }

  [[noreturn]] static void too_many(size_type count);
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
