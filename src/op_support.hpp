// Internal: small helpers every op uses to check its arguments.
#pragma once
#include <vkattn/error.hpp>
#include <vkattn/kv_cache.hpp>
#include <vkattn/tensor.hpp>

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace vkattn::detail {

// The words of a specialization-constant struct (abi::*Spec): field i is constant_id i.
template <class Spec>
std::span<const uint32_t> spec_words(const Spec& s) {
  static_assert(std::is_standard_layout_v<Spec> && sizeof(Spec) % sizeof(uint32_t) == 0);
  return {reinterpret_cast<const uint32_t*>(&s), sizeof(Spec) / sizeof(uint32_t)};
}

// Checks a view's dtype, shape and number of strides, and that its extents
// hold fewer than 2^62 bytes. `dims` names each dimension (for messages); an
// expected extent of -1 accepts any size.
void check_view(std::string_view op, std::string_view name, const TensorView& v, std::initializer_list<DType> dtypes,
                std::initializer_list<int64_t> shape, std::initializer_list<const char*> dims);

// Requires the innermost dimension to be contiguous, all strides to be
// non-negative and small enough for 32-bit indexing in shaders, and the
// view's end (offset plus span) to stay below 2^62 bytes. After check_view.
void check_strides(std::string_view op, std::string_view name, const TensorView& v);

// For outputs: throws when two elements of the view share memory (a zero
// stride, or strides that interleave).
void check_distinct_elements(std::string_view op, std::string_view name, const TensorView& v);

// A view and its name in messages; a null view is absent and skipped.
struct NamedView {
  const TensorView* view;
  const char* name;
};
// Throws when an output's bytes overlap another output's or an input's in the
// same buffer (compared as byte ranges: views that interleave without
// touching the same bytes are refused too).
void check_apart(std::string_view op, std::span<const NamedView> outputs, std::span<const NamedView> inputs);

// Throws when a view's bytes overlap a chunk of `cache` given as a buffer
// (chunks given as bare addresses cannot be compared), saying `rule`: an
// op's outputs must not share memory with the cache it reads, nor its inputs
// with the cache it writes. Null views are skipped.
void check_apart_from_cache(std::string_view op, std::span<const NamedView> views, const PagedKvCache& cache,
                            std::string_view rule);

uint32_t to_u32(std::string_view op, std::string_view what, int64_t value);

// A float as "%g" writes it, for messages: std::to_string prints 1e-40 as
// 0.000000 and 2^100 with 31 digits.
std::string float_text(double value);

// Checks a scale the kernels divide by (they multiply by its f32
// reciprocal): finite and at least 2^-126, below which the reciprocal is inf
// and a zero value would be stored as NaN. Throws "<prefix><name> = <value>
// is not supported: expected ...".
void check_reciprocal_scale(std::string_view prefix, std::string_view name, float value);

// Checks a cache geometry: block_size, num_kv_heads, head_size, dtype and
// layout (kv_cache.cpp). `prefix` begins each message ("PagedKvCache: ", or
// "paged_attention: the cache's " where a plan or pipelines are made for a
// KvCacheConfig alone).
void check_cache_geometry(std::string_view prefix, const KvCacheConfig& c);

// A dtype for an error message: its name, or "DType(42)" for a value that is
// none (dtype_name would throw, losing the message being built).
std::string dtype_text(DType t);

}  // namespace vkattn::detail
