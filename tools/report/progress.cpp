#include "report/progress.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>

#if defined(_WIN32)
#include <io.h>
#define VKATTN_ISATTY(fd) _isatty(fd)
#else
#include <sys/ioctl.h>
#include <unistd.h>
#define VKATTN_ISATTY(fd) isatty(fd)
#endif

namespace vkattn::report {

namespace {

std::size_t terminal_width() {
#if !defined(_WIN32) && defined(TIOCGWINSZ)
  winsize ws{};
  if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
#endif
  if (const char* c = std::getenv("COLUMNS")) {
    const long v = std::strtol(c, nullptr, 10);
    if (v >= 20 && v <= 1000) return static_cast<std::size_t>(v);
  }
  return 80;
}

std::size_t cp_count(std::string_view s) {
  return static_cast<std::size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// First `n` code points of s.
std::string cp_prefix(std::string_view s, std::size_t n) {
  std::size_t cp = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (cp == n) break;
      ++cp;
    }
  }
  return std::string(s.substr(0, i));
}

std::string duration(double s) {
  if (s < 0 || !std::isfinite(s)) return "?";
  if (s < 10) {
    const long tenths = std::lround(s * 10);
    return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + "s";
  }
  const long t = std::lround(s);
  if (t < 60) return std::to_string(t) + "s";
  if (t < 3600) return std::to_string(t / 60) + "m" + (t % 60 < 10 ? "0" : "") + std::to_string(t % 60) + "s";
  return std::to_string(t / 3600) + "h" + (t % 3600 / 60 < 10 ? "0" : "") + std::to_string(t % 3600 / 60) + "m";
}

}  // namespace

Progress::Progress(std::size_t total, std::string label)
    : total_(total), label_(std::move(label)), start_(std::chrono::steady_clock::now()) {
  if (VKATTN_ISATTY(2)) {
    out_ = &std::cerr;
    width_ = terminal_width();
  }
}

Progress::Progress(std::size_t total, std::string label, std::ostream& out, bool enabled, std::size_t width)
    : out_(enabled ? &out : nullptr),
      total_(total),
      label_(std::move(label)),
      width_(std::max<std::size_t>(width, 20)),
      start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() {
  try {
    finish();
  } catch (...) {
  }
}

std::string Progress::render(std::string_view label, std::size_t current, std::size_t total,
                             std::string_view case_name, double elapsed_s, bool done, std::size_t width) {
  total = std::max(total, current);
  const std::size_t shown_done = done ? current : (current > 0 ? current - 1 : 0);  // completed cases
  const std::string count = std::to_string(current) + "/" + std::to_string(total);
  std::string tail;
  if (done) {
    tail = "done in " + duration(elapsed_s);
  } else if (shown_done > 0 && elapsed_s >= 0) {
    tail = "ETA " + duration(elapsed_s / static_cast<double>(shown_done) *
                             static_cast<double>(total - shown_done));
  }
  const std::size_t bar_len = width >= 60 ? 20 : 10;
  const double frac = total ? static_cast<double>(shown_done) / static_cast<double>(total) : 1.0;
  const std::size_t filled = std::min(bar_len, static_cast<std::size_t>(std::floor(frac * static_cast<double>(bar_len))));
  std::string s(label);
  if (!s.empty()) s += " ";
  s += "[" + std::string(filled, '#') + std::string(bar_len - filled, '.') + "] " + count;
  if (!tail.empty()) s += " " + tail;
  if (!done && !case_name.empty()) s += "  " + std::string(case_name);
  // Keep one column free so the terminal never wraps.
  const std::size_t limit = width > 1 ? width - 1 : width;
  if (cp_count(s) > limit) s = cp_prefix(s, limit > 0 ? limit - 1 : 0) + "…";
  return s;
}

void Progress::draw(std::string_view case_name, bool done) {
  if (!out_) return;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  *out_ << '\r' << render(label_, current_, total_, case_name, elapsed, done, width_) << "\x1b[K";
  if (done) *out_ << '\n';
  out_->flush();
}

void Progress::step(std::string_view case_name) {
  if (finished_) return;
  ++current_;
  draw(case_name, false);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  draw({}, true);
}

}  // namespace vkattn::report
