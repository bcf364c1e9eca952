# The sanitizer stage's tests (VKATTN_SANITIZE=ON; tools/sanitize.sh, which
# .ci/run runs after the normal tests).
#
# Which tests: every test whose gtest name has no '/', i.e. every plain TEST and
# TEST_F, host-side and device-side alike; value-parameterised sweeps
# (Prefix/Suite.Test/param: the shape and dtype combinations) run in the normal
# stage only. A new plain test joins this stage by itself; a long sweep stays
# out of it as long as it is parameterised.
#
# Time: the tests are as quick as in the normal build once Mesa's on-disk shader
# cache holds their pipelines, which the normal stage has just compiled. Cold,
# lavapipe's LLVM compiles several times slower under ASan's allocator.
target_sources(vkattn_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/sanitizer_options.cpp)
target_compile_definitions(vkattn_tests PRIVATE
  VKATTN_LSAN_SUPPRESSIONS="${CMAKE_CURRENT_SOURCE_DIR}/lsan_suppressions.txt")
# The same lavapipe settings as the normal stage: they are part of Mesa's
# shader-cache key, so only then does this stage find the pipelines it compiled.
include(${PROJECT_SOURCE_DIR}/cmake/lavapipe_test_env.cmake)
gtest_discover_tests(vkattn_tests DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
  TEST_FILTER "-*/*"
  PROPERTIES TIMEOUT 300 LABELS sanitize ENVIRONMENT "${VKATTN_LAVAPIPE_TEST_ENV}")
