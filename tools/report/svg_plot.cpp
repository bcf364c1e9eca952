#include "report/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace vkattn::report {

std::string xml_escape(std::string_view raw) {
  const std::string s = sanitize_utf8(raw);
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') break;  // not allowed in XML 1.0
        out += ch;
    }
  }
  return out;
}

AxisScale nice_axis(double max_value, int max_ticks) {
  if (!(max_value > 0) || !std::isfinite(max_value)) return {0.2, 1};
  max_ticks = std::max(max_ticks, 1);
  const double raw = max_value / max_ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 2.5, 5.0, 10.0, 20.0}) {
    const double step = m * mag;
    const double n = std::ceil(max_value / step - 1e-9);
    if (n <= max_ticks) return {step, n * step};
  }
  return {20 * mag, std::ceil(max_value / (20 * mag)) * 20 * mag};
}

namespace {

// Coordinates with at most 2 decimals.
std::string num(double v) {
  std::string s = format_sig(std::round(v * 100.0) / 100.0, 12);
  return s == "-0" ? "0" : s;
}

// Rough advance width of sans-serif text (average glyph ~0.6 em, errs wide).
double text_px(std::string_view s, double font_px) {
  return static_cast<double>(display_width(s)) * font_px * 0.6;
}

std::string shorten(const std::string& s, std::size_t max_cp) {
  const std::string clean = sanitize_utf8(s);
  if (display_width(clean) <= max_cp) return clean;
  std::string out;
  std::size_t cp = 0;
  for (const char c : clean) {
    const bool lead = (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    if (lead && ++cp > max_cp - 1) break;
    out += c;
  }
  return out + "…";
}

constexpr const char* kFont = "DejaVu Sans, Helvetica, Arial, sans-serif";
constexpr const char* kBar = "#4c78a8";
constexpr const char* kBarUnverified = "#a9bdd4";
constexpr const char* kCeiling = "#d62728";

}  // namespace

void write_svg(std::ostream& os, const BenchMeta& meta, const std::vector<BenchCase>& cases,
               const std::string& metric_in) {
  bool tflops_metric = false;
  if (metric_in == "GB/s" || metric_in == "gbps") tflops_metric = false;
  else if (metric_in == "TFLOP/s" || metric_in == "tflops") tflops_metric = true;
  else throw std::invalid_argument("write_svg: metric must be \"GB/s\" or \"TFLOP/s\", got \"" + metric_in + "\"");
  const std::string unit = tflops_metric ? "TFLOP/s" : "GB/s";

  // ---- data
  const Ceilings& cl = meta.ceilings;
  double ceiling = 0;
  std::string ceiling_name;
  if (!tflops_metric) {
    ceiling = cl.copy_gbps;
    ceiling_name = "copy ceiling";
  } else {
    const bool all_bf16 = !cases.empty() && std::all_of(cases.begin(), cases.end(), [](const BenchCase& c) {
      const auto it = c.params.find("dtype");
      return it != c.params.end() && it->second == "bf16";
    });
    if (all_bf16 && cl.bf16_tflops > 0) {
      ceiling = cl.bf16_tflops;
      ceiling_name = "bf16 ceiling";
    } else {
      ceiling = cl.f16_tflops;
      ceiling_name = "f16 ceiling";
    }
  }
  if (!(ceiling > 0) || !std::isfinite(ceiling)) ceiling = 0;

  struct Bar {
    std::string name, label, value_text;
    double value = 0;
    bool has_value = false, verified = false;
  };
  std::vector<Bar> bars;
  double data_max = 0;
  bool any_unverified = false;
  for (const auto& c : cases) {
    const BenchStats st = stats_of(c, cl);
    Bar b;
    b.name = sanitize_utf8(c.name);
    b.label = shorten(c.name, 40);
    b.has_value = st.samples > 0 && (tflops_metric ? c.flops > 0 : c.bytes > 0);
    b.value = b.has_value ? (tflops_metric ? st.tflops : st.gbps) : 0;
    if (!std::isfinite(b.value) || b.value < 0) b.value = 0;
    b.value_text = b.has_value ? (tflops_metric ? format_tflops(b.value) : format_gbps(b.value)) : "n/a";
    b.verified = c.verified;
    any_unverified = any_unverified || !c.verified;
    data_max = std::max(data_max, b.value);
    bars.push_back(std::move(b));
  }
  const AxisScale axis = nice_axis(std::max(data_max, ceiling) * 1.12, 6);

  // ---- layout
  const std::size_t n = std::max<std::size_t>(bars.size(), 1);
  double slot = std::clamp(720.0 / static_cast<double>(n), 36.0, 90.0);
  double plot_w = std::max(slot * static_cast<double>(n), 440.0);
  slot = plot_w / static_cast<double>(n);
  const double label_font = 11, value_font = 10;
  const double sin40 = std::sin(40.0 * 3.14159265358979 / 180.0), cos40 = std::cos(40.0 * 3.14159265358979 / 180.0);
  double max_label_px = 0;
  for (const auto& b : bars) max_label_px = std::max(max_label_px, text_px(b.label, label_font));
  const double first_label_px = bars.empty() ? 0 : text_px(bars.front().label, label_font);

  const double left = std::max(84.0, first_label_px * cos40 - slot / 2 + 16);
  const double right = 28;
  const double top = 76;
  const double plot_h = 320;
  const double bottom_pad = 18 + max_label_px * sin40 + label_font + 12;

  std::string title = meta.suite.empty() ? std::string("vkattn bench") : "vkattn bench " + meta.suite;
  if (!meta.device.empty()) title += " — " + meta.device;
  if (!meta.path.empty()) title += " — " + meta.path;
  std::vector<std::string> sub;
  if (!meta.driver.empty()) sub.push_back("driver " + meta.driver);
  if (!meta.library_version.empty()) sub.push_back("vkattn " + meta.library_version);
  if (!meta.timestamp.empty()) sub.push_back(meta.timestamp);
  if (tflops_metric && !cl.matrix_path.empty()) sub.push_back("matrix path " + cl.matrix_path);
  sub.push_back(std::to_string(cases.size()) + (cases.size() == 1 ? " case" : " cases") +
                ", median of samples");
  if (ceiling == 0) sub.push_back(ceiling_name + " unknown");
  std::string subtitle;
  for (std::size_t i = 0; i < sub.size(); ++i) subtitle += (i ? " · " : "") + sub[i];

  const double width = std::ceil(std::max({left + plot_w + right, text_px(title, 16) * 1.1 + 40,
                                           text_px(subtitle, 11) + 40}));
  // A title wider than the plot widens the plot rather than leaving a gap.
  plot_w = width - left - right;
  slot = plot_w / static_cast<double>(n);
  const double bar_w = std::min(slot * 0.64, 90.0);
  const double height = std::ceil(top + plot_h + bottom_pad);
  const double x0 = left, y0 = top + plot_h;  // plot origin (bottom-left)
  auto ypos = [&](double v) { return y0 - plot_h * std::clamp(v / axis.max, 0.0, 1.0); };

  // ---- output
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n";
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" << num(width)
     << "\" height=\"" << num(height) << "\" viewBox=\"0 0 " << num(width) << " " << num(height)
     << "\" font-family=\"" << kFont << "\">\n";
  os << "<title>" << xml_escape(title) << "</title>\n";
  os << "<rect class=\"background\" x=\"0\" y=\"0\" width=\"" << num(width) << "\" height=\""
     << num(height) << "\" fill=\"#ffffff\"/>\n";
  os << "<text class=\"title\" x=\"20\" y=\"30\" font-size=\"16\" font-weight=\"bold\" fill=\"#222222\">"
     << xml_escape(title) << "</text>\n";
  os << "<text class=\"subtitle\" x=\"20\" y=\"50\" font-size=\"11\" fill=\"#666666\">"
     << xml_escape(subtitle) << "</text>\n";

  // Legend for unverified bars.
  if (any_unverified) {
    const double lx = x0 + plot_w - 150, ly = 60;
    os << "<g class=\"legend\">"
       << "<rect x=\"" << num(lx) << "\" y=\"" << num(ly) << "\" width=\"10\" height=\"10\" fill=\""
       << kBar << "\"/><text x=\"" << num(lx + 14) << "\" y=\"" << num(ly + 9)
       << "\" font-size=\"10\" fill=\"#444444\">verified</text>"
       << "<rect x=\"" << num(lx + 70) << "\" y=\"" << num(ly) << "\" width=\"10\" height=\"10\" fill=\""
       << kBarUnverified << "\"/><text x=\"" << num(lx + 84) << "\" y=\"" << num(ly + 9)
       << "\" font-size=\"10\" fill=\"#444444\">unverified</text></g>\n";
  }

  // Y axis: gridlines, ticks, labels, title.
  os << "<g class=\"y-axis\" font-size=\"10\" fill=\"#444444\">\n";
  const int ticks = static_cast<int>(std::lround(axis.max / axis.step));
  for (int i = 0; i <= ticks; ++i) {
    const double v = axis.step * i;
    const double y = ypos(v);
    if (i > 0)
      os << "<line class=\"grid\" x1=\"" << num(x0) << "\" y1=\"" << num(y) << "\" x2=\"" << num(x0 + plot_w)
         << "\" y2=\"" << num(y) << "\" stroke=\"#e4e4e4\" stroke-width=\"1\"/>\n";
    os << "<line class=\"tick\" x1=\"" << num(x0 - 5) << "\" y1=\"" << num(y) << "\" x2=\"" << num(x0)
       << "\" y2=\"" << num(y) << "\" stroke=\"#444444\" stroke-width=\"1\"/>\n";
    os << "<text x=\"" << num(x0 - 8) << "\" y=\"" << num(y + 3.5) << "\" text-anchor=\"end\">"
       << xml_escape(format_sig(v, 6)) << "</text>\n";
  }
  double tick_px = 0;
  for (int i = 0; i <= ticks; ++i) tick_px = std::max(tick_px, text_px(format_sig(axis.step * i, 6), 10));
  const double axis_title_x = std::max(16.0, x0 - 8 - tick_px - 12);
  os << "<text class=\"axis-title\" transform=\"translate(" << num(axis_title_x) << "," << num(top + plot_h / 2)
     << ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\" fill=\"#222222\">" << xml_escape(unit)
     << "</text>\n";
  os << "</g>\n";

  // Bars.
  os << "<g class=\"bars\">\n";
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const double cx = x0 + slot * (static_cast<double>(i) + 0.5);
    const double y = ypos(b.value);
    os << "<rect class=\"mark\" x=\"" << num(cx - bar_w / 2) << "\" y=\"" << num(y) << "\" width=\""
       << num(bar_w) << "\" height=\"" << num(y0 - y) << "\" fill=\""
       << (b.verified ? kBar : kBarUnverified) << "\"><title>" << xml_escape(b.name) << ": "
       << xml_escape(b.value_text) << (b.has_value ? " " + unit : std::string()) << (b.verified ? "" : " (unverified)")
       << "</title></rect>\n";
  }
  os << "</g>\n";

  // Axes lines on top of bars' bottoms.
  os << "<line class=\"axis\" x1=\"" << num(x0) << "\" y1=\"" << num(top) << "\" x2=\"" << num(x0)
     << "\" y2=\"" << num(y0) << "\" stroke=\"#444444\" stroke-width=\"1\"/>\n";
  os << "<line class=\"axis\" x1=\"" << num(x0) << "\" y1=\"" << num(y0) << "\" x2=\"" << num(x0 + plot_w)
     << "\" y2=\"" << num(y0) << "\" stroke=\"#444444\" stroke-width=\"1\"/>\n";

  // X labels, rotated.
  os << "<g class=\"x-labels\" font-size=\"" << num(label_font) << "\" fill=\"#333333\">\n";
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const double cx = x0 + slot * (static_cast<double>(i) + 0.5);
    const double ly = y0 + 14;
    os << "<text x=\"" << num(cx) << "\" y=\"" << num(ly) << "\" text-anchor=\"end\" transform=\"rotate(-40 "
       << num(cx) << " " << num(ly) << ")\">" << xml_escape(bars[i].label) << "</text>\n";
  }
  os << "</g>\n";

  // Value labels.
  os << "<g class=\"values\" font-size=\"" << num(value_font) << "\" fill=\"#222222\">\n";
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const double cx = x0 + slot * (static_cast<double>(i) + 0.5);
    const double y = ypos(b.value);
    if (text_px(b.value_text, value_font) + 4 <= slot) {
      os << "<text x=\"" << num(cx) << "\" y=\"" << num(y - 4) << "\" text-anchor=\"middle\">"
         << xml_escape(b.value_text) << "</text>\n";
    } else {
      os << "<text x=\"" << num(cx + 3.5) << "\" y=\"" << num(y - 4) << "\" text-anchor=\"start\" transform=\"rotate(-90 "
         << num(cx + 3.5) << " " << num(y - 4) << ")\">" << xml_escape(b.value_text) << "</text>\n";
    }
  }
  os << "</g>\n";

  // Ceiling.
  if (ceiling > 0) {
    const double yc = ypos(ceiling);
    const std::string text = ceiling_name + " " +
                             (tflops_metric ? format_tflops(ceiling) : format_gbps(ceiling)) + " " + unit;
    const double tw = text_px(text, 11);
    const double tx = x0 + plot_w - 6;
    const double ty = (yc - top > 18) ? yc - 5 : yc + 14;
    os << "<line class=\"ceiling\" x1=\"" << num(x0) << "\" y1=\"" << num(yc) << "\" x2=\"" << num(x0 + plot_w)
       << "\" y2=\"" << num(yc) << "\" stroke=\"" << kCeiling
       << "\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/>\n";
    os << "<rect class=\"ceiling-label-bg\" x=\"" << num(tx - tw - 4) << "\" y=\"" << num(ty - 11)
       << "\" width=\"" << num(tw + 8) << "\" height=\"15\" rx=\"3\" fill=\"#ffffff\" stroke=\"" << kCeiling
       << "\" stroke-width=\"0.8\"/>\n";
    os << "<text class=\"ceiling-label\" x=\"" << num(tx) << "\" y=\"" << num(ty)
       << "\" text-anchor=\"end\" font-size=\"11\" fill=\"" << kCeiling << "\">" << xml_escape(text)
       << "</text>\n";
  }
  os << "</svg>\n";
}

}  // namespace vkattn::report
