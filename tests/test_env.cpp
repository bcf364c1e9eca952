#include "test_env.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace vkattn::test {
namespace {

// Every variable a test changes (test_env.hpp says why the list is fixed).
constexpr const char* kNames[] = {"VKATTN_PATH",           "VKATTN_DEVICE",            "VKATTN_VALIDATION",
                                  "VKATTN_PIPELINE_CACHE", "VKATTN_BENCH_TIMING_ONLY", "VKATTN_PIPELINE_STATS"};

bool listed(const char* name) {
  for (const char* n : kNames)
    if (std::strcmp(n, name) == 0) return true;
  return false;
}

// Before main and before any other static initializer of the binary (the
// first user priority), so before any thread: the names absent get an empty
// value, so that later changes never add one.
__attribute__((constructor(101))) void reserve_test_env() {
  for (const char* n : kNames) setenv(n, "", 0);
}

}  // namespace

void set_test_env(const char* name, const char* value) {
  if (!listed(name) || !std::getenv(name)) {
    std::fprintf(stderr, "set_test_env: %s is not in tests/test_env.cpp's list of names; add it there\n", name);
    std::abort();
  }
  setenv(name, value, 1);
}

ScopedUnsetEnv::ScopedUnsetEnv(const char* name) : name_(name) {
  if (const char* v = std::getenv(name)) value_ = v;
  clear_test_env(name);
}
ScopedUnsetEnv::~ScopedUnsetEnv() { set_test_env(name_, value_.c_str()); }

}  // namespace vkattn::test
