#include <vkattn/dtype.hpp>
#include <vkattn/error.hpp>

#include <string>

namespace vkattn {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f16: case DType::bf16: return 2;
    case DType::f32: case DType::i32: return 4;
    case DType::fp8_e4m3: case DType::fp8_e5m2: return 1;
    case DType::i64: return 8;
  }
  throw Error("dtype_size: unknown dtype value " + std::to_string(static_cast<uint32_t>(t)) +
              " (expected f16, bf16, f32, fp8_e4m3, fp8_e5m2, i32 or i64)");
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f32: return "f32";
    case DType::fp8_e4m3: return "fp8_e4m3";
    case DType::fp8_e5m2: return "fp8_e5m2";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
  }
  throw Error("dtype_name: unknown dtype value " + std::to_string(static_cast<uint32_t>(t)) +
              " (expected f16, bf16, f32, fp8_e4m3, fp8_e5m2, i32 or i64)");
}

DType parse_dtype(std::string_view name) {
  for (DType t : {DType::f16, DType::bf16, DType::f32, DType::fp8_e4m3, DType::fp8_e5m2, DType::i32, DType::i64})
    if (dtype_name(t) == name) return t;
  throw Error("unknown dtype '" + std::string(name) + "': expected f16, bf16, f32, fp8_e4m3, fp8_e5m2, i32 or i64");
}

bool is_fp8(DType t) { return t == DType::fp8_e4m3 || t == DType::fp8_e5m2; }

}  // namespace vkattn
