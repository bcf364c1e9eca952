#include "op_support.hpp"

#include <algorithm>
#include <limits>

namespace vkattn::detail {

namespace {

std::string named(std::string_view op, std::string_view name) { return std::string(op) + ": " + std::string(name); }

}  // namespace

void check_view(std::string_view op, std::string_view name, const TensorView& v, std::initializer_list<DType> dtypes,
                std::initializer_list<int64_t> shape, std::initializer_list<const char*> dims) {
  if (std::find(dtypes.begin(), dtypes.end(), v.dtype) == dtypes.end()) {
    std::string list;
    for (DType t : dtypes) list += (list.empty() ? "" : ", ") + std::string(dtype_name(t));
    throw Error(named(op, name) + " has dtype " + dtype_text(v.dtype) + ", expected " + list);
  }
  bool ok = v.shape.size() == shape.size() && (v.strides.empty() || v.strides.size() == v.shape.size());
  for (std::size_t d = 0; ok && d < shape.size(); ++d)
    ok = v.shape[d] >= 0 && (shape.begin()[d] < 0 || v.shape[d] == shape.begin()[d]);
  if (ok) return;
  std::string expected = "[", names = "[";
  std::size_t i = 0;
  for (int64_t e : shape) {
    expected += (i ? ", " : "") + (e < 0 ? std::string("*") : std::to_string(e));
    names += (i ? ", " : "") + std::string(dims.begin()[i]);
    ++i;
  }
  throw Error(named(op, name) + " has shape " + v.shape_string() + ", expected " + expected + "] " + names + "]");
}

void check_strides(std::string_view op, std::string_view name, const TensorView& v) {
  if (!v.shape.empty() && v.stride(v.shape.size() - 1) != 1 && v.shape.back() > 1)
    throw Error(named(op, name) + " must be contiguous in its last dimension (stride " +
                std::to_string(v.stride(v.shape.size() - 1)) + ", expected 1)");
  for (std::size_t d = 0; d < v.shape.size(); ++d)
    if (v.stride(d) < 0 || v.stride(d) > std::numeric_limits<uint32_t>::max())
      throw Error(named(op, name) + ": stride " + std::to_string(v.stride(d)) + " of dimension " + std::to_string(d) +
                  " is not supported: expected 0 to 2^32-1 elements");
}

void check_distinct_elements(std::string_view op, std::string_view name, const TensorView& v) {
  // Dimensions of more than one element, innermost (smallest stride) first:
  // each must step past everything the dimensions inside it span.
  struct Dim { int64_t extent, stride; };
  Dim dims[8];
  std::size_t n = 0;
  for (std::size_t d = 0; d < v.shape.size(); ++d) {
    if (v.shape[d] <= 1) continue;
    if (n == 8) return;   // no op takes views of more than 8 dimensions
    dims[n++] = {v.shape[d], v.stride(d)};
  }
  std::sort(dims, dims + n, [](const Dim& a, const Dim& b) { return a.stride < b.stride; });
  int64_t span = 1;   // elements the inner dimensions cover
  for (std::size_t i = 0; i < n; ++i) {
    if (dims[i].stride < span)
      throw Error(named(op, name) + " " + v.shape_string() + " has strides under which elements share memory (a stride of " +
                  std::to_string(dims[i].stride) + " where " + std::to_string(span) +
                  " elements lie inside it): an output needs distinct elements");
    span = dims[i].stride * dims[i].extent;
  }
}

void check_apart(std::string_view op, std::span<const NamedView> outputs, std::span<const NamedView> others) {
  auto overlap = [](const TensorView& a, const TensorView& b) {
    if (a.buffer.buffer != b.buffer.buffer || a.numel() == 0 || b.numel() == 0) return false;
    return a.offset < b.end_byte() && b.offset < a.end_byte();
  };
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].view) continue;
    auto clash = [&](const NamedView& o) {
      if (!o.view || !overlap(*outputs[i].view, *o.view)) return;
      throw Error(std::string(op) + ": " + outputs[i].name + " (bytes " + std::to_string(outputs[i].view->offset) + " to " +
                  std::to_string(outputs[i].view->end_byte()) + ") overlaps " + o.name + " (bytes " +
                  std::to_string(o.view->offset) + " to " + std::to_string(o.view->end_byte()) +
                  ") in the same buffer: an output must not share memory with another view");
    };
    for (std::size_t j = i + 1; j < outputs.size(); ++j) clash(outputs[j]);
    for (const auto& o : others) clash(o);
  }
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
