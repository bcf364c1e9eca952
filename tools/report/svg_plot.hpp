// vkattn benchmark SVG bar chart: one bar per case against the device's
// measured ceiling. Self-contained SVG 1.1, no scripts, no external fonts.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "report/bench_report.hpp"

namespace vkattn::report {

// Writes a bar chart of every case's figure in `metric`:
//   "GB/s"    (alias "gbps")   -> stats_of().gbps,   ceiling copy_gbps
//   "TFLOP/s" (alias "tflops") -> stats_of().tflops, ceiling f16_tflops, or
//                                 bf16_tflops when every case has params
//                                 dtype=bf16 and bf16_tflops > 0
// Structure: title (suite, device, path) and subtitle (driver, version,
// timestamp); y axis with "nice" ticks and gridlines; one
// <rect class="mark"> per case, in order, with a <title> tooltip and a value
// label above it; x labels rotated -40 degrees (names longer than 40 code
// points are shortened with "…"); one dashed <line class="ceiling"> labelled
// e.g. "copy ceiling 4150 GB/s" when the ceiling is known (> 0). The y range
// always includes the ceiling and the tallest bar (plus headroom).
// Unverified cases are drawn in a lighter colour and listed as such in a
// legend. Throws std::invalid_argument for another metric.
void write_svg(std::ostream& os, const BenchMeta& meta, const std::vector<BenchCase>& cases,
               const std::string& metric);

// XML text/attribute escaping (& < > " '); invalid UTF-8 becomes U+FFFD and
// characters XML 1.0 forbids (C0 controls other than tab/newline/CR) are
// dropped.
std::string xml_escape(std::string_view s);

// "Nice" axis: the smallest step in {1, 2, 2.5, 5} x 10^k giving at most
// `max_ticks` intervals over [0, max_value]; returns {step, axis_max} with
// axis_max a multiple of step and >= max_value. A non-positive or
// non-finite max_value gives {0.2, 1}.
struct AxisScale {
  double step = 1;
  double max = 1;
};
AxisScale nice_axis(double max_value, int max_ticks = 6);

}  // namespace vkattn::report
