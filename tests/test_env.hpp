// Environment variables in the tests, changed without a data race.
//
// setenv and unsetenv are not safe while another thread reads the
// environment (glibc: MT-Unsafe const:env): adding a name may reallocate and
// free the array another thread's getenv is walking, and the GPU driver's
// threads run beside every test. (A coopmat2 shard of the GPU suite died of a
// segmentation fault inside a test that unset VKATTN_PATH and set it again;
// DEVELOPERS.md, "Things that fail only on the GPU".) So no test adds or
// removes a variable: every name a test changes is put in the environment
// before main (empty where it was absent, test_env.cpp), a test "unsets" one
// by making it empty, which the library and the tool read as unset, and a
// new value replaces one pointer in the array, in place.
#pragma once
#include <string>

namespace vkattn::test {

// Sets a variable of test_env.cpp's list (any other name aborts the test binary).
void set_test_env(const char* name, const char* value);
// Makes it empty: unset, as vkattn reads it.
inline void clear_test_env(const char* name) { set_test_env(name, ""); }

// Clears a variable for a scope (tests that set options the environment would
// override, e.g. when the suite runs with VKATTN_PATH set); on leaving it,
// the variable is as before, also when the test set it.
class ScopedUnsetEnv {
 public:
  explicit ScopedUnsetEnv(const char* name);
  ~ScopedUnsetEnv();
  ScopedUnsetEnv(const ScopedUnsetEnv&) = delete;
  ScopedUnsetEnv& operator=(const ScopedUnsetEnv&) = delete;

 private:
  const char* name_;
  std::string value_;
};

}  // namespace vkattn::test
