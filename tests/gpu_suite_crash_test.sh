#!/usr/bin/env bash
# ctest: tools/gpu_suite.sh with a stand-in for the test binary that lists
# four tests, of which shard 0 of 2 runs two and shard 1 dies in its first,
# Fake.DiesHere, before Fake.AfterDeath. The script must name the test the
# dead shard was in, count that test as failed, run the test it did not
# reach (and only that one) again, count it, and exit non-zero.
set -u
suite=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/fake_tests" <<'FAKE'
#!/usr/bin/env bash
tests=(Passes DiesHere Other AfterDeath)
filter='*'
for a in "$@"; do
  case $a in
    --gtest_list_tests) echo "Fake."; printf '  %s\n' "${tests[@]}"; exit 0 ;;
    --gtest_filter=*) filter=${a#--gtest_filter=} ;;
  esac
done
echo "Running main() from gtest_main.cc"
n=0
for ((k = 0; k < ${#tests[@]}; ++k)); do
  t=${tests[$k]}
  if [ -n "${GTEST_SHARD_INDEX:-}" ]; then
    ((k % GTEST_TOTAL_SHARDS == GTEST_SHARD_INDEX)) || continue
  elif [ "$filter" != '*' ]; then
    [[ ":$filter:" == *":Fake.$t:"* ]] || continue
  fi
  echo "[ RUN      ] Fake.$t"
  [ "$t" = DiesHere ] && kill -SEGV $$
  echo "[       OK ] Fake.$t (1 ms)"
  n=$((n + 1))
done
echo "[==========] $n tests from 1 test suite ran. (1 ms total)"
echo "[  PASSED  ] $n tests."
FAKE
chmod +x "$dir/fake_tests"
out=$(PATHS=scalar SHARDS=2 bash "$suite" "$dir/fake_tests" "$dir/out" 2>/dev/null)
rc=$?
echo "$out"
[ "$rc" != 0 ] || { echo "FAIL: exit status 0 with a dead shard"; exit 1; }
grep -q "scalar: 4 ran, 3 passed, 0 skipped, 1 failed" <<<"$out" ||
  { echo "FAIL: not counted as shard 0's two tests, the one the dead shard died in (failed) and the rerun's one"; exit 1; }
grep -q "UNFINISHED shard 1 of scalar, in: Fake.DiesHere" <<<"$out" || { echo "FAIL: the dead shard's test is not named"; exit 1; }
grep -q "RERUN of shard 1 of scalar: the 1 tests after" <<<"$out" || { echo "FAIL: the tests after the dead one were not run again"; exit 1; }
[ "$(grep -c '^\[       OK \] Fake.AfterDeath' "$dir/out/scalar.txt")" = 1 ] || { echo "FAIL: the rerun did not run Fake.AfterDeath"; exit 1; }
[ "$(grep -c '^\[ RUN      \] Fake.DiesHere' "$dir/out/scalar.txt")" = 1 ] || { echo "FAIL: the test the shard died in ran again"; exit 1; }
echo PASS
