#include "op_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace vkattn::detail {

namespace {

std::string named(std::string_view op, std::string_view name) { return std::string(op) + ": " + std::string(name); }

// No buffer is this large; sizes below it fit 64-bit arithmetic with room to spare.
constexpr __int128 kMaxViewBytes = __int128(1) << 62;

}  // namespace

void check_view(std::string_view op, std::string_view name, const TensorView& v, std::initializer_list<DType> dtypes,
                std::initializer_list<int64_t> shape, std::initializer_list<const char*> dims) {
  if (std::find(dtypes.begin(), dtypes.end(), v.dtype) == dtypes.end()) {
    std::string list;
    for (DType t : dtypes) list += (list.empty() ? "" : ", ") + std::string(dtype_name(t));
    throw Error(named(op, name) + " has dtype " + dtype_text(v.dtype) + ", expected " + list);
  }
  bool ok = v.shape.size() == shape.size();
  for (std::size_t d = 0; ok && d < shape.size(); ++d)
    ok = v.shape[d] >= 0 && (shape.begin()[d] < 0 || v.shape[d] == shape.begin()[d]);
  if (!ok) {
    std::string expected = "[", names = "[";
    std::size_t i = 0;
    for (int64_t e : shape) {
      expected += (i ? ", " : "") + (e < 0 ? std::string("*") : std::to_string(e));
      names += (i ? ", " : "") + std::string(dims.begin()[i]);
      ++i;
    }
    throw Error(named(op, name) + " has shape " + v.shape_string() + ", expected " + expected + "] " + names + "]");
  }
  if (!v.strides.empty() && v.strides.size() != v.shape.size())
    throw Error(named(op, name) + " has " + std::to_string(v.strides.size()) + " strides for its " +
                std::to_string(v.shape.size()) + " dimensions " + v.shape_string() +
                ": expected one stride per dimension, or none (contiguous)");
  // Extents whose product no buffer could hold: refused before anything
  // computes element counts or contiguous strides from them in 64 bits.
  // (Zero extents are left out: the library multiplies extents left to right.)
  __int128 bytes = dtype_size(v.dtype);
  for (int64_t e : v.shape)
    if (e > 0 && (bytes *= e) > kMaxViewBytes)
      throw Error(named(op, name) + " has shape " + v.shape_string() + ": more than 2^62 bytes of " +
                  dtype_text(v.dtype) + ", more than any buffer holds");
}

void check_strides(std::string_view op, std::string_view name, const TensorView& v) {
  if (!v.shape.empty() && v.stride(v.shape.size() - 1) != 1 && v.shape.back() > 1)
    throw Error(named(op, name) + " must be contiguous in its last dimension (stride " +
                std::to_string(v.stride(v.shape.size() - 1)) + ", expected 1)");
  for (std::size_t d = 0; d < v.shape.size(); ++d)
    if (v.stride(d) < 0 || v.stride(d) > std::numeric_limits<uint32_t>::max())
      throw Error(named(op, name) + ": stride " + std::to_string(v.stride(d)) + " of dimension " + std::to_string(d) +
                  " is not supported: expected 0 to 2^32-1 elements");
  // The byte past the view's last element, which the bounds check compares
  // with the buffer's size: in 128 bits, since an offset near 2^64 (or
  // extents times strides past 2^63) would wrap and pass that check.
  if (v.numel() == 0) return;
  __int128 last = 0;
  for (std::size_t d = 0; d < v.shape.size(); ++d) last += __int128(v.shape[d] - 1) * v.stride(d);
  const __int128 end = __int128(v.offset) + (last + 1) * __int128(dtype_size(v.dtype));
  if (end > kMaxViewBytes)
    throw Error(named(op, name) + ": the view " + v.shape_string() + " from byte " + std::to_string(v.offset) +
                " reaches past byte 2^62, beyond any buffer");
}

void check_distinct_elements(std::string_view op, std::string_view name, const TensorView& v) {
  // An empty view has no elements to share (TensorView::contiguous gives
  // the dimensions outside an extent of 0 a stride of 0).
  if (v.numel() == 0) return;
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
  // Insertion sort: at most 8 entries (and std::sort's unrolled threshold of
  // 16 made GCC 12 warn of reads past the array it never takes).
  for (std::size_t i = 1; i < n; ++i)
    for (std::size_t j = i; j > 0 && dims[j].stride < dims[j - 1].stride; --j) std::swap(dims[j], dims[j - 1]);
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

std::string float_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

void check_reciprocal_scale(std::string_view prefix, std::string_view name, float value) {
  if (value >= std::numeric_limits<float>::min() && std::isfinite(value)) return;
  throw Error(std::string(prefix) + std::string(name) + " = " + float_text(value) +
              " is not supported: expected a finite value > 0, at least 2^-126 (so that its reciprocal is finite)");
}

void check_apart_from_cache(std::string_view op, std::span<const NamedView> views, const PagedKvCache& cache,
                            std::string_view rule) {
  for (const NamedView& nv : views) {
    if (!nv.view || nv.view->numel() == 0) continue;
    const TensorView& v = *nv.view;
    for (uint32_t i = 0; i < cache.num_chunks(); ++i) {
      const KvCacheChunk& c = cache.chunk(i);
      const VkDeviceSize bytes = VkDeviceSize(c.num_blocks) * cache.block_bytes();
      for (bool is_v : {false, true}) {
        const BufferRef& b = is_v ? c.v_buffer : c.k_buffer;
        const VkDeviceSize at = is_v ? c.v_offset : c.k_offset;
        if (!b.buffer || b.buffer != v.buffer.buffer || !(v.offset < at + bytes && at < v.end_byte())) continue;
        throw Error(std::string(op) + ": " + nv.name + " (bytes " + std::to_string(v.offset) + " to " + std::to_string(v.end_byte()) +
                    ") overlaps the cache's " + (is_v ? "V" : "K") + " chunk " + std::to_string(i) + " (bytes " +
                    std::to_string(at) + " to " + std::to_string(at + bytes) +
                    ") in the same buffer: " + std::string(rule));
      }
    }
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
