// The sanitizers' options for the sanitizer stage's test binary (linked in only
// when VKATTN_SANITIZE is on), compiled in so that they hold however the binary
// runs: under ctest, by hand, or under a debugger. ASAN_OPTIONS, UBSAN_OPTIONS
// and LSAN_OPTIONS in the environment still add to or override them.
//
// The runtimes call these hooks before main, before they are initialised: the
// functions must not be instrumented.
#define VKATTN_NO_SANITIZE extern "C" __attribute__((visibility("default"), used, no_sanitize("address", "undefined")))

// Leaks are checked at exit (the default, stated); static initialisers may not
// use objects of other files that are not yet constructed.
VKATTN_NO_SANITIZE const char* __asan_default_options() {
  return "detect_leaks=1:check_initialization_order=1:strict_init_order=1";
}

// Every UBSan finding aborts with a stack trace (the build already makes them
// unrecoverable: -fno-sanitize-recover=undefined).
VKATTN_NO_SANITIZE const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }

// tests/lsan_suppressions.txt says which leaks are not the library's.
VKATTN_NO_SANITIZE const char* __lsan_default_options() { return "suppressions=" VKATTN_LSAN_SUPPRESSIONS; }
