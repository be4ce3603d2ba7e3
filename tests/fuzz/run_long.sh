#!/usr/bin/env bash
# run_long.sh — long libFuzzer runs of carve's fuzz targets, with the figures
# worth recording: executions, coverage, API operations, crashes.
#
# The one idea: each run keeps its corpus in the build directory
# (BUILD/fuzz-long/<target>/corpus, seeded once from tests/fuzz/corpus), so
# runs add up: a second run starts where the first stopped, and the numbers
# of every run are appended to BUILD/fuzz-long/runs.tsv.
#
# Usage: tests/fuzz/run_long.sh [--build DIR] [--seconds S | --runs N]
#                               [--targets "config trace api"] [--jobs J]
#   --build DIR   build directory with -Dfuzzing=true (default build-fuzz); set up
#                 and built with clang when it holds no libFuzzer binaries yet
#   --seconds S   libFuzzer -max_total_time per job (default 600)
#   --runs N      libFuzzer -runs per job instead of a time
#   --targets T   which targets, in order (default "config trace api")
#   --jobs J      independent libFuzzer processes per target, different seeds,
#                 one shared corpus (default 1)
# Exit status: 0 when no job found a crash, 1 otherwise (artifacts listed).
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

build=build-fuzz; seconds=600; runs=""; targets="config trace api"; jobs=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_long.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done

if [ ! -x "$build/tests/fuzz/libfuzzer_api" ]; then
  [ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH
  if [ ! -f "$build/build.ninja" ]; then
    echo "setting up $build (clang, libFuzzer, ASan+UBSan)"
    CC=clang CXX=clang++ meson setup "$build" --buildtype=debugoptimized -Dfuzzing=true \
      -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled -Dbenchmarks=false \
      >"$build.setup.log" 2>&1 || { cat "$build.setup.log"; exit 2; }
  fi
  ninja -C "$build" tests/fuzz/libfuzzer_config tests/fuzz/libfuzzer_trace tests/fuzz/libfuzzer_api \
    >"$build.fuzz-build.log" 2>&1 || { tail -40 "$build.fuzz-build.log"; exit 2; }
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-protect_shadow_gap=0:detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
base="$root/$build/fuzz-long"
mkdir -p "$base"
[ -f "$base/runs.tsv" ] || printf 'date\ttarget\tjobs\tlimit\twall_s\texecutions\texec_per_s\tcov\tft\tcorpus\tapi_ops\tapi_calls\tcrashes\n' >"$base/runs.tsv"
limit=${runs:+runs=$runs}; limit=${limit:-seconds=$seconds}
failed=0

printf '\n%-8s %4s %8s %12s %9s %6s %7s %7s %14s %8s\n' target jobs wall_s executions exec/s cov ft corpus api_ops crashes
for t in $targets; do
  bin="$root/$build/tests/fuzz/libfuzzer_$t"
  work="$base/$t"
  mkdir -p "$work/corpus" "$work/artifacts" "$work/logs"
  [ -n "$(ls -A "$work/corpus")" ] || cp "$root/tests/fuzz/corpus/$t"/* "$work/corpus/"
  flags=(-timeout=25 -print_final_stats=1 -artifact_prefix="$work/artifacts/")
  case $t in
    config) flags+=(-dict="$root/tests/fuzz/config.dict" -max_len=4096) ;;
    trace) flags+=(-dict="$root/tests/fuzz/trace.dict" -max_len=16384) ;;
    api) flags+=(-max_len=4096 -len_control=0 -entropic=0) ;;  # long programs; see README.md
  esac
  if [ -n "$runs" ]; then flags+=(-runs="$runs"); else flags+=(-max_total_time="$seconds"); fi
  before=$(ls "$work/artifacts" | wc -l)
  stamp=$(date +%Y%m%d-%H%M%S)
  runno=$(wc -l <"$base/runs.tsv")   # seeds follow the run count: deterministic, different per run
  start=$(date +%s)
  pids=()
  for j in $(seq 1 "$jobs"); do
    CARVE_FUZZ_COUNT=1 "$bin" "${flags[@]}" -seed="$((runno * 100 + j))" "$work/corpus" \
      >"$work/logs/$stamp-$j.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  wall=$(( $(date +%s) - start ))
  execs=0; ops=0; calls=0; cov=0; ft=0
  for j in $(seq 1 "$jobs"); do
    log="$work/logs/$stamp-$j.log"
    e=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -1)
    execs=$((execs + ${e:-0}))
    o=$(sed -n 's/^fuzz_api: .* \([0-9]*\) API operations, \([0-9]*\) API calls.*/\1 \2/p' "$log" | tail -1)
    if [ -n "$o" ]; then ops=$((ops + ${o% *})); calls=$((calls + ${o#* })); fi
    line=$(grep -E '^#[0-9]+[[:space:]].*cov: ' "$log" | tail -1)
    c=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$line"); f=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$line")
    [ "${c:-0}" -gt "$cov" ] && cov=$c
    [ "${f:-0}" -gt "$ft" ] && ft=$f
  done
  corpus=$(ls "$work/corpus" | wc -l)
  crashes=$(( $(ls "$work/artifacts" | wc -l) - before ))
  rate=$(( wall > 0 ? execs / wall : execs ))
  printf '%-8s %4s %8s %12s %9s %6s %7s %7s %14s %8s\n' "$t" "$jobs" "$wall" "$execs" "$rate" "$cov" "$ft" \
    "$corpus" "$([ "$t" = api ] && echo "$ops" || echo -)" "$crashes"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$stamp" "$t" "$jobs" "$limit" "$wall" "$execs" \
    "$rate" "$cov" "$ft" "$corpus" "$ops" "$calls" "$crashes" >>"$base/runs.tsv"
  if [ "$crashes" -gt 0 ]; then
    failed=1
    ls -t "$work/artifacts" | head -n "$crashes" | sed "s|^|  artifact: $work/artifacts/|"
    grep -h -m1 -E 'invariant violated|ERROR: AddressSanitizer|runtime error|ERROR: libFuzzer' "$work"/logs/"$stamp"-*.log \
      | sed 's/^/  /'
  fi
done
echo
echo "all runs so far: $base/runs.tsv"
awk -F'\t' 'NR > 1 { e[$2] += $6; o[$2] += $11; w[$2] += $5; c[$2] += $13 }
  END { for (t in e) printf "  %-7s executions %d, wall %d s, crashes %d%s\n", t, e[t], w[t], c[t],
        (t == "api" ? sprintf(", API operations %d", o[t]) : "") }' "$base/runs.tsv"
exit $failed
