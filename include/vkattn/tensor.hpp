// TensorView: a typed, strided view into a caller's buffer. Ops take views and
// check them (shape, dtype, bounds) before anything is recorded.
#pragma once
#include <vkattn/buffer.hpp>
#include <vkattn/dtype.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace vkattn {

struct TensorView {
  BufferRef buffer;
  VkDeviceSize offset = 0;          // bytes from the start of the buffer; a multiple of the element size
  DType dtype = DType::f32;
  std::vector<int64_t> shape;       // outermost first
  std::vector<int64_t> strides;     // in elements; empty means contiguous (row-major)

  // A contiguous row-major view.
  static TensorView contiguous(BufferRef buffer, DType dtype, std::vector<int64_t> shape, VkDeviceSize offset = 0);

  int64_t numel() const;
  int64_t stride(std::size_t dim) const;   // the effective stride, contiguous when strides is empty
  // Bytes from the buffer's start up to one past the last element the view touches.
  VkDeviceSize end_byte() const;
  std::string shape_string() const;        // "[37, 8, 128]"
};

}  // namespace vkattn
