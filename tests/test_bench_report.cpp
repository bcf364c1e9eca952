// Tests for the vkattn benchmark report writers (tools/report/*).
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "report/bench_report.hpp"
#include "report/progress.hpp"
#include "report/svg_plot.hpp"

namespace {

using namespace vkattn::report;

// ------------------------------------------------------------ tiny JSON ---
// A strict recursive-descent JSON parser (RFC 8259) producing a small DOM.
struct JVal {
  enum Type { Null, Bool, Num, Str, Arr, Obj } type = Null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<JVal> arr;
  std::vector<std::pair<std::string, JVal>> obj;
  const JVal* get(const std::string& k) const {
    for (const auto& [key, v] : obj)
      if (key == k) return &v;
    return nullptr;
  }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}
  JVal parse_document() {
    JVal v = value();
    ws();
    if (i_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("JSON error at offset " + std::to_string(i_) + ": " + what);
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  char peek() {
    if (i_ >= s_.size()) fail("unexpected end");
    return s_[i_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  void literal(const char* lit) {
    for (const char* p = lit; *p; ++p) expect(*p);
  }
  JVal value() {
    ws();
    JVal v;
    const char c = peek();
    if (c == '{') {
      v.type = JVal::Obj;
      ++i_;
      ws();
      if (peek() == '}') { ++i_; return v; }
      while (true) {
        ws();
        if (peek() != '"') fail("expected key");
        std::string k = string();
        for (const auto& kv : v.obj)
          if (kv.first == k) fail("duplicate key " + k);
        ws();
        expect(':');
        JVal item = value();
        v.obj.emplace_back(std::move(k), std::move(item));
        ws();
        if (peek() == ',') { ++i_; continue; }
        expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.type = JVal::Arr;
      ++i_;
      ws();
      if (peek() == ']') { ++i_; return v; }
      while (true) {
        v.arr.push_back(value());
        ws();
        if (peek() == ',') { ++i_; continue; }
        expect(']');
        return v;
      }
    }
    if (c == '"') { v.type = JVal::Str; v.str = string(); return v; }
    if (c == 't') { literal("true"); v.type = JVal::Bool; v.b = true; return v; }
    if (c == 'f') { literal("false"); v.type = JVal::Bool; return v; }
    if (c == 'n') { literal("null"); return v; }
    v.type = JVal::Num;
    v.num = number();
    return v;
  }
  double number() {
    const std::size_t start = i_;
    if (peek() == '-') ++i_;
    if (peek() == '0') ++i_;
    else if (std::isdigit(static_cast<unsigned char>(peek()))) while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    else fail("bad number");
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("bad fraction");
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (peek() == '+' || peek() == '-') ++i_;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("bad exponent");
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    return std::stod(s_.substr(start, i_ - start));
  }
  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      const char c = peek();
      ++i_;
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("raw control character in string");
      if (c != '\\') { out += c; continue; }
      const char e = peek();
      ++i_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = 0;
          for (int k = 0; k < 4; ++k) {
            const char h = peek();
            ++i_;
            if (!std::isxdigit(static_cast<unsigned char>(h))) fail("bad \\u escape");
            cp = cp * 16 + static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
          }
          if (cp < 0x80) out += static_cast<char>(cp);
          else out += "?";  // not needed by these tests
          break;
        }
        default: fail("bad escape");
      }
    }
  }
  const std::string& s_;
  std::size_t i_ = 0;
};

JVal parse_json(const std::string& s) { return JsonParser(s).parse_document(); }

// ------------------------------------------------------------- tiny CSV ---
// RFC 4180 reader: quoted fields with doubled quotes, commas and newlines.
std::vector<std::vector<std::string>> parse_csv(const std::string& s) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, was_quoted = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < s.size() && s[i + 1] == '"') { field += '"'; ++i; }
        else quoted = false;
      } else {
        field += c;
      }
      continue;
    }
    if (c == '"') {
      if (!field.empty() || was_quoted) throw std::runtime_error("quote inside unquoted field");
      quoted = was_quoted = true;
    } else if (c == ',') {
      row.push_back(field); field.clear(); was_quoted = false;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      row.push_back(field); field.clear(); was_quoted = false;
      rows.push_back(row); row.clear();
    } else {
      if (was_quoted) throw std::runtime_error("text after closing quote");
      field += c;
    }
  }
  if (quoted) throw std::runtime_error("unterminated quoted field");
  if (!field.empty() || !row.empty()) { row.push_back(field); rows.push_back(row); }
  return rows;
}

// ------------------------------------------------------------- tiny XML ---
// Well-formedness check for the subset an SVG writer uses: XML declaration,
// elements, quoted attributes (no duplicates), text with entity references,
// proper nesting, exactly one root. Returns "" when fine, else the problem.
std::string xml_problem(const std::string& s) {
  std::vector<std::string> stack;
  std::size_t i = 0;
  int roots = 0;
  auto is_name_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':' || c == '.';
  };
  auto check_text = [&](std::size_t from, std::size_t to) -> std::string {
    for (std::size_t k = from; k < to; ++k) {
      const char c = s[k];
      if (c == '>') return "raw '>' in text at " + std::to_string(k);
      if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t' && c != '\r') return "control char";
      if (c == '&') {
        const std::size_t semi = s.find(';', k);
        if (semi == std::string::npos || semi > to) return "bad entity";
        const std::string ent = s.substr(k + 1, semi - k - 1);
        if (ent != "amp" && ent != "lt" && ent != "gt" && ent != "quot" && ent != "apos" && ent.rfind("#", 0) != 0)
          return "unknown entity &" + ent + ";";
        k = semi;
      }
    }
    return "";
  };
  if (s.rfind("<?xml", 0) == 0) {
    const std::size_t e = s.find("?>");
    if (e == std::string::npos) return "unterminated XML declaration";
    i = e + 2;
  }
  while (i < s.size()) {
    const std::size_t lt = s.find('<', i);
    const std::size_t text_end = lt == std::string::npos ? s.size() : lt;
    if (stack.empty()) {
      for (std::size_t k = i; k < text_end; ++k)
        if (!std::isspace(static_cast<unsigned char>(s[k]))) return "text outside the root element";
    } else if (auto p = check_text(i, text_end); !p.empty()) {
      return p;
    }
    if (lt == std::string::npos) break;
    i = lt + 1;
    if (s.compare(i, 3, "!--") == 0) {
      const std::size_t e = s.find("-->", i);
      if (e == std::string::npos) return "unterminated comment";
      i = e + 3;
      continue;
    }
    const bool closing = i < s.size() && s[i] == '/';
    if (closing) ++i;
    const std::size_t name_start = i;
    while (i < s.size() && is_name_char(s[i])) ++i;
    const std::string name = s.substr(name_start, i - name_start);
    if (name.empty()) return "empty element name at " + std::to_string(name_start);
    if (closing) {
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
      if (i >= s.size() || s[i] != '>') return "bad closing tag </" + name;
      ++i;
      if (stack.empty() || stack.back() != name)
        return "</" + name + "> closes <" + (stack.empty() ? std::string("nothing") : stack.back()) + ">";
      stack.pop_back();
      continue;
    }
    std::vector<std::string> attrs;
    while (true) {
      const std::size_t before = i;
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
      if (i >= s.size()) return "unterminated tag <" + name;
      if (s[i] == '>' || s.compare(i, 2, "/>") == 0) break;
      if (i == before) return "attributes of <" + name + "> not separated by space";
      const std::size_t an = i;
      while (i < s.size() && is_name_char(s[i])) ++i;
      const std::string attr = s.substr(an, i - an);
      if (attr.empty()) return "bad attribute in <" + name + ">";
      for (const auto& a : attrs)
        if (a == attr) return "duplicate attribute " + attr + " in <" + name + ">";
      attrs.push_back(attr);
      if (i >= s.size() || s[i] != '=') return "attribute " + attr + " without value in <" + name + ">";
      ++i;
      if (i >= s.size() || (s[i] != '"' && s[i] != '\'')) return "unquoted attribute " + attr + " in <" + name + ">";
      const char q = s[i++];
      const std::size_t ve = s.find(q, i);
      if (ve == std::string::npos) return "unterminated attribute value";
      const std::string val = s.substr(i, ve - i);
      if (val.find('<') != std::string::npos) return "'<' in attribute value";
      if (auto p = check_text(i, ve); !p.empty() && p.rfind("raw '>'", 0) != 0) return p;
      i = ve + 1;
    }
    const bool self_closing = s[i] == '/';
    i += self_closing ? 2 : 1;
    if (stack.empty()) {
      if (++roots > 1) return "more than one root element";
    }
    if (!self_closing) stack.push_back(name);
  }
  if (!stack.empty()) return "unclosed element <" + stack.back() + ">";
  if (roots != 1) return "no root element";
  return "";
}

std::size_t count_of(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + needle.size())) ++n;
  return n;
}

// ------------------------------------------------------------- fixtures ---

BenchMeta sample_meta() {
  BenchMeta m;
  m.suite = "paged-attention";
  m.device = "NVIDIA H100 80GB HBM3 \"SXM\" <x&y>";
  m.driver = "NVIDIA 550.54.15";
  m.path = "coopmat2";
  m.library_version = "0.1.0";
  m.timestamp = "2025-01-02T03:04:05Z";
  m.ceilings = {3731.0, 756.0, 700.0, "coopmat2", 3.25, 5.5, 4.0};
  return m;
}

std::vector<BenchCase> sample_cases() {
  std::vector<BenchCase> v;
  BenchCase a;
  a.name = "B=1 ctx=512";
  a.params = {{"B", "1"}, {"ctx", "512"}, {"dtype", "f16"}};
  a.samples_us = {12.5, 10.0, 11.0};
  a.bytes = 30e6;
  a.flops = 2e7;
  a.bound = "memory";
  a.verified = true;
  a.max_abs_err = 1e-3;
  a.max_rel_err = 2.5e-4;
  v.push_back(a);
  BenchCase b;
  b.name = "B=64, ctx=4096 \"long\"\nline";  // needs CSV quoting and JSON escaping
  b.params = {{"B", "64"}, {"ctx", "4096"}, {"case", "clash"}, {"note", "a,b"}};
  b.samples_us = {400, 380, 390, 420};
  b.bytes = 1.4e9;
  b.flops = 3e9;
  b.bound = "memory";
  b.verified = false;
  v.push_back(b);
  BenchCase c;
  c.name = "prefill L=8192 \xC3\xA9\tdone";  // é and a tab
  c.params = {{"L", "8192"}, {"dtype", "bf16"}};
  c.samples_us = {1000};
  c.bytes = 2e8;
  c.flops = 5e11;
  c.bound = "compute";
  c.verified = true;
  v.push_back(c);
  return v;
}

// ---------------------------------------------------------------- stats ---

TEST(BenchStats, MedianMinMaxOddCount) {
  BenchCase c;
  c.samples_us = {5, 1, 3, 9, 7};
  const BenchStats s = stats_of(c, {});
  EXPECT_DOUBLE_EQ(s.median_us, 5);
  EXPECT_DOUBLE_EQ(s.min_us, 1);
  EXPECT_DOUBLE_EQ(s.max_us, 9);
  EXPECT_DOUBLE_EQ(s.mean_us, 5);
  EXPECT_NEAR(s.stddev_us, std::sqrt(10.0), 1e-12);
  EXPECT_EQ(s.samples, 5u);
}

TEST(BenchStats, MedianEvenCountAveragesMiddlePair) {
  BenchCase c;
  c.samples_us = {4, 1, 10, 2};
  const BenchStats s = stats_of(c, {});
  EXPECT_DOUBLE_EQ(s.median_us, 3);
  EXPECT_DOUBLE_EQ(s.min_us, 1);
  EXPECT_DOUBLE_EQ(s.max_us, 10);
}

TEST(BenchStats, EmptySamplesAreZero) {
  BenchCase c;
  c.bytes = 1e9;
  c.bound = "memory";
  const BenchStats s = stats_of(c, {100, 0, 0, ""});
  EXPECT_EQ(s.samples, 0u);
  EXPECT_EQ(s.median_us, 0);
  EXPECT_EQ(s.gbps, 0);
  EXPECT_EQ(s.fraction, 0);
}

TEST(BenchStats, ThroughputAndMemoryFraction) {
  BenchCase c;
  c.samples_us = {100};  // 100 us
  c.bytes = 200e6;       // 200 MB -> 2000 GB/s
  c.flops = 50e9;        // 50 GFLOP -> 500 TFLOP/s
  c.bound = "memory";
  const Ceilings cl{4000, 1000, 800, ""};
  const BenchStats s = stats_of(c, cl);
  EXPECT_NEAR(s.gbps, 2000, 1e-9);
  EXPECT_NEAR(s.tflops, 500, 1e-9);
  EXPECT_NEAR(s.fraction, 0.5, 1e-12);  // 2000 / 4000, not 500 / 1000
}

TEST(BenchStats, ComputeFractionUsesF16OrBf16Ceiling) {
  BenchCase c;
  c.samples_us = {100};
  c.bytes = 200e6;
  c.flops = 50e9;  // 500 TFLOP/s
  c.bound = "compute";
  const Ceilings cl{4000, 1000, 800, ""};
  EXPECT_NEAR(stats_of(c, cl).fraction, 0.5, 1e-12);
  c.params["dtype"] = "bf16";
  EXPECT_NEAR(stats_of(c, cl).fraction, 500.0 / 800.0, 1e-12);
  EXPECT_EQ(ceiling_for(c, cl).label, "bf16 ceiling");
  // Unknown bf16 ceiling falls back to f16; unknown everything gives 0.
  EXPECT_NEAR(stats_of(c, {4000, 1000, 0, ""}).fraction, 0.5, 1e-12);
  EXPECT_EQ(stats_of(c, {4000, 0, 0, ""}).fraction, 0);
  c.bound = "";
  EXPECT_EQ(stats_of(c, cl).fraction, 0);
}

// ----------------------------------------------------------- formatting ---

TEST(BenchFormat, Numbers) {
  EXPECT_EQ(format_gbps(3731.4), "3731");
  EXPECT_EQ(format_gbps(87.44), "87.4");
  EXPECT_EQ(format_tflops(4.213), "4.21");
  EXPECT_EQ(format_tflops(42.13), "42.1");
  EXPECT_EQ(format_tflops(421.3), "421");
  EXPECT_EQ(format_us(3.14159), "3.142");
  EXPECT_EQ(format_us(31.4159), "31.42");
  EXPECT_EQ(format_us(314.159), "314.2");
  EXPECT_EQ(format_us(3141.59), "3142");
  EXPECT_EQ(format_us(31415.9), "31416");
  EXPECT_EQ(format_us(9.99996), "10.00");
  EXPECT_EQ(format_us(0.01234), "0.012");
  EXPECT_EQ(format_percent(0.8734), "87.3%");
  EXPECT_EQ(format_sig(0.00125, 3), "0.00125");
  EXPECT_EQ(format_sig(1234567, 3), "1230000");
  EXPECT_EQ(format_sig(2.5e-5, 2), "2.5e-05");
  EXPECT_EQ(format_sig(0, 3), "0");
  EXPECT_EQ(format_exact(0.1), "0.1");
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field(" pad"), "\" pad\"");
  EXPECT_EQ(json_quote("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
  EXPECT_EQ(sanitize_utf8("ok\xFFok"), "ok\xEF\xBF\xBDok");
  EXPECT_EQ(sanitize_utf8("\xC3\xA9"), "\xC3\xA9");
  EXPECT_EQ(xml_escape("<a & 'b'>\x01"), "&lt;a &amp; &apos;b&apos;&gt;");
}

TEST(BenchFormat, NiceAxis) {
  auto a = nice_axis(4150 * 1.12, 6);
  EXPECT_GE(a.max, 4150 * 1.12);
  EXPECT_LE(a.max / a.step, 6.0 + 1e-9);
  EXPECT_DOUBLE_EQ(a.step, 1000);
  EXPECT_DOUBLE_EQ(a.max, 5000);
  auto b = nice_axis(0.37, 6);
  EXPECT_DOUBLE_EQ(b.step, 0.1);
  EXPECT_NEAR(b.max, 0.4, 1e-12);
  auto z = nice_axis(0, 6);
  EXPECT_DOUBLE_EQ(z.max, 1);
}

// ---------------------------------------------------------------- table ---

TEST(BenchTable, HeaderAndAlignedRows) {
  const auto cases = sample_cases();
  std::ostringstream os;
  write_table(os, sample_meta(), cases);
  const std::string t = os.str();
  EXPECT_NE(t.find("NVIDIA H100 80GB HBM3"), std::string::npos) << t;
  EXPECT_NE(t.find("NVIDIA 550.54.15"), std::string::npos);
  EXPECT_NE(t.find("coopmat2"), std::string::npos);
  EXPECT_NE(t.find("copy 3731 GB/s"), std::string::npos) << t;
  EXPECT_NE(t.find("f16 756 TFLOP/s"), std::string::npos) << t;
  EXPECT_NE(t.find("dispatch 3.250 µs, 2 dependent 5.500 µs, fill + dispatch 4.000 µs"), std::string::npos) << t;
  EXPECT_NE(t.find("median µs"), std::string::npos);
  EXPECT_NE(t.find("% ceiling"), std::string::npos);
  // Case 0: median 11 us, 30 MB -> 2727.3 GB/s -> 73.1% of 3731.
  EXPECT_NE(t.find("11.00"), std::string::npos) << t;
  EXPECT_NE(t.find("10.00–12.50"), std::string::npos) << t;
  EXPECT_NE(t.find("2727"), std::string::npos) << t;
  EXPECT_NE(t.find("73.1%"), std::string::npos) << t;
  // Compute-bound bf16 case: 500 TFLOP/s of the 700 bf16 ceiling.
  EXPECT_NE(t.find("71.4%"), std::string::npos) << t;

  // The GB/s column ends at the same display column on the header and rows.
  std::vector<std::string> lines;
  std::istringstream is(t);
  for (std::string l; std::getline(is, l);) lines.push_back(l);
  std::size_t header = 0;
  while (header < lines.size() && lines[header].rfind("case", 0) != 0) ++header;
  ASSERT_LT(header + 1 + cases.size(), lines.size() + 1);
  auto col_end = [](const std::string& line, const std::string& token) {
    const std::size_t p = line.find(token);
    return p == std::string::npos ? std::string::npos : display_width(line.substr(0, p + token.size()));
  };
  const std::size_t gbps_end = col_end(lines[header], "GB/s");
  EXPECT_EQ(col_end(lines[header + 2], "2727"), gbps_end) << t;
  EXPECT_EQ(col_end(lines[header + 4], " 200"), gbps_end) << t;
}

// A case whose samples still drifted after measure()'s retimes says so in its bound column.
TEST(BenchTable, AnUnsteadyCaseIsMarked) {
  auto cases = sample_cases();
  cases[0].params["unsteady"] = "yes";
  std::ostringstream os;
  write_table(os, sample_meta(), cases);
  const std::string t = os.str();
  EXPECT_EQ(t.find("(unsteady)"), t.rfind("(unsteady)")) << t;   // once: only that case
  std::istringstream is(t);
  bool marked = false;
  for (std::string l; std::getline(is, l);)
    if (l.find("(unsteady)") != std::string::npos) marked = l.find("11.00") != std::string::npos;
  EXPECT_TRUE(marked) << t;
}

// A case timed while the machine was slow says so, with its rates.
TEST(BenchTable, ACaseTimedOnASlowMachineIsMarked) {
  auto cases = sample_cases();
  cases[1].params["machine_slow"] = "yes";
  cases[1].params["matrix_rate_after"] = "123.4";
  cases[1].params["copy_rate_after"] = "2071";
  std::ostringstream os;
  write_table(os, sample_meta(), cases);
  const std::string t = os.str();
  const std::size_t at = t.find("(slow machine: f16 matrix 123.4 TFLOP/s, copy 2071 GB/s after it)");
  EXPECT_NE(at, std::string::npos) << t;
  EXPECT_EQ(at, t.rfind("(slow machine")) << t;
}

// ----------------------------------------------------------------- JSON ---

TEST(BenchJson, ParsesAndHasEveryFigure) {
  const auto cases = sample_cases();
  std::ostringstream os;
  write_json(os, sample_meta(), cases);
  JVal doc;
  ASSERT_NO_THROW(doc = parse_json(os.str())) << os.str();
  ASSERT_EQ(doc.type, JVal::Obj);
  ASSERT_NE(doc.get("meta"), nullptr);
  EXPECT_EQ(doc.get("meta")->get("device")->str, sample_meta().device);  // escaping round-trips
  EXPECT_EQ(doc.get("meta")->get("suite")->str, "paged-attention");
  EXPECT_EQ(doc.get("meta")->get("library_version")->str, "0.1.0");
  ASSERT_NE(doc.get("ceilings"), nullptr);
  EXPECT_DOUBLE_EQ(doc.get("ceilings")->get("copy_gbps")->num, 3731);
  EXPECT_DOUBLE_EQ(doc.get("ceilings")->get("bf16_tflops")->num, 700);
  EXPECT_EQ(doc.get("ceilings")->get("matrix_path")->str, "coopmat2");
  EXPECT_DOUBLE_EQ(doc.get("ceilings")->get("dispatch_us")->num, 3.25);
  EXPECT_DOUBLE_EQ(doc.get("ceilings")->get("dependent_dispatches_us")->num, 5.5);
  EXPECT_DOUBLE_EQ(doc.get("ceilings")->get("fill_dispatch_us")->num, 4.0);
  const JVal* arr = doc.get("cases");
  ASSERT_NE(arr, nullptr);
  ASSERT_EQ(arr->type, JVal::Arr);
  ASSERT_EQ(arr->arr.size(), cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const JVal& c = arr->arr[i];
    EXPECT_EQ(c.get("name")->str, cases[i].name);
    ASSERT_EQ(c.get("samples_us")->arr.size(), cases[i].samples_us.size());
    for (std::size_t k = 0; k < cases[i].samples_us.size(); ++k)
      EXPECT_DOUBLE_EQ(c.get("samples_us")->arr[k].num, cases[i].samples_us[k]);
    EXPECT_EQ(c.get("params")->obj.size(), cases[i].params.size());
    EXPECT_EQ(c.get("verified")->b, cases[i].verified);
    const BenchStats st = stats_of(cases[i], sample_meta().ceilings);
    const JVal* s = c.get("stats");
    ASSERT_NE(s, nullptr);
    for (const char* k : {"median_us", "min_us", "max_us", "gbps", "tflops", "fraction"})
      ASSERT_NE(s->get(k), nullptr) << k;
    EXPECT_DOUBLE_EQ(s->get("median_us")->num, st.median_us);
    EXPECT_DOUBLE_EQ(s->get("gbps")->num, st.gbps);  // shortest round-trip is exact
    EXPECT_DOUBLE_EQ(s->get("fraction")->num, st.fraction);
  }
  EXPECT_EQ(arr->arr[1].get("params")->get("note")->str, "a,b");
}

TEST(BenchJson, EmptyCasesAndNonFiniteAreValid) {
  BenchMeta m;
  m.ceilings.copy_gbps = std::nan("");
  std::ostringstream os;
  write_json(os, m, {});
  JVal doc;
  ASSERT_NO_THROW(doc = parse_json(os.str())) << os.str();
  EXPECT_EQ(doc.get("cases")->arr.size(), 0u);
  EXPECT_EQ(doc.get("ceilings")->get("copy_gbps")->type, JVal::Null);
}

TEST(BenchJson, CheckerRejectsBrokenJson) {
  EXPECT_THROW(parse_json("{\"a\": 1,}"), std::runtime_error);
  EXPECT_THROW(parse_json("{\"a\": \"x\ny\"}"), std::runtime_error);
  EXPECT_THROW(parse_json("{\"a\": nan}"), std::runtime_error);
  EXPECT_THROW(parse_json("[1, 2"), std::runtime_error);
}

// ------------------------------------------------------------------ CSV ---

TEST(BenchCsv, HeaderAndOneRowPerCase) {
  const auto cases = sample_cases();
  std::ostringstream os;
  write_csv(os, sample_meta(), cases);
  const auto rows = parse_csv(os.str());
  ASSERT_EQ(rows.size(), cases.size() + 1) << os.str();
  const auto& h = rows[0];
  for (const auto& r : rows) EXPECT_EQ(r.size(), h.size());
  auto col = [&](const std::string& name) {
    for (std::size_t k = 0; k < h.size(); ++k)
      if (h[k] == name) return k;
    ADD_FAILURE() << "missing column " << name << " in " << os.str();
    return std::size_t{0};
  };
  for (const char* name : {"suite", "device", "driver", "path", "library_version", "case", "B", "ctx",
                           "dtype", "L", "note", "param_case", "median_us", "min_us", "max_us", "gbps",
                           "tflops", "fraction"})
    (void)col(name);
  EXPECT_EQ(rows[1][col("device")], sample_meta().device);
  EXPECT_EQ(rows[2][col("case")], cases[1].name);  // quotes, comma and newline survive
  EXPECT_EQ(rows[2][col("note")], "a,b");
  EXPECT_EQ(rows[2][col("param_case")], "clash");
  EXPECT_EQ(rows[1][col("param_case")], "");
  EXPECT_EQ(rows[3][col("L")], "8192");
  EXPECT_DOUBLE_EQ(std::stod(rows[2][col("median_us")]), 395);
  EXPECT_DOUBLE_EQ(std::stod(rows[1][col("min_us")]), 10);
  EXPECT_DOUBLE_EQ(std::stod(rows[1][col("max_us")]), 12.5);
  EXPECT_EQ(rows[2][col("verified")], "false");
}

// ------------------------------------------------------------------ SVG ---

TEST(BenchSvg, WellFormedOneMarkPerCaseOneCeiling) {
  const auto cases = sample_cases();
  for (const std::string metric : {"GB/s", "TFLOP/s"}) {
    std::ostringstream os;
    write_svg(os, sample_meta(), cases, metric);
    const std::string svg = os.str();
    EXPECT_EQ(xml_problem(svg), "") << svg;
    EXPECT_NE(svg.find("xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
    EXPECT_EQ(count_of(svg, "class=\"mark\""), cases.size()) << metric;
    EXPECT_EQ(count_of(svg, "class=\"ceiling\""), 1u) << metric;
    EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);
    EXPECT_NE(svg.find("paged-attention"), std::string::npos);
    EXPECT_NE(svg.find("coopmat2"), std::string::npos);
    EXPECT_NE(svg.find("&lt;x&amp;y&gt;"), std::string::npos);  // device name escaped
  }
  std::ostringstream os;
  write_svg(os, sample_meta(), cases, "GB/s");
  EXPECT_NE(os.str().find("copy ceiling 3731 GB/s"), std::string::npos);
  std::ostringstream ot;
  write_svg(ot, sample_meta(), cases, "TFLOP/s");
  EXPECT_NE(ot.str().find("f16 ceiling 756 TFLOP/s"), std::string::npos);
}

TEST(BenchSvg, CeilingVisibleWhenBarsAreFarBelowOrAbove) {
  for (const double ceiling : {1e6, 1.0}) {  // bars ~2727 GB/s: far below / far above
    BenchMeta m = sample_meta();
    m.ceilings.copy_gbps = ceiling;
    std::ostringstream os;
    write_svg(os, m, sample_cases(), "GB/s");
    const std::string svg = os.str();
    ASSERT_EQ(xml_problem(svg), "");
    // The ceiling's y lies within the plot (between the top margin and the svg height).
    const std::size_t p = svg.find("class=\"ceiling\"");
    ASSERT_NE(p, std::string::npos);
    const std::size_t y1 = svg.find("y1=\"", p);
    const double y = std::stod(svg.substr(y1 + 4));
    const std::size_t hp = svg.find("height=\"");
    const double height = std::stod(svg.substr(hp + 8));
    EXPECT_GT(y, 60.0) << ceiling;
    EXPECT_LT(y, height) << ceiling;
    // ...and so does every bar top.
    for (std::size_t q = svg.find("class=\"mark\""); q != std::string::npos;
         q = svg.find("class=\"mark\"", q + 1)) {
      const double by = std::stod(svg.substr(svg.find(" y=\"", q) + 4));
      EXPECT_GT(by, 60.0);
    }
  }
}

TEST(BenchSvg, NoCeilingLineWhenUnknownAndEmptyCasesStillValid) {
  BenchMeta m = sample_meta();
  m.ceilings = {};
  std::ostringstream os;
  write_svg(os, m, sample_cases(), "gbps");
  EXPECT_EQ(xml_problem(os.str()), "");
  EXPECT_EQ(count_of(os.str(), "class=\"ceiling\""), 0u);
  EXPECT_NE(os.str().find("copy ceiling unknown"), std::string::npos);
  std::ostringstream oe;
  write_svg(oe, sample_meta(), {}, "GB/s");
  EXPECT_EQ(xml_problem(oe.str()), "");
  EXPECT_EQ(count_of(oe.str(), "class=\"mark\""), 0u);
  std::ostringstream bad;
  EXPECT_THROW(write_svg(bad, m, {}, "ms"), std::invalid_argument);
}

TEST(BenchSvg, ManyCasesLongNames) {
  std::vector<BenchCase> cases;
  for (int i = 0; i < 40; ++i) {
    BenchCase c;
    c.name = "decode B=" + std::to_string(i) + " ctx=131072 heads=64/8 page=16 with a very long tail name";
    c.samples_us = {10.0 + i};
    c.bytes = 1e7 * (i + 1);
    c.bound = "memory";
    c.verified = true;
    cases.push_back(c);
  }
  std::ostringstream os;
  write_svg(os, sample_meta(), cases, "GB/s");
  EXPECT_EQ(xml_problem(os.str()), "");
  EXPECT_EQ(count_of(os.str(), "class=\"mark\""), 40u);
  EXPECT_NE(os.str().find("…"), std::string::npos);  // long names shortened
}

TEST(BenchSvg, CheckerRejectsBrokenXml) {
  EXPECT_NE(xml_problem("<svg><g></svg></g>"), "");
  EXPECT_NE(xml_problem("<svg><rect x=1/></svg>"), "");
  EXPECT_NE(xml_problem("<svg><text>a & b</text></svg>"), "");
  EXPECT_NE(xml_problem("<svg><g>"), "");
  EXPECT_NE(xml_problem("<svg/><svg/>"), "");
  EXPECT_EQ(xml_problem("<?xml version=\"1.0\"?>\n<svg a=\"1\"><g b='2'/><t>x &amp; y</t></svg>\n"), "");
}

// ------------------------------------------------------------- progress ---

TEST(BenchProgress, SilentWhenDisabled) {
  std::ostringstream os;
  {
    Progress p(3, "bench", os, false);
    p.step("a");
    p.step("b");
    p.finish();
    EXPECT_FALSE(p.enabled());
  }
  EXPECT_EQ(os.str(), "");
}

TEST(BenchProgress, DrawsStepsAndFinishesOnce) {
  std::ostringstream os;
  {
    Progress p(2, "paged-attention", os, true, 80);
    p.step("B=1 ctx=512");
    EXPECT_EQ(p.current(), 1u);
    p.step("B=64 ctx=4096");
    p.finish();
    p.finish();  // idempotent; destructor adds nothing either
  }
  const std::string s = os.str();
  EXPECT_NE(s.find("paged-attention [..........") , std::string::npos) << s;
  EXPECT_NE(s.find("1/2"), std::string::npos);
  EXPECT_NE(s.find("B=1 ctx=512"), std::string::npos);
  EXPECT_NE(s.find("B=64 ctx=4096"), std::string::npos);
  EXPECT_NE(s.find("[####################] 2/2 done in"), std::string::npos) << s;
  EXPECT_EQ(count_of(s, "\r"), 3u);
  EXPECT_EQ(count_of(s, "\n"), 1u);
  EXPECT_EQ(s.back(), '\n');
}

TEST(BenchProgress, RenderFitsWidth) {
  const std::string long_name(300, 'x');
  const std::string line = Progress::render("suite", 5, 10, long_name, 8.0, false, 60);
  EXPECT_LE(display_width(line), 59u) << line;
  EXPECT_NE(line.find("5/10"), std::string::npos);
  EXPECT_NE(line.find("ETA 12s"), std::string::npos) << line;  // 4 done in 8 s, 6 left
  EXPECT_NE(line.find("[########............]"), std::string::npos) << line;
}

}  // namespace
