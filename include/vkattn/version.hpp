#pragma once
namespace vkattn {
inline constexpr const char* version_string = "0.1.0";
}
