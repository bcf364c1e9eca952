// vkattn benchmark report writers: aligned text table, JSON, CSV (and, in
// svg_plot.hpp, an SVG bar chart). Pure C++20, no GPU.
#pragma once

#include <cstddef>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace vkattn::report {

// Measured roofline ceilings of the device (0 = unknown).
struct Ceilings {
  double copy_gbps = 0;    // device-memory copy bandwidth, GB/s (1e9 bytes/s)
  double f16_tflops = 0;   // f16 matrix throughput, TFLOP/s (1e12 FLOP/s)
  double bf16_tflops = 0;  // bf16 matrix throughput, TFLOP/s
  std::string matrix_path; // which matrix path the TFLOP/s ceilings were measured on
  double dispatch_us = 0;               // one small dispatch, as the suites time it
  double dependent_dispatches_us = 0;   // two, the second after a compute barrier
  double fill_dispatch_us = 0;          // a small vkCmdFillBuffer, then one dispatch after a transfer barrier
};

struct BenchCase {
  std::string name;                            // e.g. "B=64 ctx=4096"
  std::map<std::string, std::string> params;   // key/values describing the case
  std::vector<double> samples_us;              // every timed repetition, microseconds
  double bytes = 0;                            // minimum bytes the op must move
  double flops = 0;                            // unmasked FLOPs
  std::string bound;                           // "memory" or "compute"
  bool verified = false;
  double max_abs_err = 0, max_rel_err = 0;
};

struct BenchMeta {
  std::string suite, device, driver, path, library_version, timestamp;
  Ceilings ceilings;
};

struct BenchStats {
  double median_us = 0, min_us = 0, max_us = 0;
  double gbps = 0;      // bytes / median time, GB/s
  double tflops = 0;    // flops / median time, TFLOP/s
  double fraction = 0;  // of the relevant ceiling (see ceiling_for); 0 when unknown
  double mean_us = 0, stddev_us = 0;  // sample standard deviation (n-1); 0 for n < 2
  std::size_t samples = 0;
};

// The ceiling a case is measured against.
//   bound "memory"  -> copy_gbps, unit "GB/s",   label "copy ceiling"
//   bound "compute" -> f16_tflops, unit "TFLOP/s", label "f16 ceiling";
//                      bf16_tflops ("bf16 ceiling") instead when the case's
//                      params["dtype"] is "bf16" and bf16_tflops > 0.
//   anything else   -> value 0, unit "", label "".
struct CeilingRef {
  double value = 0;
  std::string unit;
  std::string label;
};
CeilingRef ceiling_for(const BenchCase& c, const Ceilings& ceilings);

// Median (mean of the two middle samples for even counts), min, max, mean,
// stddev, throughputs at the median time and the fraction of ceiling_for().
// An empty sample list or a non-positive median yields zero throughputs.
BenchStats stats_of(const BenchCase& c, const Ceilings& ceilings);

// Aligned table: header lines (suite, device, driver, path, version,
// timestamp, ceilings) then one row per case: case, median µs, min–max µs,
// GB/s, TFLOP/s, % of ceiling, bound, verification.
void write_table(std::ostream& os, const BenchMeta& meta, const std::vector<BenchCase>& cases);

// A JSON document (schema "vkattn-bench/1"):
//   {"schema", "meta": {suite, device, driver, path, library_version, timestamp},
//    "ceilings": {copy_gbps, f16_tflops, bf16_tflops, matrix_path},
//    "cases": [{name, params: {...}, bound, bytes, flops, verified, max_abs_err,
//               max_rel_err, stats: {median_us, min_us, max_us, mean_us,
//               stddev_us, samples, gbps, tflops, fraction, ceiling, ceiling_unit},
//               samples_us: [...]}]}
// Numbers are written shortest-round-trip; non-finite numbers as null.
void write_json(std::ostream& os, const BenchMeta& meta, const std::vector<BenchCase>& cases);

// CSV with a header row and one row per case, '\n' line ends, RFC 4180
// quoting. Columns: suite, device, driver, path, library_version, timestamp,
// case, <every params key over all cases, in first-seen order; a key that
// clashes with a fixed column is prefixed "param_">, bound, samples,
// median_us, min_us, max_us, mean_us, stddev_us, bytes, flops, gbps, tflops,
// fraction, verified, max_abs_err, max_rel_err.
void write_csv(std::ostream& os, const BenchMeta& meta, const std::vector<BenchCase>& cases);

// ---- formatting helpers (also used by the SVG writer) ----

// Shortest decimal that round-trips (JSON/CSV); "nan"/"inf" are not produced
// by this helper's callers for JSON (they write null).
std::string format_exact(double v);
// `v` rounded to `sig` significant digits, without exponent for |v| in
// [1e-4, 1e15); trailing zeros removed ("3.1", "3731", "0.00125").
std::string format_sig(double v, int sig);
// Microseconds: 4 significant figures, at most 3 decimals ("3.142", "31.42",
// "314.2", "3142", "31416").
std::string format_us(double us);
// GB/s: 1 decimal below 100, none above ("87.4", "3731").
std::string format_gbps(double gbps);
// TFLOP/s: 2 decimals below 10, 1 below 100, none above ("4.21", "42.1", "421").
std::string format_tflops(double tflops);
// A fraction as a percentage with one decimal ("87.3%").
std::string format_percent(double fraction);
// JSON string literal including the quotes; invalid UTF-8 becomes U+FFFD.
std::string json_quote(std::string_view s);
// One CSV field, quoted per RFC 4180 when it needs to be.
std::string csv_field(std::string_view s);
// Replaces invalid UTF-8 sequences with U+FFFD.
std::string sanitize_utf8(std::string_view s);
// Number of code points (used as display width for alignment).
std::size_t display_width(std::string_view s);

}  // namespace vkattn::report
