// The capability report that `vkattn info` prints: device, limits, matrix
// features and the path each kernel runs on.
#pragma once
#include <string>

namespace vkattn {

class Context;

std::string capability_report_text(const Context& ctx);
std::string capability_report_json(const Context& ctx);

}  // namespace vkattn
