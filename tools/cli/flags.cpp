#include "cli/flags.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <sstream>
#include <system_error>

namespace vkattn::cli {

namespace {

enum class Kind { Int, Double, String, Choice, Bool, IntList, StringList };

struct Flag {
  std::string name;
  std::string help;
  Kind kind{};
  bool set = false;
  // Value storage; only the member matching `kind` is used. Each Flag lives
  // in its own heap allocation, so references into it stay valid.
  std::int64_t int_value = 0;
  double double_value = 0;
  std::string string_value;
  bool bool_value = false;
  std::vector<std::int64_t> int_list;
  std::vector<std::string> string_list;
  // Constraints.
  std::optional<std::int64_t> int_min, int_max;
  std::optional<double> double_min, double_max;
  std::vector<std::string> choices;
  std::string default_text;
};

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += sep;
    out += v[i];
  }
  return out;
}

std::string format_double(double v) {
  std::array<char, 64> buf{};
  auto [p, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  if (ec != std::errc{}) return "?";
  return std::string(buf.data(), p);
}

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

std::vector<std::string> split_commas(std::string_view s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const auto pos = s.find(',', start);
    out.push_back(trim(s.substr(start, pos == std::string_view::npos ? pos : pos - start)));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

// Strict integer parse of the whole string ("+5", "-3", "42"); nullopt when it
// is not an integer, throws on overflow via the `overflow` flag.
std::optional<std::int64_t> parse_int(std::string_view s, bool& overflow) {
  overflow = false;
  std::string_view t = s;
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  if (t.empty() || t.front() == '+' || t.front() == ' ') return std::nullopt;
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (p != t.data() + t.size()) return std::nullopt;
  if (ec == std::errc::result_out_of_range) {
    overflow = true;
    return std::nullopt;
  }
  if (ec != std::errc{}) return std::nullopt;
  return v;
}

std::optional<double> parse_double(std::string_view s) {
  std::string_view t = s;
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  if (t.empty() || t.front() == '+' || t.front() == ' ') return std::nullopt;
  double v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc{} || p != t.data() + t.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<bool> parse_bool(std::string_view s) {
  std::string l(s);
  std::transform(l.begin(), l.end(), l.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (l == "true" || l == "1" || l == "yes" || l == "on") return true;
  if (l == "false" || l == "0" || l == "no" || l == "off") return false;
  return std::nullopt;
}

std::string quoted(std::string_view v) { return "'" + std::string(v) + "'"; }

std::string metavar(const Flag& f) {
  switch (f.kind) {
    case Kind::Int: return "INT";
    case Kind::Double: return "NUM";
    case Kind::String: return "STR";
    case Kind::Choice: return "NAME";
    case Kind::Bool: return "";
    case Kind::IntList: return "INT,...";
    case Kind::StringList: return f.choices.empty() ? "STR,..." : "NAME,...";
  }
  return "";
}

void check_int_range(const Flag& f, std::int64_t v) {
  if (f.int_min && v < *f.int_min)
    throw UsageError("--" + f.name + ": " + std::to_string(v) + " is below the minimum " +
                     std::to_string(*f.int_min));
  if (f.int_max && v > *f.int_max)
    throw UsageError("--" + f.name + ": " + std::to_string(v) + " is above the maximum " +
                     std::to_string(*f.int_max));
}

std::int64_t convert_int(const Flag& f, std::string_view text, std::string_view whole) {
  bool overflow = false;
  const auto v = parse_int(text, overflow);
  if (overflow)
    throw UsageError("--" + f.name + ": " + quoted(text) + " is out of range for a 64-bit integer");
  if (!v) {
    if (text == whole) throw UsageError("--" + f.name + ": " + quoted(text) + " is not an integer");
    throw UsageError("--" + f.name + ": " + quoted(text) + " in " + quoted(whole) +
                     " is not an integer");
  }
  check_int_range(f, *v);
  return *v;
}

void check_choice(const Flag& f, const std::string& v, std::string_view whole) {
  if (std::find(f.choices.begin(), f.choices.end(), v) != f.choices.end()) return;
  std::string where = v == whole ? quoted(v) : quoted(v) + " in " + quoted(whole);
  throw UsageError("--" + f.name + ": " + where + " is not one of " + join(f.choices, ", "));
}

void assign(Flag& f, std::string_view value) {
  switch (f.kind) {
    case Kind::Int: f.int_value = convert_int(f, value, value); break;
    case Kind::Double: {
      const auto v = parse_double(value);
      if (!v) throw UsageError("--" + f.name + ": " + quoted(value) + " is not a number");
      if (f.double_min && *v < *f.double_min)
        throw UsageError("--" + f.name + ": " + format_double(*v) + " is below the minimum " +
                         format_double(*f.double_min));
      if (f.double_max && *v > *f.double_max)
        throw UsageError("--" + f.name + ": " + format_double(*v) + " is above the maximum " +
                         format_double(*f.double_max));
      f.double_value = *v;
      break;
    }
    case Kind::String: f.string_value = std::string(value); break;
    case Kind::Choice: {
      const std::string v(value);
      check_choice(f, v, value);
      f.string_value = v;
      break;
    }
    case Kind::Bool: {
      const auto v = parse_bool(value);
      if (!v)
        throw UsageError("--" + f.name + ": " + quoted(value) +
                         " is not a boolean (expected true or false)");
      f.bool_value = *v;
      break;
    }
    case Kind::IntList: {
      if (trim(value).empty())
        throw UsageError("--" + f.name + ": expected a comma-separated list of integers, got ''");
      std::vector<std::int64_t> out;
      for (const auto& item : split_commas(value)) {
        if (item.empty())
          throw UsageError("--" + f.name + ": " + quoted(value) + " has an empty list element");
        out.push_back(convert_int(f, item, value));
      }
      f.int_list = std::move(out);
      break;
    }
    case Kind::StringList: {
      if (trim(value).empty())
        throw UsageError("--" + f.name + ": expected a comma-separated list, got ''");
      std::vector<std::string> out;
      for (auto& item : split_commas(value)) {
        if (item.empty())
          throw UsageError("--" + f.name + ": " + quoted(value) + " has an empty list element");
        if (!f.choices.empty()) check_choice(f, item, value);
        out.push_back(std::move(item));
      }
      f.string_list = std::move(out);
      break;
    }
  }
  f.set = true;
}

// Number of UTF-8 code points (terminal columns, near enough).
std::size_t display_width(std::string_view s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

}  // namespace

struct Flags::Impl {
  std::string command;
  std::string summary;
  std::vector<std::unique_ptr<Flag>> flags;
  bool help = false;

  Flag* find(std::string_view name) {
    for (auto& f : flags)
      if (f->name == name) return f.get();
    return nullptr;
  }
  const Flag* find(std::string_view name) const {
    for (const auto& f : flags)
      if (f->name == name) return f.get();
    return nullptr;
  }

  Flag& add(std::string name, Kind kind, std::string help_text) {
    if (name.empty() || name.front() == '-' || name.find('=') != std::string::npos ||
        name.find(' ') != std::string::npos)
      throw std::logic_error("vkattn::cli::Flags: bad flag name '" + name + "'");
    if (name == "help" || name == "h") throw std::logic_error("vkattn::cli::Flags: --help is built in");
    if (find(name)) throw std::logic_error("vkattn::cli::Flags: flag --" + name + " registered twice");
    for (const auto& f : flags)
      if (f->kind == Kind::Bool && ("no-" + f->name == name))
        throw std::logic_error("vkattn::cli::Flags: --" + name + " clashes with boolean --" + f->name);
    if (kind == Kind::Bool && find("no-" + name))
      throw std::logic_error("vkattn::cli::Flags: boolean --" + name + " clashes with --no-" + name);
    auto f = std::make_unique<Flag>();
    f->name = std::move(name);
    f->kind = kind;
    f->help = std::move(help_text);
    flags.push_back(std::move(f));
    return *flags.back();
  }

  [[noreturn]] void unknown(std::string_view arg) const {
    const std::string_view bare = arg.substr(arg.find_first_not_of('-') == std::string_view::npos
                                                 ? arg.size()
                                                 : arg.find_first_not_of('-'));
    std::vector<std::string> candidates;
    for (const auto& f : flags) {
      candidates.push_back(f->name);
      if (f->kind == Kind::Bool) candidates.push_back("no-" + f->name);
    }
    candidates.push_back("help");
    std::string msg = "unknown flag " + quoted(arg) + " for " + quoted(command);
    if (auto near = nearest(bare, candidates)) msg += " (did you mean --" + *near + "?)";
    throw UsageError(msg);
  }
};

Flags::Flags(std::string command, std::string summary) : impl_(std::make_unique<Impl>()) {
  impl_->command = std::move(command);
  impl_->summary = std::move(summary);
}
Flags::~Flags() = default;
Flags::Flags(Flags&&) noexcept = default;
Flags& Flags::operator=(Flags&&) noexcept = default;

std::int64_t& Flags::add_int(std::string name, std::int64_t def, std::string help,
                             std::optional<std::int64_t> min, std::optional<std::int64_t> max) {
  if ((min && def < *min) || (max && def > *max) || (min && max && *min > *max))
    throw std::logic_error("vkattn::cli::Flags: default of --" + name + " is outside its range");
  Flag& f = impl_->add(std::move(name), Kind::Int, std::move(help));
  f.int_value = def;
  f.int_min = min;
  f.int_max = max;
  f.default_text = std::to_string(def);
  return f.int_value;
}

double& Flags::add_double(std::string name, double def, std::string help, std::optional<double> min,
                          std::optional<double> max) {
  if ((min && def < *min) || (max && def > *max) || (min && max && *min > *max))
    throw std::logic_error("vkattn::cli::Flags: default of --" + name + " is outside its range");
  Flag& f = impl_->add(std::move(name), Kind::Double, std::move(help));
  f.double_value = def;
  f.double_min = min;
  f.double_max = max;
  f.default_text = format_double(def);
  return f.double_value;
}

std::string& Flags::add_string(std::string name, std::string def, std::string help) {
  Flag& f = impl_->add(std::move(name), Kind::String, std::move(help));
  f.default_text = def.empty() ? "" : def;
  f.string_value = std::move(def);
  return f.string_value;
}

std::string& Flags::add_choice(std::string name, std::string def, std::vector<std::string> choices,
                               std::string help) {
  if (choices.empty()) throw std::logic_error("vkattn::cli::Flags: --" + name + " has no choices");
  if (std::find(choices.begin(), choices.end(), def) == choices.end())
    throw std::logic_error("vkattn::cli::Flags: default of --" + name + " is not one of its choices");
  Flag& f = impl_->add(std::move(name), Kind::Choice, std::move(help));
  f.choices = std::move(choices);
  f.default_text = def;
  f.string_value = std::move(def);
  return f.string_value;
}

bool& Flags::add_bool(std::string name, bool def, std::string help) {
  Flag& f = impl_->add(std::move(name), Kind::Bool, std::move(help));
  f.bool_value = def;
  f.default_text = def ? "true" : "false";
  return f.bool_value;
}

std::vector<std::int64_t>& Flags::add_int_list(std::string name, std::vector<std::int64_t> def,
                                               std::string help, std::optional<std::int64_t> min,
                                               std::optional<std::int64_t> max) {
  for (auto v : def)
    if ((min && v < *min) || (max && v > *max))
      throw std::logic_error("vkattn::cli::Flags: default of --" + name + " is outside its range");
  Flag& f = impl_->add(std::move(name), Kind::IntList, std::move(help));
  f.int_min = min;
  f.int_max = max;
  std::vector<std::string> parts;
  for (auto v : def) parts.push_back(std::to_string(v));
  f.default_text = join(parts, ",");
  f.int_list = std::move(def);
  return f.int_list;
}

std::vector<std::string>& Flags::add_string_list(std::string name, std::vector<std::string> def,
                                                 std::string help, std::vector<std::string> choices) {
  for (const auto& v : def)
    if (!choices.empty() && std::find(choices.begin(), choices.end(), v) == choices.end())
      throw std::logic_error("vkattn::cli::Flags: default of --" + name + " is not among its choices");
  Flag& f = impl_->add(std::move(name), Kind::StringList, std::move(help));
  f.choices = std::move(choices);
  f.default_text = join(def, ",");
  f.string_list = std::move(def);
  return f.string_list;
}

void Flags::parse(const std::vector<std::string>& args) {
  auto& im = *impl_;
  // --help anywhere wins over every other mistake.
  for (const auto& a : args) {
    if (a == "--") break;
    if (a == "--help" || a == "-h") {
      im.help = true;
      return;
    }
  }
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      if (i + 1 < args.size()) throw UsageError("unexpected argument " + quoted(args[i + 1]));
      break;
    }
    if (a.size() < 2 || a[0] != '-') throw UsageError("unexpected argument " + quoted(a));
    if (a[1] != '-') {
      // Single-dash: a negative number where a flag was expected, or an
      // unsupported short flag.
      bool overflow = false;
      if (parse_int(a, overflow) || overflow || parse_double(a))
        throw UsageError("unexpected argument " + quoted(a));
      im.unknown(a);
    }
    const std::string body = a.substr(2);
    const auto eq = body.find('=');
    const std::string name = body.substr(0, eq);
    const std::optional<std::string> inline_value =
        eq == std::string::npos ? std::nullopt : std::optional<std::string>(body.substr(eq + 1));
    if (name.empty()) im.unknown(a);

    Flag* f = im.find(name);
    if (!f && name.rfind("no-", 0) == 0) {
      Flag* b = im.find(std::string_view(name).substr(3));
      if (b && b->kind == Kind::Bool) {
        if (inline_value) throw UsageError("--" + name + " does not take a value");
        b->bool_value = false;
        b->set = true;
        continue;
      }
    }
    if (!f) im.unknown(eq == std::string::npos ? a : "--" + name);

    if (f->kind == Kind::Bool) {
      if (inline_value) {
        assign(*f, *inline_value);
      } else {
        f->bool_value = true;
        f->set = true;
      }
      continue;
    }
    if (inline_value) {
      assign(*f, *inline_value);
      continue;
    }
    // Separate value token. A following "--flag" means the value is missing;
    // a following "-3" is a value (negative number).
    if (i + 1 >= args.size() || (args[i + 1].size() > 2 && args[i + 1].rfind("--", 0) == 0) ||
        args[i + 1] == "--")
      throw UsageError("--" + name + " needs a value");
    assign(*f, args[++i]);
  }
}

bool Flags::help_requested() const noexcept { return impl_->help; }

bool Flags::was_set(std::string_view name) const {
  const Flag* f = impl_->find(name);
  if (!f) throw std::logic_error("vkattn::cli::Flags::was_set: no flag --" + std::string(name));
  return f->set;
}

const std::string& Flags::command() const noexcept { return impl_->command; }

std::string Flags::help() const {
  const auto& im = *impl_;
  struct Row {
    std::string left, right;
  };
  std::vector<Row> rows;
  for (const auto& fp : im.flags) {
    const Flag& f = *fp;
    Row r;
    if (f.kind == Kind::Bool) {
      r.left = "--[no-]" + f.name;
    } else {
      r.left = "--" + f.name + " " + metavar(f);
    }
    r.right = f.help;
    std::vector<std::string> notes;
    if (!f.default_text.empty()) notes.push_back("default " + f.default_text);
    auto range = [&](const std::optional<std::string>& lo, const std::optional<std::string>& hi) {
      if (lo && hi) notes.push_back("range " + *lo + ".." + *hi);
      else if (lo) notes.push_back("min " + *lo);
      else if (hi) notes.push_back("max " + *hi);
    };
    if (f.kind == Kind::Int || f.kind == Kind::IntList) {
      range(f.int_min ? std::optional(std::to_string(*f.int_min)) : std::nullopt,
            f.int_max ? std::optional(std::to_string(*f.int_max)) : std::nullopt);
    } else if (f.kind == Kind::Double) {
      range(f.double_min ? std::optional(format_double(*f.double_min)) : std::nullopt,
            f.double_max ? std::optional(format_double(*f.double_max)) : std::nullopt);
    }
    if (!f.choices.empty()) notes.push_back("one of " + join(f.choices, ", "));
    if (!notes.empty()) {
      if (!r.right.empty()) r.right += " ";
      r.right += "(" + join(notes, "; ") + ")";
    }
    rows.push_back(std::move(r));
  }
  rows.push_back({"-h, --help", "show this help"});

  constexpr std::size_t kMaxLeft = 30;
  std::size_t width = 0;
  for (const auto& r : rows)
    if (display_width(r.left) <= kMaxLeft) width = std::max(width, display_width(r.left));

  std::ostringstream os;
  os << "usage: " << im.command << " [flags]\n";
  if (!im.summary.empty()) os << "\n" << im.summary << "\n";
  os << "\nflags:\n";
  for (const auto& r : rows) {
    const std::size_t w = display_width(r.left);
    os << "  " << r.left;
    if (w > width) {
      os << "\n  " << std::string(width, ' ');
    } else {
      os << std::string(width - w, ' ');
    }
    os << "  " << r.right << "\n";
  }
  return os.str();
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::optional<std::string> nearest(std::string_view word, const std::vector<std::string>& candidates) {
  if (word.empty()) return std::nullopt;
  std::optional<std::string> best;
  std::size_t best_d = static_cast<std::size_t>(-1);
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  // Close enough: up to a third of the word's length (at least 1, at most 3).
  const std::size_t limit = std::clamp<std::size_t>(word.size() / 3, 1, 3);
  if (best && best_d <= limit) return best;
  // A unique prefix ("--num" -> "--num-tokens").
  std::optional<std::string> prefix;
  if (word.size() >= 2) {
    for (const auto& c : candidates) {
      if (c.size() > word.size() && c.compare(0, word.size(), word) == 0) {
        if (prefix) return std::nullopt;
        prefix = c;
      }
    }
  }
  return prefix;
}

}  // namespace vkattn::cli
