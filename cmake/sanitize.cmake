# VKATTN_SANITIZE=ON builds every target (library, reference, the tool's pieces,
# tests) with AddressSanitizer and UndefinedBehaviorSanitizer. It is meant for a
# build folder of its own (tools/sanitize.sh uses build-sanitize/); a normal
# build never sees these flags.
#
# -fno-sanitize-recover=undefined: a UBSan finding aborts the test instead of
# printing a line and going on. -O1 (after the build type's own -O, so it wins):
# the instrumented build compiles faster and its stack traces keep more frames
# than at -O3; -g1 adds line tables for those traces and little else.
option(VKATTN_SANITIZE "Build with -fsanitize=address,undefined (tools/sanitize.sh)" OFF)
if(VKATTN_SANITIZE)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    message(FATAL_ERROR "VKATTN_SANITIZE needs GCC or Clang (found ${CMAKE_CXX_COMPILER_ID})")
  endif()
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -O1 -g1)
  add_link_options(-fsanitize=address,undefined)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # The instrumentation misleads GCC's flow analysis into "may be used
    # uninitialized" in libstdc++'s <regex>; the normal build keeps the warning.
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
endif()
