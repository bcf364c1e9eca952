#include <vkattn/error.hpp>
#include <vkattn/tensor.hpp>

#include <string>

namespace vkattn {

void Extents::too_many(size_type count) {
  throw Error("TensorView: " + std::to_string(count) + " dimensions; at most " + std::to_string(kMaxRank) +
              " are held (the ops take at most 4)");
}

TensorView TensorView::contiguous(BufferRef buffer, DType dtype, Extents shape, VkDeviceSize offset) {
  TensorView v;
  v.buffer = buffer;
  v.offset = offset;
  v.dtype = dtype;
  v.shape = shape;
  return v;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t TensorView::stride(std::size_t dim) const {
  if (dim >= shape.size())
    throw Error("TensorView::stride(" + std::to_string(dim) + "): the view has " + std::to_string(shape.size()) + " dimensions");
  if (!strides.empty() && strides.size() != shape.size())
    throw Error("TensorView: strides has " + std::to_string(strides.size()) + " entries for the " + std::to_string(shape.size()) +
                " dimensions of shape " + shape_string() + " (expected one per dimension, or none for a contiguous view)");
  if (!strides.empty()) return strides[dim];
  int64_t s = 1;
  for (std::size_t i = dim + 1; i < shape.size(); ++i) s *= shape[i];
  return s;
}

VkDeviceSize TensorView::end_byte() const {
  if (numel() == 0) return offset;
  int64_t last = 0;
  for (std::size_t i = 0; i < shape.size(); ++i) last += (shape[i] - 1) * stride(i);
  return offset + VkDeviceSize(last + 1) * dtype_size(dtype);
}

std::string TensorView::shape_string() const {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace vkattn
