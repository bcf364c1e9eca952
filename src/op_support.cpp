#include "op_support.hpp"

#include <algorithm>
#include <limits>

namespace vkattn::detail {

void check_view(std::string_view op, std::string_view name, const TensorView& v, std::initializer_list<DType> dtypes,
                std::initializer_list<int64_t> shape, std::initializer_list<const char*> dims) {
  std::string what = std::string(op) + ": " + std::string(name);
  if (std::find(dtypes.begin(), dtypes.end(), v.dtype) == dtypes.end()) {
    std::string list;
    for (DType t : dtypes) list += (list.empty() ? "" : ", ") + std::string(dtype_name(t));
    throw Error(what + " has dtype " + dtype_text(v.dtype) + ", expected " + list);
  }
  std::string expected = "[", names = "[";
  std::size_t i = 0;
  for (int64_t e : shape) {
    expected += (i ? ", " : "") + (e < 0 ? std::string("*") : std::to_string(e));
    names += (i ? ", " : "") + std::string(dims.begin()[i]);
    ++i;
  }
  expected += "]";
  names += "]";
  bool ok = v.shape.size() == shape.size() && (v.strides.empty() || v.strides.size() == v.shape.size());
  for (std::size_t d = 0; ok && d < shape.size(); ++d)
    ok = v.shape[d] >= 0 && (shape.begin()[d] < 0 || v.shape[d] == shape.begin()[d]);
  if (!ok) throw Error(what + " has shape " + v.shape_string() + ", expected " + expected + " " + names);
}

void check_strides(std::string_view op, std::string_view name, const TensorView& v) {
  std::string what = std::string(op) + ": " + std::string(name);
  if (!v.shape.empty() && v.stride(v.shape.size() - 1) != 1 && v.shape.back() > 1)
    throw Error(what + " must be contiguous in its last dimension (stride " + std::to_string(v.stride(v.shape.size() - 1)) + ", expected 1)");
  for (std::size_t d = 0; d < v.shape.size(); ++d)
    if (v.stride(d) < 0 || v.stride(d) > std::numeric_limits<uint32_t>::max())
      throw Error(what + ": stride " + std::to_string(v.stride(d)) + " of dimension " + std::to_string(d) +
                  " is not supported: expected 0 to 2^32-1 elements");
}

uint32_t to_u32(std::string_view op, std::string_view what, int64_t value) {
  if (value < 0 || value > std::numeric_limits<uint32_t>::max())
    throw Error(std::string(op) + ": " + std::string(what) + " = " + std::to_string(value) + " is out of range: expected 0 to 2^32-1");
  return static_cast<uint32_t>(value);
}

std::string dtype_text(DType t) {
  switch (t) {
    case DType::f16: case DType::bf16: case DType::f32: case DType::fp8_e4m3: case DType::fp8_e5m2:
    case DType::i32: case DType::i64:
      return std::string(dtype_name(t));
  }
  return "DType(" + std::to_string(static_cast<uint32_t>(t)) + ")";
}

}  // namespace vkattn::detail
