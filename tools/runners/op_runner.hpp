// What `vkattn run OP` reports, shared by every op's runner.
#pragma once
#include <string>

namespace vkattn::tool {

struct RunResult {
  bool pass = false;
  double max_abs_err = 0;     // against the float64 reference
  double max_rel_err = 0;
  std::string tolerance;      // what PASS means for this op, in words
  std::string failure;        // first mismatch, when !pass
  double gpu_us = 0;          // median GPU time of the op
  double bytes = 0;           // bytes the op must move
  double flops = 0;           // or, for an op bound by arithmetic, the FLOPs it must do
  std::string summary;        // one line describing the case
};

}  // namespace vkattn::tool
