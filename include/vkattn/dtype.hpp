// Element types of tensors and caches.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vkattn {

// Values match the shader ABI (shaders/include/abi/common.h).
enum class DType : uint32_t { f16 = 0, bf16 = 1, f32 = 2, fp8_e4m3 = 3, fp8_e5m2 = 4, i32 = 5, i64 = 6 };

std::size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
// Parses "f16", "bf16", "f32", "fp8_e4m3", "fp8_e5m2", "i32", "i64"; throws vkattn::Error otherwise.
DType parse_dtype(std::string_view name);
bool is_fp8(DType t);

}  // namespace vkattn
