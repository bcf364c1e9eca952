// Host tensors in the dtypes the kernels read and write: encoding doubles into
// stored bytes and decoding them back, exactly.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "number_formats.hpp"

namespace vkattn::ref {

// Element types by name, as vkattn::DType spells them: f16, bf16, f32, fp8_e4m3, fp8_e5m2.
enum class ElemType { f16, bf16, f32, fp8_e4m3, fp8_e5m2 };
ElemType elem_type(std::string_view name);
std::size_t elem_size(ElemType t);
// The number format behind a narrow type (f32 has none: it is exact here).
Format format_of(ElemType t);

// values -> stored bytes (round to nearest even, saturating, as the kernels do).
std::vector<uint8_t> encode_values(ElemType t, const std::vector<double>& values);
// stored bytes -> exact values.
std::vector<double> decode_values(ElemType t, const std::vector<uint8_t>& bytes);
// Rounds each value to what the type can hold (encode then decode).
std::vector<double> round_to(ElemType t, const std::vector<double>& values);

// Whether `stored` (bits in the format) is a correct rounding of `exact`:
// the round-to-nearest-even value, or, when `exact` lies within rel_slack
// (relative to the spacing) of a midpoint, the neighbour on the other side.
// rel_slack covers the f32 arithmetic a kernel does before rounding.
bool is_correct_rounding(Format f, uint32_t stored, double exact, double rel_slack);

}  // namespace vkattn::ref
