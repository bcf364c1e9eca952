// vkattn benchmark progress bar: a single self-overwriting status line on
// stderr while a suite runs. Silent unless stderr is a terminal, so logs and
// pipes stay clean.
#pragma once

#include <chrono>
#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>

namespace vkattn::report {

class Progress {
 public:
  // Draws on std::cerr when isatty(2), otherwise does nothing. The width is
  // the terminal's (COLUMNS / ioctl), 80 when unknown.
  Progress(std::size_t total, std::string label);
  // Forced on (`enabled`) or off, drawing on `out` with a fixed `width`; for
  // tests and for callers that know better. `out` must outlive the object.
  Progress(std::size_t total, std::string label, std::ostream& out, bool enabled, std::size_t width = 80);
  ~Progress();  // calls finish()
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Announces that case number current()+1 (named `case_name`) is starting
  // and redraws: "label [#####.....] 3/12 ETA 4s  B=64 ctx=4096".
  void step(std::string_view case_name);
  // Draws the completed bar with the elapsed time and ends the line.
  // Idempotent; nothing after it is drawn.
  void finish();

  bool enabled() const noexcept { return out_ != nullptr; }
  std::size_t current() const noexcept { return current_; }
  std::size_t total() const noexcept { return total_; }

  // The status line (without carriage return or escape codes) for a state;
  // exposed for tests. `elapsed_s` < 0 means unknown.
  static std::string render(std::string_view label, std::size_t current, std::size_t total,
                            std::string_view case_name, double elapsed_s, bool done, std::size_t width);

 private:
  void draw(std::string_view case_name, bool done);

  std::ostream* out_ = nullptr;
  std::size_t total_ = 0;
  std::size_t current_ = 0;
  std::string label_;
  std::size_t width_ = 80;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace vkattn::report
