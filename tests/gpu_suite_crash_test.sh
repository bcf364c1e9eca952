#!/usr/bin/env bash
# ctest: tools/gpu_suite.sh with a stand-in for the test binary whose second
# shard dies in a named test and whose first runs a single test. The script
# must count the single test, exit non-zero and name the test the dead shard
# was in.
set -u
suite=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/fake_tests" <<'FAKE'
#!/usr/bin/env bash
echo "Running main() from gtest_main.cc"
if [ "$GTEST_SHARD_INDEX" = 1 ]; then echo "[ RUN      ] Fake.DiesHere"; kill -SEGV $$; fi
echo "[ RUN      ] Fake.Passes"
echo "[       OK ] Fake.Passes (1 ms)"
echo "[==========] 1 test from 1 test suite ran. (1 ms total)"
echo "[  PASSED  ] 1 test."
FAKE
chmod +x "$dir/fake_tests"
out=$(PATHS=scalar SHARDS=2 bash "$suite" "$dir/fake_tests" "$dir/out" 2>/dev/null)
rc=$?
echo "$out"
[ "$rc" != 0 ] || { echo "FAIL: exit status 0 with a dead shard"; exit 1; }
grep -q "scalar: 1 ran, 1 passed, 0 skipped, 0 failed" <<<"$out" || { echo "FAIL: the single test was not counted"; exit 1; }
grep -q "UNFINISHED shard 1 of scalar, in: Fake.DiesHere" <<<"$out" || { echo "FAIL: the dead shard's test is not named"; exit 1; }
echo PASS
