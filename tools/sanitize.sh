#!/usr/bin/env bash
# The sanitizer stage: builds the library, the reference and the tests with
# AddressSanitizer + UndefinedBehaviorSanitizer (-DVKATTN_SANITIZE=ON) in
# build-sanitize/, then runs the tests that stage selects (tests/sanitize_tests.cmake
# says which, and sets the sanitizers' options). .ci/run runs it after the normal
# tests; run it after tools/setup.sh. Arguments are passed to CMake's configure
# step (e.g. -DVKATTN_SDK_INCLUDE_DIR=... where .deps/ is not in this checkout).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${VKATTN_SANITIZE_BUILD_DIR:-$repo/build-sanitize}"
say() { printf '\033[1m[sanitize]\033[0m %s\n' "$*" >&2; }

gen=()
[ -f "$build/CMakeCache.txt" ] || gen=(-G Ninja)
cmake -S "$repo" -B "$build" "${gen[@]}" -DVKATTN_SANITIZE=ON "$@" >/dev/null
# Only the test binary: the stage runs nothing else, so the tool is not built.
say "building the tests with ASan + UBSan in $build"
cmake --build "$build" -j"$(nproc)" --target vkattn_tests
say "running the sanitizer stage's tests"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)"
