# The environment of the test binary's ctest cases (tests/CMakeLists.txt and
# the sanitizer stage's tests/sanitize_tests.cmake use the same, because Mesa
# hashes these settings into its on-disk shader cache's key).
#
# GALLIVM_PERF=nopt: lavapipe (CI's device) compiles every pipeline at its
# first dispatch through LLVM, and at the tests' small shapes that compile is
# most of a test's time. Without LLVM's optimisation passes the compile takes
# a quarter to two fifths less (DEVELOPERS.md, "lavapipe"); the code runs the
# same SPIR-V, only slower, which these shapes mostly do not notice (the
# tool's `bench prefill --quick` tests take about 10% longer). Other drivers
# ignore the variable. A test binary or the tool run by hand keeps the
# optimised compiler.
set(VKATTN_LAVAPIPE_TEST_ENV "GALLIVM_PERF=nopt")
