// Internal: a minimal JSON writer (objects, arrays, strings, numbers, bools)
// that keeps commas and escaping right.
#pragma once
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace vkattn::detail {

class JsonWriter {
 public:
  JsonWriter& begin_object(std::string_view key = {}) { open(key, '{'); return *this; }
  JsonWriter& end_object() { close('}'); return *this; }
  JsonWriter& begin_array(std::string_view key = {}) { open(key, '['); return *this; }
  JsonWriter& end_array() { close(']'); return *this; }
  JsonWriter& value(std::string_view key, std::string_view s) { prefix(key); quote(s); return *this; }
  JsonWriter& value(std::string_view key, const char* s) { return value(key, std::string_view(s)); }
  JsonWriter& value(std::string_view key, const std::string& s) { return value(key, std::string_view(s)); }
  JsonWriter& value(std::string_view key, bool b) { prefix(key); out_ += b ? "true" : "false"; return *this; }
  JsonWriter& value(std::string_view key, double d) {
    prefix(key);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", d);
    out_ += buf;
    return *this;
  }
  JsonWriter& value(std::string_view key, uint64_t u) { prefix(key); out_ += std::to_string(u); return *this; }
  JsonWriter& value(std::string_view key, uint32_t u) { return value(key, uint64_t(u)); }
  JsonWriter& value(std::string_view key, int i) { prefix(key); out_ += std::to_string(i); return *this; }
  const std::string& str() const { return out_; }

 private:
  void prefix(std::string_view key) {
    if (!first_.empty()) {
      if (!first_.back()) out_ += ",";
      first_.back() = false;
      out_ += "\n" + std::string(2 * first_.size(), ' ');
    }
    if (!key.empty()) { quote(key); out_ += ": "; }
  }
  void open(std::string_view key, char c) { prefix(key); out_ += c; first_.push_back(true); }
  void close(char c) {
    bool empty = first_.back();
    first_.pop_back();
    if (!empty) out_ += "\n" + std::string(2 * first_.size(), ' ');
    out_ += c;
  }
  void quote(std::string_view s) {
    out_ += '"';
    for (char ch : s) {
      switch (ch) {
        case '"': out_ += "\\\""; break;
        case '\\': out_ += "\\\\"; break;
        case '\n': out_ += "\\n"; break;
        case '\t': out_ += "\\t"; break;
        default:
          if (static_cast<unsigned char>(ch) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", ch);
            out_ += buf;
          } else {
            out_ += ch;
          }
      }
    }
    out_ += '"';
  }
  std::string out_;
  std::vector<bool> first_;
};

}  // namespace vkattn::detail
