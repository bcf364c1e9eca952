#!/usr/bin/env bash
# The whole test suite on each kernel path, each path's tests split into
# googletest shards that run side by side (most of the suite's time there is
# the driver compiling pipelines, which the machine's cores then share).
# Prints one summary line per path and any failure; a shard that crashed is
# named with the test it died in, and the tests it did not reach run again
# (rerun_rest). vkattn_record_allocation_tests, where it lies beside the
# binary, runs on each path too. Exits non-zero if a test failed or a shard
# did not finish. Used on the GPU machine (DEVELOPERS.md, "The GPU
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
  # The test programs of their own beside the binary (one replaces operator
  # new), whole, counted in the path's summary; not with a FILTER. Beside
  # the shards, not after them: on the H200 they take about 150 s a matrix
  # path, which after the shards took the suite past a 600 s call.
  local extra=$(dirname "$bin")/vkattn_record_allocation_tests
  [ "$filter" = '*' ] && [ -x "$extra" ] && VKATTN_PATH=$p "$extra" > "$out/$p.extra.txt" 2>&1 &
  for ((i = 0; i < shards; ++i)); do
    VKATTN_PATH=$p GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$bin" --gtest_filter="$filter" \
      > "$out/$p.$i.txt" 2>&1 &
  done
  wait
  for ((i = 0; i < shards; ++i)); do
    f="$out/$p.$i.txt"
    grep -q 'tests* from .* ran' "$f" && continue
    echo "UNFINISHED shard $i of $p, in: $(grep '^\[ RUN      \]' "$f" | tail -n 1 | cut -c 14-)" >> "$f"
    rerun_rest "$p" "$i" "$f"
  done
  cat "$out/$p".*.txt > "$out/$p.txt" && rm -f "$out/$p".*.txt
  return 0
}
# A shard that died leaves every test after the one it died in unrun; they
# run once more, in one process, so that a crash costs its own test rather
# than a shard's (googletest gives a shard the filtered tests whose index
# modulo the shard count is the shard's). Their results count in the path's
# summary; the dead shard is still reported, and still fails the run.
rerun_rest() {
  local p=$1 i=$2 f=$3 rest
  rest=$("$bin" --gtest_filter="$filter" --gtest_list_tests 2> /dev/null |
    awk -v s="$shards" -v i="$i" '/^[^ ]/ {suite = $1} /^  / {if (n++ % s == i) print suite $1}' |
    grep -vxF -f <(grep '^\[ RUN      \]' "$f" | cut -c 14-) | paste -sd: -)
  [ -n "$rest" ] || return 0
  echo "RERUN of shard $i of $p: the $(tr ':' '\n' <<< "$rest" | wc -l) tests after the one it died in" >> "$f"
  VKATTN_PATH=$p "$bin" --gtest_filter="$rest" > "$out/$p.$i.rerun.txt" 2>&1
  grep -q 'tests* from .* ran' "$out/$p.$i.rerun.txt" ||
    echo "UNFINISHED rerun of shard $i of $p, in: $(grep '^\[ RUN      \]' "$out/$p.$i.rerun.txt" | tail -n 1 | cut -c 14-)" >> "$out/$p.$i.rerun.txt"
}
for p in $paths; do run_path "$p" & done
wait
status=0
for p in $paths; do
  f="$out/$p.txt"
  # Counted from each test's own lines, not the shards' summaries, so that a
  # shard that died counts what it ran, and the test it died in as failed.
  ran=$(grep -c '^\[ RUN      \]' "$f") passed=$(grep -c '^\[       OK \]' "$f")
  skipped=$(grep -c '^\[  SKIPPED \] .* ms)$' "$f")
  failed=$((ran - passed - skipped))
  echo "$p: $ran ran, $passed passed, $skipped skipped, $failed failed ($f)"
  unfinished=$(( $(grep -c 'Running main' "$f") - $(grep -c 'tests* from .* ran' "$f") ))
  [ "$unfinished" != 0 ] && echo "$p: $unfinished shard runs did not finish (a crash or a hang: see $f)" && grep -h '^UNFINISHED\|^RERUN' "$f"
  if [ "$failed" != 0 ] || [ "$ran" = 0 ] || [ "$unfinished" != 0 ]; then
    status=1
    grep -h '^\[  FAILED  \] [A-Za-z]' "$f" | sort -u
  fi
done
exit $status
