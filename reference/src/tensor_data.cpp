#include "vkattn_ref/tensor_data.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace vkattn::ref {

ElemType elem_type(std::string_view name) {
  if (name == "f16") return ElemType::f16;
  if (name == "bf16") return ElemType::bf16;
  if (name == "f32") return ElemType::f32;
  if (name == "fp8_e4m3") return ElemType::fp8_e4m3;
  if (name == "fp8_e5m2") return ElemType::fp8_e5m2;
  throw std::invalid_argument("unknown element type '" + std::string(name) + "'");
}

std::size_t elem_size(ElemType t) {
  switch (t) {
    case ElemType::f16: case ElemType::bf16: return 2;
    case ElemType::f32: return 4;
    default: return 1;
  }
}

Format format_of(ElemType t) {
  switch (t) {
    case ElemType::f16: return Format::f16;
    case ElemType::bf16: return Format::bf16;
    case ElemType::fp8_e4m3: return Format::e4m3;
    case ElemType::fp8_e5m2: return Format::e5m2;
    case ElemType::f32: break;
  }
  throw std::invalid_argument("f32 has no narrow format");
}

std::vector<uint8_t> encode_values(ElemType t, const std::vector<double>& values) {
  const std::size_t es = elem_size(t);
  std::vector<uint8_t> out(values.size() * es);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (t == ElemType::f32) {
      float f = static_cast<float>(values[i]);
      std::memcpy(&out[i * 4], &f, 4);
    } else {
      uint32_t bits = encode(format_of(t), values[i]);
      std::memcpy(&out[i * es], &bits, es);   // little-endian: the low bytes
    }
  }
  return out;
}

std::vector<double> decode_values(ElemType t, const std::vector<uint8_t>& bytes) {
  const std::size_t es = elem_size(t);
  std::vector<double> out(bytes.size() / es);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (t == ElemType::f32) {
      float f;
      std::memcpy(&f, &bytes[i * 4], 4);
      out[i] = f;
    } else {
      uint32_t bits = 0;
      std::memcpy(&bits, &bytes[i * es], es);
      out[i] = decode(format_of(t), bits);
    }
  }
  return out;
}

std::vector<double> round_to(ElemType t, const std::vector<double>& values) {
  return decode_values(t, encode_values(t, values));
}

bool is_correct_rounding(Format f, uint32_t stored, double exact, double rel_slack) {
  uint32_t nearest = encode(f, exact);
  if (stored == nearest) return true;
  double got = decode(f, stored);
  if (std::isnan(got) || std::isnan(exact)) return false;
  if (std::fabs(exact) > max_finite(f)) return false;   // saturation is exact
  // The other neighbour is acceptable only when exact sits at a midpoint, to
  // within the arithmetic error allowed.
  double gap = ulp_at(f, exact);
  double near = decode(f, nearest);
  return std::fabs(std::fabs(got - exact) - std::fabs(near - exact)) <= rel_slack * gap &&
         std::fabs(got - exact) <= 0.5 * gap * (1 + rel_slack);
}

}  // namespace vkattn::ref
