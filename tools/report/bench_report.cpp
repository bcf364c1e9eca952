#include "report/bench_report.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <numeric>
#include <system_error>

namespace vkattn::report {

// ---------------------------------------------------------------- helpers ---

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c < 0x80) len = 1;
    else if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;  // no UTF-16 surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    }
    bool ok = len > 0 && i + len <= n;
    for (std::size_t k = 1; ok && k < len; ++k) {
      const unsigned char b = p[i + k];
      if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) ok = false;
    }
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

std::size_t display_width(std::string_view s) {
  return static_cast<std::size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string format_exact(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::array<char, 64> buf{};
  auto [p, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  if (ec != std::errc{}) return "0";
  return std::string(buf.data(), p);
}

namespace {

std::string fixed(double v, int decimals) {
  std::array<char, 512> buf{};
  auto [p, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v, std::chars_format::fixed,
                               std::max(0, decimals));
  if (ec != std::errc{}) return format_exact(v);
  std::string s(buf.data(), p);
  if (s == "-0" || (s.rfind("-0.", 0) == 0 && s.find_first_not_of("-0.") == std::string::npos))
    s.erase(0, 1);  // no "-0.0"
  return s;
}

std::string strip_zeros(std::string s) {
  if (s.find('.') == std::string::npos) return s;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// Decimals so that |v| shows `sig` significant figures, capped to [0, max_dec].
int decimals_for(double v, int sig, int max_dec) {
  if (v == 0 || !std::isfinite(v)) return 0;
  const int mag = static_cast<int>(std::floor(std::log10(std::fabs(v))));
  int d = std::clamp(sig - 1 - mag, 0, max_dec);
  // Rounding may bump the magnitude (9.9996 -> 10.000); recompute once.
  const double r = std::stod(fixed(v, d));
  if (r != 0) {
    const int mag2 = static_cast<int>(std::floor(std::log10(std::fabs(r))));
    if (mag2 > mag) d = std::clamp(sig - 1 - mag2, 0, max_dec);
  }
  return d;
}

}  // namespace

std::string format_sig(double v, int sig) {
  if (!std::isfinite(v)) return format_exact(v);
  if (v == 0) return "0";
  sig = std::clamp(sig, 1, 17);
  const double a = std::fabs(v);
  if (a < 1e-4 || a >= 1e15) {
    std::array<char, 64> buf{};
    auto [p, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v,
                                 std::chars_format::scientific, sig - 1);
    if (ec != std::errc{}) return format_exact(v);
    std::string s(buf.data(), p);
    // Strip zeros in the mantissa: 1.200e-05 -> 1.2e-05.
    const auto e = s.find('e');
    return strip_zeros(s.substr(0, e)) + s.substr(e);
  }
  const int mag = static_cast<int>(std::floor(std::log10(a)));
  if (sig - 1 - mag >= 0) return strip_zeros(fixed(v, decimals_for(v, sig, 17)));
  const double scale = std::pow(10.0, mag - sig + 1);
  return fixed(std::round(v / scale) * scale, 0);
}

std::string format_us(double us) {
  if (!std::isfinite(us)) return format_exact(us);
  return fixed(us, decimals_for(us, 4, 3));
}

std::string format_gbps(double gbps) {
  if (!std::isfinite(gbps)) return format_exact(gbps);
  return fixed(gbps, std::fabs(gbps) < 99.95 ? 1 : 0);
}

std::string format_tflops(double tflops) {
  if (!std::isfinite(tflops)) return format_exact(tflops);
  const double a = std::fabs(tflops);
  return fixed(tflops, a < 9.995 ? 2 : a < 99.95 ? 1 : 0);
}

std::string format_percent(double fraction) {
  if (!std::isfinite(fraction)) return format_exact(fraction);
  return fixed(fraction * 100.0, 1) + "%";
}

std::string json_quote(std::string_view raw) {
  const std::string s = sanitize_utf8(raw);
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7F) {
          static constexpr char hex[] = "0123456789abcdef";
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 0xF];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

std::string csv_field(std::string_view raw) {
  const std::string s = sanitize_utf8(raw);
  const bool needs = s.find_first_of(",\"\r\n") != std::string::npos ||
                     (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.back() == ' ' ||
                                     s.back() == '\t'));
  if (!needs) return s;
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

// ------------------------------------------------------------------ stats ---

CeilingRef ceiling_for(const BenchCase& c, const Ceilings& ceil) {
  if (c.bound == "memory") return {ceil.copy_gbps, "GB/s", "copy ceiling"};
  if (c.bound == "compute") {
    const auto it = c.params.find("dtype");
    if (it != c.params.end() && it->second == "bf16" && ceil.bf16_tflops > 0)
      return {ceil.bf16_tflops, "TFLOP/s", "bf16 ceiling"};
    return {ceil.f16_tflops, "TFLOP/s", "f16 ceiling"};
  }
  return {};
}

BenchStats stats_of(const BenchCase& c, const Ceilings& ceil) {
  BenchStats st;
  st.samples = c.samples_us.size();
  if (c.samples_us.empty()) return st;
  std::vector<double> s = c.samples_us;
  std::sort(s.begin(), s.end());
  const std::size_t n = s.size();
  st.min_us = s.front();
  st.max_us = s.back();
  st.median_us = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  st.mean_us = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(n);
  if (n > 1) {
    double ss = 0;
    for (double v : s) ss += (v - st.mean_us) * (v - st.mean_us);
    st.stddev_us = std::sqrt(ss / static_cast<double>(n - 1));
  }
  if (st.median_us > 0) {
    st.gbps = c.bytes / (st.median_us * 1e3);     // bytes / (us * 1e-6) / 1e9
    st.tflops = c.flops / (st.median_us * 1e6);   // flops / (us * 1e-6) / 1e12
  }
  const CeilingRef ref = ceiling_for(c, ceil);
  if (ref.value > 0) st.fraction = (c.bound == "memory" ? st.gbps : st.tflops) / ref.value;
  return st;
}

// ------------------------------------------------------------------ table ---

namespace {

std::string ceilings_line(const Ceilings& c) {
  std::vector<std::string> parts;
  if (c.copy_gbps > 0) parts.push_back("copy " + format_gbps(c.copy_gbps) + " GB/s");
  if (c.f16_tflops > 0) parts.push_back("f16 " + format_tflops(c.f16_tflops) + " TFLOP/s");
  if (c.bf16_tflops > 0) parts.push_back("bf16 " + format_tflops(c.bf16_tflops) + " TFLOP/s");
  if (parts.empty()) return "unknown";
  std::string s;
  for (std::size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + parts[i];
  if (!c.matrix_path.empty()) s += " (matrix path " + c.matrix_path + ")";
  if (c.dispatch_us > 0) s += ", dispatch " + format_us(c.dispatch_us) + " µs";
  if (c.dependent_dispatches_us > 0) s += ", 2 dependent " + format_us(c.dependent_dispatches_us) + " µs";
  if (c.fill_dispatch_us > 0) s += ", fill + dispatch " + format_us(c.fill_dispatch_us) + " µs";
  return s;
}

// Sanitised and on one line: control characters become spaces.
std::string one_line(std::string_view raw) {
  std::string s = sanitize_utf8(raw);
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) c = ' ';
  return s;
}

std::string pad(const std::string& s, std::size_t width, bool right) {
  const std::size_t w = display_width(s);
  if (w >= width) return s;
  return right ? std::string(width - w, ' ') + s : s + std::string(width - w, ' ');
}

}  // namespace

void write_table(std::ostream& os, const BenchMeta& meta, const std::vector<BenchCase>& cases) {
  auto line = [&](const char* key, const std::string& value) {
    if (!value.empty()) os << key << one_line(value) << "\n";
  };
  line("suite     ", meta.suite);
  line("device    ", meta.device.empty() ? std::string("unknown") : meta.device);
  line("driver    ", meta.driver);
  line("path      ", meta.path);
  line("version   ", meta.library_version);
  line("time      ", meta.timestamp);
  line("ceilings  ", ceilings_line(meta.ceilings));
  os << "\n";

  const std::vector<std::string> header = {"case",    "median µs", "min–max µs", "GB/s",
                                           "TFLOP/s", "% ceiling", "bound",      "verified"};
  const std::vector<bool> right = {false, true, true, true, true, true, false, false};
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : cases) {
    const BenchStats st = stats_of(c, meta.ceilings);
    const bool have = st.samples > 0;
    std::string verified = c.verified ? "yes" : "no";
    if (c.max_abs_err > 0 || c.max_rel_err > 0)
      verified += " (abs " + format_sig(c.max_abs_err, 2) + ", rel " + format_sig(c.max_rel_err, 2) + ")";
    rows.push_back({
        one_line(c.name),
        have ? format_us(st.median_us) : "-",
        have ? format_us(st.min_us) + "–" + format_us(st.max_us) : "-",
        have && c.bytes > 0 ? format_gbps(st.gbps) : "-",
        have && c.flops > 0 ? format_tflops(st.tflops) : "-",
        st.fraction > 0 ? format_percent(st.fraction) : "-",
        (c.bound.empty() ? "-" : one_line(c.bound)) + (c.params.count("unsteady") ? " (unsteady)" : "") +
            (c.params.count("machine_slow") && c.params.count("matrix_rate_after") && c.params.count("copy_rate_after")
                 ? " (slow machine: f16 matrix " + c.params.at("matrix_rate_after") + " TFLOP/s, copy " +
                       c.params.at("copy_rate_after") + " GB/s after it)"
                 : ""),
        verified,
    });
  }
  std::vector<std::size_t> width(header.size());
  for (std::size_t k = 0; k < header.size(); ++k) {
    width[k] = display_width(header[k]);
    for (const auto& r : rows) width[k] = std::max(width[k], display_width(r[k]));
  }
  auto emit = [&](const std::vector<std::string>& r) {
    std::string s;
    for (std::size_t k = 0; k < r.size(); ++k) {
      if (k) s += "  ";
      s += (k + 1 == r.size()) ? r[k] : pad(r[k], width[k], right[k]);
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    os << s << "\n";
  };
  emit(header);
  std::size_t total = 0;
  for (auto w : width) total += w;
  total += 2 * (width.size() - 1);
  std::string rule;
  for (std::size_t i = 0; i < total; ++i) rule += "─";
  os << rule << "\n";
  for (const auto& r : rows) emit(r);
}

// ------------------------------------------------------------------- JSON ---

namespace {

std::string json_num(double v) { return std::isfinite(v) ? format_exact(v) : "null"; }

}  // namespace

void write_json(std::ostream& os, const BenchMeta& meta, const std::vector<BenchCase>& cases) {
  const auto& cl = meta.ceilings;
  os << "{\n";
  os << "  \"schema\": \"vkattn-bench/1\",\n";
  os << "  \"meta\": {\n";
  os << "    \"suite\": " << json_quote(meta.suite) << ",\n";
  os << "    \"device\": " << json_quote(meta.device) << ",\n";
  os << "    \"driver\": " << json_quote(meta.driver) << ",\n";
  os << "    \"path\": " << json_quote(meta.path) << ",\n";
  os << "    \"library_version\": " << json_quote(meta.library_version) << ",\n";
  os << "    \"timestamp\": " << json_quote(meta.timestamp) << "\n";
  os << "  },\n";
  os << "  \"ceilings\": {\n";
  os << "    \"copy_gbps\": " << json_num(cl.copy_gbps) << ",\n";
  os << "    \"f16_tflops\": " << json_num(cl.f16_tflops) << ",\n";
  os << "    \"bf16_tflops\": " << json_num(cl.bf16_tflops) << ",\n";
  os << "    \"matrix_path\": " << json_quote(cl.matrix_path) << ",\n";
  os << "    \"dispatch_us\": " << json_num(cl.dispatch_us) << ",\n";
  os << "    \"dependent_dispatches_us\": " << json_num(cl.dependent_dispatches_us) << ",\n";
  os << "    \"fill_dispatch_us\": " << json_num(cl.fill_dispatch_us) << "\n";
  os << "  },\n";
  os << "  \"cases\": [";
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const BenchCase& c = cases[i];
    const BenchStats st = stats_of(c, cl);
    const CeilingRef ref = ceiling_for(c, cl);
    os << (i ? ",\n" : "\n");
    os << "    {\n";
    os << "      \"name\": " << json_quote(c.name) << ",\n";
    os << "      \"params\": {";
    bool first = true;
    for (const auto& [k, v] : c.params) {
      os << (first ? "" : ", ") << json_quote(k) << ": " << json_quote(v);
      first = false;
    }
    os << "},\n";
    os << "      \"bound\": " << json_quote(c.bound) << ",\n";
    os << "      \"bytes\": " << json_num(c.bytes) << ",\n";
    os << "      \"flops\": " << json_num(c.flops) << ",\n";
    os << "      \"verified\": " << (c.verified ? "true" : "false") << ",\n";
    os << "      \"max_abs_err\": " << json_num(c.max_abs_err) << ",\n";
    os << "      \"max_rel_err\": " << json_num(c.max_rel_err) << ",\n";
    os << "      \"stats\": {";
    os << "\"median_us\": " << json_num(st.median_us) << ", \"min_us\": " << json_num(st.min_us)
       << ", \"max_us\": " << json_num(st.max_us) << ", \"mean_us\": " << json_num(st.mean_us)
       << ", \"stddev_us\": " << json_num(st.stddev_us) << ", \"samples\": " << st.samples
       << ", \"gbps\": " << json_num(st.gbps) << ", \"tflops\": " << json_num(st.tflops)
       << ", \"fraction\": " << json_num(st.fraction) << ", \"ceiling\": " << json_num(ref.value)
       << ", \"ceiling_unit\": " << json_quote(ref.unit) << "},\n";
    os << "      \"samples_us\": [";
    for (std::size_t k = 0; k < c.samples_us.size(); ++k)
      os << (k ? ", " : "") << json_num(c.samples_us[k]);
    os << "]\n";
    os << "    }";
  }
  os << (cases.empty() ? "]\n" : "\n  ]\n");
  os << "}\n";
}

// -------------------------------------------------------------------- CSV ---

void write_csv(std::ostream& os, const BenchMeta& meta, const std::vector<BenchCase>& cases) {
  static const std::vector<std::string> lead = {"suite", "device", "driver", "path", "library_version",
                                                "timestamp", "case"};
  static const std::vector<std::string> tail = {
      "bound", "samples", "median_us", "min_us", "max_us", "mean_us", "stddev_us", "bytes",
      "flops", "gbps", "tflops", "fraction", "verified", "max_abs_err", "max_rel_err"};
  std::vector<std::string> keys;
  for (const auto& c : cases)
    for (const auto& [k, v] : c.params)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);

  auto fixed_column = [&](const std::string& k) {
    return std::find(lead.begin(), lead.end(), k) != lead.end() ||
           std::find(tail.begin(), tail.end(), k) != tail.end();
  };
  std::vector<std::string> header = lead;
  for (const auto& k : keys) {
    std::string col = k;
    // Also avoids clashing with an earlier param that was itself prefixed.
    while (fixed_column(col) || std::find(header.begin(), header.end(), col) != header.end())
      col = "param_" + col;
    header.push_back(col);
  }
  header.insert(header.end(), tail.begin(), tail.end());

  auto emit = [&](const std::vector<std::string>& row) {
    for (std::size_t k = 0; k < row.size(); ++k) os << (k ? "," : "") << csv_field(row[k]);
    os << "\n";
  };
  emit(header);
  for (const auto& c : cases) {
    const BenchStats st = stats_of(c, meta.ceilings);
    std::vector<std::string> row = {meta.suite, meta.device,    meta.driver, meta.path,
                                    meta.library_version, meta.timestamp, c.name};
    for (const auto& k : keys) {
      const auto it = c.params.find(k);
      row.push_back(it == c.params.end() ? "" : it->second);
    }
    row.insert(row.end(), {c.bound, std::to_string(st.samples), format_exact(st.median_us),
                           format_exact(st.min_us), format_exact(st.max_us), format_exact(st.mean_us),
                           format_exact(st.stddev_us), format_exact(c.bytes), format_exact(c.flops),
                           format_exact(st.gbps), format_exact(st.tflops), format_exact(st.fraction),
                           c.verified ? "true" : "false", format_exact(c.max_abs_err),
                           format_exact(c.max_rel_err)});
    emit(row);
  }
}

}  // namespace vkattn::report
