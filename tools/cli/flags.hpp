// vkattn command-line flag parser: a small declarative parser for the `vkattn`
// tool. No GPU, no third-party dependencies.
//
//   vkattn::cli::Flags f("vkattn run write-kv-cache", "Scatter new K/V tokens ...");
//   auto& tokens = f.add_int("num-tokens", 37, "tokens to write", /*min=*/0);
//   auto& dtype  = f.add_choice("cache-dtype", "f16", {"f16", "bf16"}, "cache dtype");
//   auto& batch  = f.add_int_list("batch", {1, 16}, "batch sizes");
//   f.parse(args);                      // throws vkattn::cli::UsageError
//   if (f.help_requested()) { std::cout << f.help(); return 0; }
//
// Accepted forms: `--name value`, `--name=value`; booleans take `--name`,
// `--no-name` or `--name=true|false|1|0|yes|no|on|off` (never a separate
// value token); lists take comma-separated values (`--batch 1,16,64`).
// A repeated flag keeps its last value. `--help` / `-h` anywhere (before a
// bare `--`) sets help_requested() and skips all validation. Positional
// arguments are not accepted.
//
// References returned by add_* stay valid for the lifetime of the Flags object
// (the object may not be copied; it may be moved).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace vkattn::cli {

// A mistake in the user's command line. what() is a one-line message meant to
// be printed as is, e.g. "--num-tokens: 'abc' is not an integer".
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Flags {
 public:
  // `command` is the full command as typed (used in the usage line and in
  // unknown-flag messages); `summary` is a one-line description.
  Flags(std::string command, std::string summary);
  ~Flags();
  Flags(Flags&&) noexcept;
  Flags& operator=(Flags&&) noexcept;
  Flags(const Flags&) = delete;
  Flags& operator=(const Flags&) = delete;

  // Registration. Names are given without the leading "--" and must be
  // unique; a bad registration (duplicate name, default outside the range or
  // not among the choices, empty choice list) throws std::logic_error.
  std::int64_t& add_int(std::string name, std::int64_t def, std::string help,
                        std::optional<std::int64_t> min = std::nullopt,
                        std::optional<std::int64_t> max = std::nullopt);
  double& add_double(std::string name, double def, std::string help,
                     std::optional<double> min = std::nullopt,
                     std::optional<double> max = std::nullopt);
  std::string& add_string(std::string name, std::string def, std::string help);
  std::string& add_choice(std::string name, std::string def, std::vector<std::string> choices,
                          std::string help);
  bool& add_bool(std::string name, bool def, std::string help);
  // Every element is range-checked; the list may not be empty.
  std::vector<std::int64_t>& add_int_list(std::string name, std::vector<std::int64_t> def,
                                          std::string help,
                                          std::optional<std::int64_t> min = std::nullopt,
                                          std::optional<std::int64_t> max = std::nullopt);
  // Comma-separated strings; when `choices` is non-empty every element must be
  // one of them.
  std::vector<std::string>& add_string_list(std::string name, std::vector<std::string> def,
                                            std::string help,
                                            std::vector<std::string> choices = {});

  // Parses the arguments that follow the subcommand. Throws UsageError.
  void parse(const std::vector<std::string>& args);

  bool help_requested() const noexcept;
  // True when the flag appeared on the command line (any form). Throws
  // std::logic_error for a name that was never registered.
  bool was_set(std::string_view name) const;
  // Aligned help: usage line, summary, then one line per flag with its value
  // kind, description, default, range and choices.
  std::string help() const;
  const std::string& command() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Levenshtein edit distance (exposed for tests and for other "did you mean"
// messages, e.g. unknown subcommands).
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` when it is close enough to be a plausible
// typo (or a unique prefix of a candidate); std::nullopt otherwise.
std::optional<std::string> nearest(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace vkattn::cli
