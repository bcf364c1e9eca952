#!/usr/bin/env bash
# Builds of the `vkattn` tool side by side on one device, in one call: the
# driver's figures for the prefill kernel's modules in every build (f16, bf16
# and fp8 caches for paged attention; f16 prefix prefill; f16 and bf16
# block-sparse attention; f16 and bf16 prefix prefill),
# then rounds of bench suites, the builds in turn within each round.
#
# Why: a change to a kernel near 255 registers moves the register allocation
# of every module built from it, and the modules a change was not measured on
# (bf16, fp8) are where it shows (DEVELOPERS.md, "Q's 16-byte loads in
# groups"); and figures from two calls may come from two machines, so only
# builds timed in the same call compare. Everything is printed as it comes:
# a call that runs out of time returns what it printed.
#
#   tools/compare_builds.sh BUILD...      (a BUILD is a folder holding `vkattn`, or the binary)
#
# A BUILD's `vkattn` may be a script that sets an environment variable and
# execs a binary kept elsewhere: host-side throwaways read from the
# environment (a forced tile, say) then compare within one binary. The
# folder's name labels its lines.
#
# Environment (defaults in brackets):
#   ROUNDS   rounds of the suites [1]
#   SUITES   space-separated SUITE[:CACHE_DTYPE] entries; "bf16" as the cache
#            dtype means bf16 q and cache, "bf16+fp8_e4m3" bf16 q over that
#            cache (prefill and decode; sparse is f16 only)
#            [prefill prefill:bf16 prefill:fp8_e4m3 sparse]
#   PREFILL_FILTER, SPARSE_FILTER, DECODE_FILTER   the cases of each suite
#            [causal 8k, B=4 ctx=4096 q=512 and prefix prefill's B=4 ctx=4096
#            q=512 (the same kernel in another specialization: a change timed
#            on the paged cases only once cost it 2.2x unseen); causal, 8
#            documents, dense; every case]
#   STATS    0 to leave the driver's figures out [1]; each module's take a
#            fresh compile of its pipelines, several seconds per build and
#            module on the GPU machine: narrow them with STATS_FILTER
#   STATS_FILTER  the modules whose figures to print, a regex over their
#            labels ("paged f16", "paged bf16", "paged f16 q, fp8_e4m3 cache",
#            "prefix prefill f16", "prefix prefill bf16", "block-sparse f16", "block-sparse bf16",
#            "block-sparse documents f16") [every one]
#   BENCH_FLAGS  more flags for every bench run, e.g. "--quick" on a CPU device
#            [--repeat 10 --min-time 0.02]
#   PIPELINE_CACHES  a folder: each build's bench runs keep their compiled
#            pipelines in NAME.bin there (VKATTN_PIPELINE_CACHE), so that
#            only a build's first run compiles them; carried between calls
#            (copied to $OUT and back) it saves the next call's compiles too
#            [none: every run compiles]
set -uo pipefail
(($# >= 1)) || { sed -n '2,/^set /p' "$0" | sed '$d'; exit 2; }
rounds=${ROUNDS:-1}
suites=${SUITES:-"prefill prefill:bf16 prefill:fp8_e4m3 sparse"}
prefill_filter=${PREFILL_FILTER:-'^B=1 q=8192 causal d128|^(prefix_prefill )?B=4 ctx=4096 q=512 d128'}
sparse_filter=${SPARSE_FILTER:-'^(causal|8 documents|dense) S'}
decode_filter=${DECODE_FILTER:-'.'}
bench_flags=${BENCH_FLAGS:-"--repeat 10 --min-time 0.02"}

bins=() names=() failed=0
for b in "$@"; do
  bin=$b
  [[ -d $b ]] && bin=$b/vkattn
  [[ -x $bin ]] || { echo "compare_builds: no vkattn tool at $b" >&2; exit 2; }
  bins+=("$bin")
  names+=("$(basename "$(dirname "$bin")")")
done

# One line per module: registers, local memory over the driver's 2^36
# baseline (spills), shared memory as the driver counts it.
stats() {
  local name=$1 bin=$2 what=$3
  shift 3
  [[ $what =~ ${STATS_FILTER:-.} ]] || return 0
  local cache out   # a fresh cache file, so that every pipeline is compiled (and its figures printed)
  cache=$(mktemp -d)
  out=$(VKATTN_PIPELINE_STATS=1 VKATTN_PIPELINE_CACHE=$cache/pipelines.bin "$bin" run "$@" --repeat 1 2>&1)
  # A run that failed, or a device without the figures, says so rather than printing nothing.
  grep -qE 'pipeline stats (paged_prefill|block_sparse)' <<< "$out" ||
    printf '%-12s %-28s no figures: %s\n' "$name" "$what" "$(tail -n 1 <<< "$out")"
  grep -E 'pipeline stats (paged_prefill|block_sparse)' <<< "$out" |
    awk -v name="$name" -v what="$what" '{
      regs = ""; local = ""; shared = ""
      for (i = 1; i <= NF; ++i) {
        if ($i ~ /^Count=/) regs = substr($i, 7)
        if ($i ~ /^Size=/ && $(i - 1) == "Memory" && $(i - 2) == "Local") local = substr($i, 6) - 68719476736
        if ($i ~ /^Size=/ && $(i - 1) == "Memory" && $(i - 2) == "Shared") shared = substr($i, 6)
      }
      printf "%-12s %-28s %-34s registers %s, local memory %s B, shared %s B\n", name, what, $3 " " $4, regs, local, shared
    }'
  rm -rf "$cache"
}

if [[ ${STATS:-1} != 0 ]]; then
  echo "== the driver's figures"
  # Each module's figures cost a fresh compile of its pipelines (seconds
  # each): a build listed twice (A B A, to see drift) is read once.
  declare -A read_once=()
  for i in "${!bins[@]}"; do
    n=${names[$i]} b=${bins[$i]}
    key=$(realpath "$b")
    [[ -z ${read_once[$key]:-} ]] || { echo "${n}: as above"; continue; }
    read_once[$key]=1
    stats "$n" "$b" "paged f16" paged-attention --seqs 300:300 --prefill-kernel on
    stats "$n" "$b" "paged bf16" paged-attention --seqs 300:300 --prefill-kernel on --dtype bf16 --cache-dtype bf16
    stats "$n" "$b" "paged f16 q, fp8_e4m3 cache" paged-attention --seqs 300:300 --prefill-kernel on --cache-dtype fp8_e4m3
    stats "$n" "$b" "prefix prefill f16" prefix-prefill --seqs 300:600 --prefill-kernel on
    stats "$n" "$b" "prefix prefill bf16" prefix-prefill --seqs 300:600 --prefill-kernel on --dtype bf16 --cache-dtype bf16
    stats "$n" "$b" "block-sparse f16" block-sparse --head-size 128 --q-len 512 --kv-len 512 --q-block 128 --kv-block 128 --mask causal
    stats "$n" "$b" "block-sparse bf16" block-sparse --head-size 128 --q-len 512 --kv-len 512 --q-block 128 --kv-block 128 --mask causal --dtype bf16
    stats "$n" "$b" "block-sparse documents f16" block-sparse --head-size 128 --q-len 512 --kv-len 512 --q-block 128 --kv-block 128 --mask causal,document:4
  done
fi

for ((r = 1; r <= rounds; ++r)); do
  for s in $suites; do
    suite=${s%%:*} dtype=
    [[ $s == *:* ]] && dtype=${s#*:}
    flags=()
    case $dtype in
      "") ;;
      bf16) flags=(--dtype bf16 --cache-dtype bf16) ;;
      bf16+*) flags=(--dtype bf16 --cache-dtype "${dtype#bf16+}") ;;   # bf16 q over another cache
      *) flags=(--cache-dtype "$dtype") ;;
    esac
    case $suite in
      prefill) filter=$prefill_filter ;;
      sparse) filter=$sparse_filter ;;
      decode) filter=$decode_filter ;;
      *) filter=. ;;
    esac
    for i in "${!bins[@]}"; do
      echo "== round $r, $s, ${names[$i]}"
      # shellcheck disable=SC2086  # bench_flags is a list of flags
      # (--line-buffered: what a run printed survives a timeout that kills it.)
      cache_env=()
      [[ -n ${PIPELINE_CACHES:-} ]] && mkdir -p "$PIPELINE_CACHES" &&
        cache_env=("VKATTN_PIPELINE_CACHE=$PIPELINE_CACHES/${names[$i]}.bin")
      env "${cache_env[@]}" "${bins[$i]}" bench "$suite" $bench_flags "${flags[@]}" --filter "$filter" 2>&1 |
        grep --line-buffered -E '^ceilings| (yes|no) \(|rror|^vkattn' | sed -u "s/^/${names[$i]}: /"
      rc=${PIPESTATUS[0]}
      ((rc == 0)) || { echo "${names[$i]}: bench $suite exited $rc"; failed=1; }
    done
  done
done
exit $failed
