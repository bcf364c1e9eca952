#!/usr/bin/env bash
# The whole test suite on each kernel path, each path's tests split into
# googletest shards that run side by side (most of the suite's time there is
# the driver compiling pipelines, which the machine's cores then share).
# Prints one summary line per path and any failure; exits
# non-zero if a test failed. Used on the GPU machine (DEVELOPERS.md, "The GPU
# machine"); runs anywhere a device is.
#
#   tools/gpu_suite.sh [TESTS_BINARY] [OUT_DIR]     (env PATHS, SHARDS, FILTER)
set -uo pipefail
bin=${1:-build/tests/vkattn_tests}
out=${2:-${OUT:-/tmp}/gpu_suite}
paths=${PATHS:-"coopmat2 coopmat scalar"}
shards=${SHARDS:-5}
filter=${FILTER:-*}
mkdir -p "$out"
# Full googletest output (not --gtest_brief), so that a shard that crashes or
# hangs names the test it was in: its last "[ RUN      ]" line.
run_path() {
  local p=$1 i f
  for ((i = 0; i < shards; ++i)); do
    VKATTN_PATH=$p GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$bin" --gtest_filter="$filter" \
      > "$out/$p.$i.txt" 2>&1 &
  done
  wait
  for ((i = 0; i < shards; ++i)); do
    f="$out/$p.$i.txt"
    grep -q 'tests* from .* ran' "$f" ||
      echo "UNFINISHED shard $i of $p, in: $(grep '^\[ RUN      \]' "$f" | tail -n 1 | cut -c 14-)" >> "$f"
  done
  cat "$out/$p".*.txt > "$out/$p.txt" && rm -f "$out/$p".*.txt
}
for p in $paths; do run_path "$p" & done
wait
status=0
for p in $paths; do
  f="$out/$p.txt"
  sum() { grep -h "$1" "$f" | awk -v n="$2" '{s += $n} END {print s + 0}'; }
  ran=$(sum 'tests* from .* ran' 2) passed=$(sum '^\[  PASSED' 4) skipped=$(sum '^\[  SKIPPED *\] [0-9]' 4)
  # (what ran and did not pass or skip failed: a crashed shard prints no summary of its failures)
  failed=$((ran - passed - skipped))
  echo "$p: $ran ran, $passed passed, $skipped skipped, $failed failed ($f)"
  unfinished=$(( $(grep -c 'Running main' "$f") - $(grep -c 'tests* from .* ran' "$f") ))
  [ "$unfinished" != 0 ] && echo "$p: $unfinished shards did not finish (a crash or a hang: see $f)" && grep -h '^UNFINISHED' "$f"
  if [ "$failed" != 0 ] || [ "$ran" = 0 ] || [ "$unfinished" != 0 ]; then
    status=1
    grep -h '^\[  FAILED  \] [A-Za-z]' "$f" | sort -u
  fi
done
exit $status
