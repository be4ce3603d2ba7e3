#!/usr/bin/env bash
# run.sh — the drop-in on a real GPU, every GPU check of issue 24 in one
# command: programs that know nothing of carve, run with and without
# carve-run, in carve-run's modes, and the drop-in benchmark.
#
#   1-2. app_runtime.cu built with nvcc's defaults (static cudart) and with
#        -cudart shared: streams, eight threads, a late writer racing a
#        cudaFree (on non-blocking streams; and, for ordered reuse, on
#        blocking and legacy streams, the address coming back at once, then
#        a non-blocking stream made after the reuse), the destroyed-stream sequence (a slow kernel on a stream
#        destroyed while it runs, cudaFree, same-size allocations meanwhile:
#        none overwritten, 100 rounds), foreign pointers, a captured graph,
#        fork, cudaMemGetInfo and cudaGetDeviceProperties under --limit, out
#        of memory past it;
#   3.   app_driver.c: the driver API in a context of its own;
#        each of 1-3 under carve-run in the default mode (virtual-memory
#        mode where the GPU supports it: granules mapped on use through the
#        driver's real entry points), segments mode (--mode segments:
#        cuMemAlloc segments) and fixed (--initial 2GiB --no-growth: one
#        segment); --mode vmm (that mode or none; on a GPU with virtual
#        memory management the default is the same) for the driver API
#        program, cudaMemGetInfo and out of memory;
#   4.   PyTorch, each workload run with its own caching allocator, with
#        expandable segments, and with its cache off
#        (PYTORCH_NO_CUDA_MEMORY_CACHING=1) under carve-run in the default
#        mode (compare_torch.py): GPT-2 small trained from its config, and
#        ResNet-50 inference with a batch size that changes every step;
#        the same losses / outputs as PyTorch's own allocator, step time
#        within 2% of it, reserved peak at most 1.05 times the requested
#        peak (carve-run's report), and the device memory the driver sees
#        the process hold at most expandable segments' (each run watched
#        by mem_watch.py; table in torch-compare.txt);
#        a trace of the training recorded through carve-run;
#   5.   CuPy: the same results; (6. JAX: under 8)
#   7.   compute-sanitizer memcheck under carve-run: program 1 (streams) in
#        the default mode and segments mode, and the destroyed-stream
#        sequence (MEMCHECK_ROUNDS rounds) in the default mode;
#   8.   the cap holds for every way a program takes memory, as the driver
#        sees the process (nvidia-smi, mem_watch.py, less the CUDA context
#        measured by a baseline run): PyTorch with expandable segments (PyTorch's
#        out-of-memory error, not a crash) and with
#        its caching allocator, JAX with its default preallocation (which
#        sizes itself to the cap) and with the platform allocator, each
#        under --limit 4GiB asking for 10 GiB; two programs on the GPU at
#        once, each held to its own --limit;
#   9.   injected failures (--fail-every): program 1 (static and shared
#        cudart) sees cudaErrorMemoryAllocation at every Nth call and keeps
#        nothing (memcheck clean too); a PyTorch training loop catches
#        torch.cuda.OutOfMemoryError, frees, and ends with the losses of a
#        run without failures;
#   and the benchmark: interposed allocation+free pairs against the driver's
#   (cudaMalloc+cudaFree and cudaMallocAsync+cudaFreeAsync through the static
#   cudart and through the shared one, whose functions carve-run's
#   interposer exports itself; cuMemAlloc+cuMemFree and cuMemAllocAsync+
#   cuMemFreeAsync through the driver API; beside them the runtime alone, in
#   front of a stand-in driver that does nothing), summed up in bench-pairs.txt,
#   with the aims of issue 24 beside them (static runtime at most 150 ns,
#   shared runtime and driver API at most 100 ns).
# The seconds each part took are in OUT_DIR/timings.txt (the whole aims at
# under 8 minutes on one H100).
#
# usage: tests/dropin/gpu/run.sh BUILD_DIR OUT_DIR
#   BUILD_DIR: a meson build of this tree (built up to date first), or a
#   directory to make a release build in.
#   MEMCHECK_TIMEOUT: seconds per memcheck run (default 300); MEMCHECK_ROUNDS:
#   rounds of the destroyed-stream sequence under memcheck (default 10);
#   DROPIN_GPU_ONLY=c: the C/CUDA programs, memcheck and the benchmark only
#   (no PyTorch, CuPy or JAX); DROPIN_GPU_ONLY=torch: part 4 only; DROPIN_GPU_BUILD_ONLY=1: build the programs
#   and stop (works without a GPU).
# Prints PASS/FAIL per check and a closing "N passed, N failed"; exits 1 on
# a failure, 77 when there is no GPU.
set -uo pipefail
BUILD=${1:?usage: run.sh BUILD_DIR OUT_DIR}
OUT=${2:?usage: run.sh BUILD_DIR OUT_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT/bin"
export PATH=/usr/local/cuda/bin:$PATH
RUN=$BUILD/tools/carve-run
REPLAY=$BUILD/tools/carve-replay
# The build: made here where BUILD_DIR is not a build yet (a release build
# of the source tree this script is in), and brought up to date either way.
if [ ! -f "$BUILD/build.ninja" ] && [ ! -x "$RUN" ]; then
  meson setup "$BUILD" "$HERE/../../.." --buildtype=release -Dbenchmarks=false >"$OUT/setup.log" 2>&1 ||
    { echo "run.sh: meson setup $BUILD failed"; tail -20 "$OUT/setup.log"; exit 2; }
fi
if [ -f "$BUILD/build.ninja" ]; then
  ninja -C "$BUILD" tools/carve-run tools/carve-replay lib/preload/libcarve_preload.so \
    tests/dropin/libdropin_floor.so >"$OUT/ninja.log" 2>&1 ||
    { echo "run.sh: building carve-run in $BUILD failed"; tail -20 "$OUT/ninja.log"; exit 2; }
fi
[ -x "$RUN" ] || { echo "run.sh: $RUN not built"; exit 2; }
[ "${DROPIN_GPU_BUILD_ONLY:-}" = 1 ] || nvidia-smi -L >/dev/null 2>&1 || { echo "SKIP: no CUDA device"; exit 77; }
# ---- build the programs ------------------------------------------------------
nvcc -O2 -o "$OUT/bin/app_static" "$HERE/app_runtime.cu" >"$OUT/build.log" 2>&1 &&
nvcc -O2 -cudart shared -o "$OUT/bin/app_shared" "$HERE/app_runtime.cu" >>"$OUT/build.log" 2>&1 &&
gcc -O2 -I/usr/local/cuda/include "$HERE/app_driver.c" -o "$OUT/bin/app_driver" -lcuda >>"$OUT/build.log" 2>&1 ||
  { echo "run.sh: building the test programs failed"; cat "$OUT/build.log"; exit 1; }

[ "${DROPIN_GPU_BUILD_ONLY:-}" = 1 ] && { echo "built: $(ls "$OUT/bin" | tr '\n' ' ')"; exit 0; }
passed=0; failed=0
# part NAME: the part before it ends (its seconds go to timings.txt).
T0=$SECONDS; PART=build; PART_T=$SECONDS; : >"$OUT/timings.txt"
part() { echo "$PART $((SECONDS - PART_T)) s" >>"$OUT/timings.txt"; PART=$1; PART_T=$SECONDS; }
say() { printf '%-5s %-40s %s\n' "$1" "$2" "$3"; }
pass() { passed=$((passed + 1)); say PASS "$1" "${2:-}"; }
info() { say INFO "$1" "${2:-}"; }  # a figure, neither passed nor failed
fail() { failed=$((failed + 1)); say FAIL "$1" "${2:-}"; }
# expect NAME LOG COMMAND...: the command exits 0 and prints an OK line.
expect() {
  local name=$1 log=$OUT/$2; shift 2
  if "$@" >"$log" 2>&1 && grep -q "^OK" "$log"; then pass "$name" "$(grep -m1 '^OK' "$log" | cut -c1-90)"
  else fail "$name" "see $log: $(grep -m1 -E 'FAIL|rror' "$log" | cut -c1-90)"; fi
}
json() { python3 -c "import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print($2)" "$1"; }

if [ "${DROPIN_GPU_ONLY:-}" != torch ]; then
# ---- 1-3: C/CUDA programs, in every mode -------------------------------------
part c-programs
MODES="default segments fixed"
mode_args() { case $1 in vmm) echo "--mode vmm";; segments) echo "--mode segments";; fixed) echo "--initial 2GiB --no-growth";; esac; }
served() { # NAME JSON: the report counts allocations served by carve
  local n
  n=$(json "$2" 'sum(x["allocs"] for x in d["devices"])' 2>/dev/null || echo 0)
  [ "${n:-0}" -gt 0 ] && pass "$1 served by carve" "$n allocations" || fail "$1 served by carve" "report: $n"
}
for kind in static shared; do
  app=$OUT/bin/app_$kind
  for mode in streams threads late ordered destroyed foreign capture fork; do
    expect "$kind/$mode plain" "$kind-$mode-plain.log" "$app" $mode
    for m in $MODES; do
      expect "$kind/$mode carve-run $m" "$kind-$mode-$m.log" "$RUN" $(mode_args $m) --report="$OUT/$kind-$mode-$m.json" -- "$app" $mode
      served "$kind/$mode $m" "$OUT/$kind-$mode-$m.json"
    done
  done
  # under carve-run nothing the slow kernel still wrote was handed out
  for m in $MODES; do
    grep -q "^OK destroyed .* 0 got its memory, 0 overwritten" "$OUT/$kind-destroyed-$m.log" &&
      pass "$kind/destroyed stream $m: nothing reused early" "$(grep -m1 '^OK' "$OUT/$kind-destroyed-$m.log" | cut -c1-90)" ||
      fail "$kind/destroyed stream $m: nothing reused early" "see $OUT/$kind-destroyed-$m.log"
  done
  # ordered reuse was exercised (the address back while its writer ran, on
  # blocking and legacy streams) and nothing was overwritten (the OK line)
  for m in $MODES; do
    grep -qE "^OK ordered .*blocking -> blocking: [1-9].*legacy -> blocking: [1-9].* 0 mismatched words" \
      "$OUT/$kind-ordered-$m.log" &&
      pass "$kind/ordered reuse $m: back while its writer ran" "$(grep -m1 '^OK' "$OUT/$kind-ordered-$m.log" | cut -c12-120)" ||
      fail "$kind/ordered reuse $m: back while its writer ran" "see $OUT/$kind-ordered-$m.log"
  done
  for m in default vmm; do
    "$RUN" $(mode_args $m) --limit 8GiB -- "$app" info >"$OUT/$kind-info-$m.log" 2>&1
    grep -q "total 8589934592 .*totalGlobalMem 8589934592" "$OUT/$kind-info-$m.log" &&
      pass "$kind/cudaMemGetInfo is the cap ($m)" "$(grep -m1 OK "$OUT/$kind-info-$m.log")" ||
      fail "$kind/cudaMemGetInfo is the cap ($m)" "$(head -3 "$OUT/$kind-info-$m.log")"
    "$RUN" $(mode_args $m) --limit 4GiB -- "$app" oom >"$OUT/$kind-oom-$m.log" 2>&1
    if grep -q "^OK oom .*cudaErrorMemoryAllocation" "$OUT/$kind-oom-$m.log" &&
       [ "$(grep -c 'out of memory on device 0' "$OUT/$kind-oom-$m.log")" = 1 ]; then
      pass "$kind/out of memory past the cap ($m)" "$(grep -m1 '^OK' "$OUT/$kind-oom-$m.log")"
    else fail "$kind/out of memory past the cap ($m)" "see $OUT/$kind-oom-$m.log"; fi
  done
done
for m in $MODES vmm; do
  expect "driver API, own context, $m" "driver-$m.log" "$RUN" $(mode_args $m) --report="$OUT/driver-$m.json" -- "$OUT/bin/app_driver"
  served "driver API $m" "$OUT/driver-$m.json"
done
# The programs that free and reuse across streams and threads, in the
# default mode: reserved peak at most 1.05 times the program's live peak (and at least it)
# (the report's live_footprint_ratio); the arena's footprint_ratio (its
# requested peak counts what carve keeps after frees) and segments mode's
# figure beside it.
for f in static-streams static-threads shared-streams shared-threads driver; do
  fp=$(json "$OUT/$f-default.json" 'd["devices"][0]["live_footprint_ratio"]' 2>/dev/null || echo none)
  fa=$(json "$OUT/$f-default.json" 'd["devices"][0]["footprint_ratio"]' 2>/dev/null || echo none)
  fs=$(json "$OUT/$f-segments.json" 'd["devices"][0]["live_footprint_ratio"]' 2>/dev/null || echo none)
  python3 -c "import sys; sys.exit(0 if 1.0 <= float(sys.argv[1]) <= 1.05 else 1)" "$fp" 2>/dev/null &&
    pass "$f: footprint at most 1.05 (default mode)" "$fp (the arena's $fa; segments mode $fs)" ||
    fail "$f: footprint at most 1.05 (default mode)" "$fp (the arena's $fa; segments mode $fs)"
done

# ---- 7: compute-sanitizer memcheck under carve-run ---------------------------------
part memcheck
for m in default segments; do
  for prog in "streams" "destroyed ${MEMCHECK_ROUNDS:-10}"; do
    [ $m = segments ] && [ "$prog" != streams ] && continue
    name=$(echo "$prog" | cut -d' ' -f1)
    CARVE_RUN_QUIET=1 timeout "${MEMCHECK_TIMEOUT:-300}" compute-sanitizer --tool memcheck --target-processes all \
      --error-exitcode 1 "$RUN" $(mode_args $m) -- "$OUT/bin/app_static" $prog >"$OUT/memcheck-$name-$m.log" 2>&1 &&
      grep -q "ERROR SUMMARY: 0 errors" "$OUT/memcheck-$name-$m.log" &&
      pass "memcheck: static/$name carve-run $m" "$(grep -m1 'ERROR SUMMARY' "$OUT/memcheck-$name-$m.log")" ||
      fail "memcheck: static/$name carve-run $m" "see $OUT/memcheck-$name-$m.log"
  done
done

# ---- benchmark: the interposed pair ----------------------------------------------
part bench-pairs
# Plain (without carve-run): every size once. Under carve-run, and with the
# runtime alone in front of a do-nothing stand-in for the driver's
# cuMemAlloc/cuMemFree (libdropin_floor.so: what the runtime layer itself
# costs), 4 KiB pairs in BENCH_REPS processes each (default 5), taking
# turns: one process differs from the next by far more than carve's share.
# Every such process runs on the same core (BENCH_CPU, default 2; taskset
# where there is one): left to the scheduler, processes landing on other
# cores spread the static runtime's pair over 116-181 ns on one H100 host.
FLOOR=$BUILD/tests/dropin/libdropin_floor.so
PIN=()
command -v taskset >/dev/null && taskset -c "${BENCH_CPU:-2}" true 2>/dev/null && PIN=(taskset -c "${BENCH_CPU:-2}")
"$OUT/bin/app_static" bench >"$OUT/bench-plain.log" 2>&1
"$OUT/bin/app_shared" bench >"$OUT/bench-shared-plain.log" 2>&1
"$OUT/bin/app_driver" bench >"$OUT/bench-driver-plain.log" 2>&1
"$RUN" -- "$OUT/bin/app_static" bench >"$OUT/bench-carve.log" 2>&1
grep -q "^OK" "$OUT/bench-carve.log" && pass "bench pairs" "$(grep -m1 '4096 B' "$OUT/bench-carve.log")" ||
  fail "bench pairs" "see $OUT/bench-carve.log"
for rep in $(seq "${BENCH_REPS:-5}"); do
  "${PIN[@]}" "$RUN" -- "$OUT/bin/app_static" bench-small >"$OUT/bench-static-carve.$rep.log" 2>&1
  LD_PRELOAD=$FLOOR "${PIN[@]}" "$OUT/bin/app_static" bench-small >"$OUT/bench-static-floor.$rep.log" 2>&1
  "${PIN[@]}" "$RUN" -- "$OUT/bin/app_shared" bench-small >"$OUT/bench-shared-carve.$rep.log" 2>&1
  LD_PRELOAD=$FLOOR "${PIN[@]}" "$OUT/bin/app_shared" bench-small >"$OUT/bench-shared-floor.$rep.log" 2>&1
  "${PIN[@]}" "$RUN" -- "$OUT/bin/app_driver" bench-small >"$OUT/bench-driver-carve.$rep.log" 2>&1
done
# the shared runtime's cudaMalloc, cudaFree, cudaMallocAsync and
# cudaFreeAsync are the interposer's own exports
grep -q "^OK" "$OUT/bench-shared-carve.1.log" && pass "bench pairs, shared cudart" "$(grep -m1 '4096 B' "$OUT/bench-shared-carve.1.log")" ||
  fail "bench pairs, shared cudart" "see $OUT/bench-shared-carve.1.log"
if nm -D "$OUT/bin/app_shared" 2>/dev/null | grep -q " U cudaMalloc@" &&
   nm -D --defined-only "$BUILD/lib/preload/libcarve_preload.so" | grep -q " T cudaMalloc$"; then
  pass "shared cudart: cudaMalloc is the interposer's" "the program imports it, libcarve_preload.so exports it"
else fail "shared cudart: cudaMalloc is the interposer's" "nm -D app_shared / libcarve_preload.so"; fi
grep -q "^OK" "$OUT/bench-driver-carve.1.log" && pass "bench pairs, driver API" "$(grep -m1 '4096 B' "$OUT/bench-driver-carve.1.log")" ||
  fail "bench pairs, driver API" "see $OUT/bench-driver-carve.1.log"
# the stand-in served the runtime's pairs (else its column means nothing)
grep -qE "dropin_floor: [1-9][0-9]* allocations served by the stand-in" "$OUT/bench-static-floor.1.log" &&
  pass "runtime alone: the stand-in serves" "$(grep -m1 'served by the stand-in' "$OUT/bench-static-floor.1.log")" ||
  fail "runtime alone: the stand-in serves" "see $OUT/bench-static-floor.1.log"
DROPIN_FLOOR=count LD_PRELOAD=$FLOOR "$OUT/bin/app_static" bench-small >"$OUT/bench-static-count.log" 2>&1
# The 4 KiB pairs side by side, in bench-pairs.txt: each process prints the
# median of 21 x 2000 pairs; the table gives the median over processes and
# their range.
python3 - "$OUT" "${BENCH_REPS:-5}" <<'PY' | tee "$OUT/bench-pairs.txt"
import re, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
def ns(log, pair):
    try:
        for line in open(f"{out}/{log}"):
            m = re.match(r"bench (\S+) 4096 B: ([0-9.]+) ns", line)
            if m and m.group(1) == pair:
                return float(m.group(2))
    except OSError:
        pass
    return None
def over(stem, pair):
    v = [x for x in (ns(f"{stem}.{r}.log", pair) for r in range(1, reps + 1)) if x is not None]
    return (statistics.median(v), min(v), max(v)) if v else None
def cell(t):
    return f"{t[0]:.1f} ({t[1]:.0f}-{t[2]:.0f})" if t else "-"
rows = [("cudaMalloc+cudaFree", "static cudart", "bench-plain.log", "bench-static"),
        ("cudaMallocAsync+cudaFreeAsync", "static cudart", "bench-plain.log", "bench-static"),
        ("cudaMalloc+cudaFree", "shared cudart", "bench-shared-plain.log", "bench-shared"),
        ("cudaMallocAsync+cudaFreeAsync", "shared cudart", "bench-shared-plain.log", "bench-shared"),
        ("cuMemAlloc+cuMemFree", "driver API", "bench-driver-plain.log", "bench-driver"),
        ("cuMemAllocAsync+cuMemFreeAsync", "driver API", "bench-driver-plain.log", "bench-driver")]
print(f"4 KiB pairs, ns per pair: plain (without carve-run, one process); runtime alone (a stand-in")
print(f"driver that does nothing serves cuMemAlloc/cuMemFree) and carve-run: median of {reps} processes")
print(f"taking turns (range); carve's share = carve-run - runtime alone, for the static cudart, whose")
print(f"cudaMalloc runs before carve's; under carve-run the shared cudart's cudaMalloc and cudaFree")
print(f"are the interposer's own, so its runtime layer is not paid at all")
print(f"{'pair':32s} {'program':14s} {'plain':>10s} {'runtime alone':>18s} {'carve-run':>18s} {'carve share':>12s}")
for pair, prog, plain, stem in rows:
    p = ns(plain, pair)
    f = over(stem + "-floor", pair) if not "Async" in pair and prog != "driver API" else None
    c = over(stem + "-carve", pair)
    share = f"{c[0] - f[0]:.1f}" if c and f and prog == "static cudart" else "-"
    print(f"{pair:32s} {prog:14s} {p if p is not None else '-':>10} {cell(f):>18s} {cell(c):>18s} {share:>12s}")
PY
# The issue's aims for the pair under carve-run (the median over processes):
# static runtime at most 150 ns, shared runtime and driver API at most 100 ns.
pair_aim() { # NAME ROW_REGEX AIM_NS
  local ns
  ns=$(grep -m1 -E "$2" "$OUT/bench-pairs.txt" | awk '{print $(NF-2)}')
  python3 -c "import sys; sys.exit(0 if float('${ns:-inf}') <= $3 else 1)" 2>/dev/null &&
    pass "$1 at most $3 ns" "${ns} ns under carve-run (bench-pairs.txt)" ||
    fail "$1 at most $3 ns" "${ns:-?} ns under carve-run (bench-pairs.txt)"
}
pair_aim "pair: static cudart" "^cudaMalloc\+cudaFree +static" 150
pair_aim "pair: shared cudart" "^cudaMalloc\+cudaFree +shared" 100
pair_aim "pair: driver API" "^cuMemAlloc\+cuMemFree +driver" 100

fi # (DROPIN_GPU_ONLY=torch skips parts 1-3, 7 and the benchmark)
if [ "${DROPIN_GPU_ONLY:-}" = c ]; then
  part end
  echo "total $((SECONDS - T0)) s" >>"$OUT/timings.txt"
  echo "$passed passed, $failed failed"
  [ $failed = 0 ]; exit
fi

# ---- 4: PyTorch ------------------------------------------------------------------
# Each workload with PyTorch's own cache, with expandable segments, and with
# its cache off under carve-run in the default mode; compare_torch.py judges.
part torch
TT="python3 $HERE/torch_train.py"
echo "workload         requested allocated own-cache expandable     carve   ratio  dev-own  dev-exp dev-carve   own-ms  expand-ms  carve-ms" >"$OUT/torch-compare.txt"
echo "(GiB: requested = allocated = PyTorch's allocated peak with its own cache (what it allocates outside its allocator not counted);" >>"$OUT/torch-compare.txt"
echo " own-cache, expandable, carve = reserved peaks; ratio = carve / requested; dev-* = device memory the driver saw each process hold)" >>"$OUT/torch-compare.txt"
for w in "gpt2-train:--model gpt2 --steps 20 --batch 8 --seq 512" "resnet50-infer:--model resnet50-infer --steps 40"; do
  name=${w%%:*}; args=${w#*:}
  # each run watched from outside (nvidia-smi twice a second, and its exit
  # status): PyTorch's reserved memory never shrinks in these runs, so its
  # peak stays until the end; carve's may (it unmaps), and compare_torch.py
  # takes carve's figure as at least its reserved peak from the report plus
  # what the carve process held beside carve's memory at the end (each run
  # holds still for 2 s before it exits, --settle, so that the watch's last
  # readings see it at rest). Stale files from an earlier run must not be
  # judged: the report and the watches are removed first.
  WW() { local w=$OUT/torch-$name-$1-watch.json; shift; python3 "$HERE/mem_watch.py" "$w" --interval 0.5 -- "$@"; }
  args="$args --settle 2"
  rm -f "$OUT/torch-$name-carve-report.json" "$OUT/torch-$name-"{native,expandable,carve}-watch.json
  WW native $TT $args >"$OUT/torch-$name-native.json" 2>"$OUT/torch-$name-native.err"
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True WW expandable $TT $args >"$OUT/torch-$name-expandable.json" \
    2>"$OUT/torch-$name-expandable.err"
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 WW carve "$RUN" --report="$OUT/torch-$name-carve-report.json" -- $TT $args \
    >"$OUT/torch-$name-carve.json" 2>"$OUT/torch-$name-carve.err"
  python3 "$HERE/compare_torch.py" "$name" "$OUT/torch-$name-native.json" "$OUT/torch-$name-expandable.json" \
    "$OUT/torch-$name-carve.json" "$OUT/torch-$name-carve-report.json" "$OUT/torch-$name-native-watch.json" \
    "$OUT/torch-$name-expandable-watch.json" "$OUT/torch-$name-carve-watch.json" >"$OUT/torch-$name-verdict.txt" 2>&1 ||
    grep -q "^FAIL" "$OUT/torch-$name-verdict.txt" ||
    echo "FAIL $name: judge | compare_torch.py failed without a FAIL line" >>"$OUT/torch-$name-verdict.txt"
  while IFS= read -r line; do
    case $line in
      PASS*) body=${line#PASS }; pass "${body%% | *}" "${body#* | }";;
      FAIL*) body=${line#FAIL }; fail "${body%% | *}" "${body#* | } (see $OUT/torch-$name-*)";;
      ROW*) echo "${line#ROW }" >>"$OUT/torch-compare.txt";;
    esac
  done <"$OUT/torch-$name-verdict.txt"
  grep -qE "^(PASS|FAIL)" "$OUT/torch-$name-verdict.txt" || fail "torch $name" "no verdict (see $OUT/torch-$name-*)"
done
cat "$OUT/torch-compare.txt"
# The same run as gpt2-train's, traced, with its report: its footprint on the
# GPU beside the replay of its own trace (here with carve-replay; on the CPU
# through carve-run and the mock driver, tests/dropin/replay_app.c) tells
# what the live run adds (threads, timing) from what the sequence holds.
PYTORCH_NO_CUDA_MEMORY_CACHING=1 "$RUN" --trace "$OUT/torch_gpt2_nocache.csv.gz" --report="$OUT/torch-trace-report.json" -- \
  python3 "$HERE/torch_train.py" --model gpt2 --steps 20 --batch 8 --seq 512 >"$OUT/torch-trace.json" 2>&1 &&
  pass "torch gpt2: trace recorded" "$(ls -la "$OUT/torch_gpt2_nocache.csv.gz" | awk '{print $5}') bytes" ||
  fail "torch gpt2: trace recorded" "see $OUT/torch-trace.json"
"$REPLAY" -q "$OUT/torch_gpt2_nocache.csv.gz" >"$OUT/torch-trace-replay.txt" 2>&1 || true

if [ "${DROPIN_GPU_ONLY:-}" = torch ]; then
  part end
  echo "total $((SECONDS - T0)) s" >>"$OUT/timings.txt"
  echo "$passed passed, $failed failed"
  [ $failed = 0 ]; exit
fi

# ---- 5: CuPy ---------------------------------------------------------------------
part cupy
python3 "$HERE/cupy_ops.py" >"$OUT/cupy-plain.json" 2>"$OUT/cupy-plain.err"
"$RUN" --report="$OUT/cupy-report.json" -- python3 "$HERE/cupy_ops.py" >"$OUT/cupy-carve.json" 2>"$OUT/cupy-carve.err"
a=$(json "$OUT/cupy-plain.json" 'd["checksum"]' 2>/dev/null); b=$(json "$OUT/cupy-carve.json" 'd["checksum"]' 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ] && pass "cupy: same results" "checksum $a" || fail "cupy: same results" "$a vs $b"

# ---- 8: the cap, read from the driver --------------------------------------------
part cap
# A process's memory as nvidia-smi reports it includes its CUDA context; a
# baseline run of the same framework (one small allocation) measures that,
# and SLACK allows for kernels loaded later.
W="python3 $HERE/mem_watch.py"
SLACK=$((128 << 20))
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$RUN" --limit 4GiB -- \
  python3 -c "import torch; torch.ones(10 << 30, dtype=torch.uint8, device='cuda')" >"$OUT/expandable-10g.log" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "OutOfMemoryError" "$OUT/expandable-10g.log" &&
  pass "torch expandable 10 GiB under 4 GiB: its OOM error" "exit $rc" ||
  fail "torch expandable 10 GiB under 4 GiB: its OOM error" "exit $rc (139 is the crash), see $OUT/expandable-10g.log"
$W "$OUT/torch-base-watch.json" -- python3 "$HERE/torch_cap.py" --baseline >"$OUT/torch-base.json" 2>&1
XLA_PYTHON_CLIENT_PREALLOCATE=false $W "$OUT/jax-base-watch.json" -- python3 "$HERE/jax_cap.py" --baseline \
  >"$OUT/jax-base.json" 2>&1
# capped NAME STEM BASE CAP_BYTES [together]: the run STEM asked for 10 GiB
# and got the framework's own out-of-memory error, took at most CAP_BYTES,
# and the driver never saw the process hold more than CAP_BYTES + its
# context ("together": another program ran beside it).
capped() {
  local name=$1 stem=$OUT/$2 base=$OUT/$3-base-watch.json cap=$4 verdict
  verdict=$(python3 - "$stem.json" "$stem-watch.json" "$base" "$cap" "$SLACK" "${5:-alone}" <<'PY'
import json, sys
try:
    r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
    w, b = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
except (OSError, ValueError, IndexError) as e:
    print(f"FAIL unreadable results ({e})"); sys.exit()
cap, slack, alone = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "alone"
held = w["peak_bytes"] - b["peak_bytes"]
# the device's reading is the process's own only when it runs alone
measured = w["samples"] > 0 and w["peak_bytes"] > 0 and (w["method"] == "process" or alone)
ok = (w["rc"] == 0 and r.get("ask_result") == "oom" and 0 < r.get("filled_bytes", 0) <= cap and measured
      and held <= cap + slack)
print(f"{'OK' if ok else 'FAIL'} asked 10 GiB: {r.get('ask_result')} ({r.get('ask_error')}); took "
      f"{r.get('filled_bytes', 0) / 2**30:.2f} GiB; the driver saw {w['peak_bytes'] / 2**30:.2f} GiB "
      f"({w['method']}, {w['samples']} readings), context {b['peak_bytes'] / 2**30:.2f} GiB, so "
      f"{held / 2**30:.2f} GiB held, cap {cap / 2**30:.2f} GiB; rc {w['rc']}"
      f"{'' if measured else '; no reading of this process alone'}")
PY
)
  case $verdict in OK*) pass "$name" "${verdict#OK }";; *) fail "$name" "${verdict#FAIL } (see $stem.*)";; esac
}
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True $W "$OUT/torch-expandable-watch.json" -- \
  "$RUN" --limit 4GiB --report="$OUT/torch-expandable-report.json" -- python3 "$HERE/torch_cap.py" \
  >"$OUT/torch-expandable.json" 2>"$OUT/torch-expandable.err"
capped "torch expandable: held to 4 GiB" torch-expandable torch $((4 << 30))
$W "$OUT/torch-cached-watch.json" -- "$RUN" --limit 4GiB --report="$OUT/torch-cached-report.json" -- \
  python3 "$HERE/torch_cap.py" >"$OUT/torch-cached.json" 2>"$OUT/torch-cached.err"
capped "torch caching allocator: held to 4 GiB" torch-cached torch $((4 << 30))
$W "$OUT/jax-prealloc-watch.json" -- "$RUN" --limit 4GiB --report="$OUT/jax-prealloc-report.json" -- \
  python3 "$HERE/jax_cap.py" >"$OUT/jax-prealloc.json" 2>"$OUT/jax-prealloc.err"
capped "jax preallocation: held to 4 GiB" jax-prealloc jax $((4 << 30))
lim=$(json "$OUT/jax-prealloc.json" 'd["bytes_limit"]' 2>/dev/null || echo none)
[ "$lim" != none ] && [ "$lim" -le $((4 << 30)) ] 2>/dev/null && pass "jax: preallocation sized to the cap" "bytes_limit $lim" ||
  fail "jax: preallocation sized to the cap" "bytes_limit $lim (see $OUT/jax-prealloc.json)"
XLA_PYTHON_CLIENT_ALLOCATOR=platform $W "$OUT/jax-platform-cap-watch.json" -- "$RUN" --limit 4GiB \
  --report="$OUT/jax-platform-cap-report.json" -- python3 "$HERE/jax_cap.py" \
  >"$OUT/jax-platform-cap.json" 2>"$OUT/jax-platform-cap.err"
capped "jax platform allocator: held to 4 GiB" jax-platform-cap jax $((4 << 30))
# Two programs at once, each under its own cap (one through cuMemCreate,
# one through carve), holding their memory long enough to overlap.
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True $W "$OUT/two-a-watch.json" -- \
  "$RUN" --limit 2GiB -- python3 "$HERE/torch_cap.py" --hold 5 >"$OUT/two-a.json" 2>"$OUT/two-a.err" &
two_a=$!
$W "$OUT/two-b-watch.json" -- \
  "$RUN" --limit 3GiB -- python3 "$HERE/torch_cap.py" --hold 5 >"$OUT/two-b.json" 2>"$OUT/two-b.err" &
two_b=$!
wait $two_a $two_b
capped "two programs: the first held to 2 GiB" two-a torch $((2 << 30)) together
capped "two programs: the second held to 3 GiB" two-b torch $((3 << 30)) together

# ---- 9: injected failures --------------------------------------------------------
part faults
for kind in static shared; do
  app=$OUT/bin/app_$kind
  "$RUN" --fail-every 7 --report="$OUT/$kind-faults.json" -- "$app" faults >"$OUT/$kind-faults.log" 2>&1
  verdict=$(python3 - "$OUT/$kind-faults.log" "$OUT/$kind-faults.json" <<'PY'
import json, re, sys
m = re.search(r"^OK faults (\d+) calls, (\d+) failed, every (\d+) from call \d+, spaced evenly (\d)", open(sys.argv[1]).read(), re.M)
try:
    rep = json.load(open(sys.argv[2]))
except (OSError, ValueError):
    rep = {}
kept = sum(k["bytes_at_exit"] for c in rep.get("counted", []) for n, k in c["kinds"].items() if n != "carve")
ok = m and m.group(3) == "7" and m.group(4) == "1" and int(m.group(2)) >= int(m.group(1)) // 7 - 1 \
     and rep.get("injected_failures") == int(m.group(2)) and kept == 0
print(("OK " if ok else "FAIL ") + (m.group(0)[3:] if m else "no OK line") +
      f"; injected {rep.get('injected_failures')}, memory kept outside carve at exit {kept}")
PY
)
  case $verdict in OK*) pass "$kind/faults: every 7th call fails" "${verdict#OK }";;
                   *) fail "$kind/faults: every 7th call fails" "${verdict#FAIL } (see $OUT/$kind-faults.log)";; esac
done
# The injected failures are errors the program is meant to see: memcheck is
# told not to report API errors here (it counted each injected failure and
# the program's cudaGetLastError after it as two errors) and checks every
# memory access. Leaks are checked above, by carve-run's report (nothing
# kept outside carve at exit) and the program's own count.
CARVE_RUN_QUIET=1 timeout "${MEMCHECK_TIMEOUT:-300}" compute-sanitizer --tool memcheck --target-processes all --error-exitcode 1 \
  --report-api-errors no \
  "$RUN" --fail-every 7 -- "$OUT/bin/app_static" faults >"$OUT/memcheck-faults.log" 2>&1 &&
  grep -q "ERROR SUMMARY: 0 errors" "$OUT/memcheck-faults.log" &&
  pass "memcheck: static/faults under carve-run" "$(grep -m1 'ERROR SUMMARY' "$OUT/memcheck-faults.log")" ||
  fail "memcheck: static/faults under carve-run" "see $OUT/memcheck-faults.log"
# PyTorch's cudaMallocAsync backend makes one cudaMallocAsync per tensor and
# raises torch.cuda.OutOfMemoryError on the first failure. N is twice the
# allocations of a step of a run without failures (from its report), so
# that a step run again after a failure can finish.
export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
python3 "$HERE/torch_faults.py" >"$OUT/torch-faults-plain.json" 2>"$OUT/torch-faults-plain.err"
"$RUN" --report="$OUT/torch-faults-count.json" -- python3 "$HERE/torch_faults.py" \
  >"$OUT/torch-faults-nofail.json" 2>"$OUT/torch-faults-nofail.err"
every=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); s=json.loads(open(sys.argv[2]).read().strip().splitlines()[-1]); print(2 * sum(d['allocs'] for d in r['devices']) // s['steps'] + 1)" \
  "$OUT/torch-faults-count.json" "$OUT/torch-faults-nofail.json" 2>/dev/null || echo 1000)
"$RUN" --fail-every "$every" --report="$OUT/torch-faults-report.json" -- python3 "$HERE/torch_faults.py" \
  >"$OUT/torch-faults.json" 2>"$OUT/torch-faults.err"
unset PYTORCH_CUDA_ALLOC_CONF
verdict=$(python3 - "$OUT/torch-faults-plain.json" "$OUT/torch-faults.json" "$OUT/torch-faults-report.json" "$every" <<'PY'
import json, sys
try:
    a = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
    b = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
    injected = json.load(open(sys.argv[3])).get("injected_failures")
except (OSError, ValueError, IndexError) as e:
    print(f"FAIL unreadable results ({e})"); sys.exit()
ok = "losses" in a and a["losses"] == b.get("losses") and b.get("ooms", 0) >= 1 and len(a["losses"]) == a["steps"]
print(f"{'OK' if ok else 'FAIL'} --fail-every {sys.argv[4]}: {b.get('ooms')} OutOfMemoryError caught "
      f"({injected} injected), last loss {b.get('losses', ['-'])[-1]} vs {a.get('losses', ['-'])[-1]} without failures"
      f"{'' if ok else ': ' + str(b.get('error', ''))}")
PY
)
case $verdict in OK*) pass "torch: survives injected failures, same losses" "${verdict#OK }";;
                 *) fail "torch: survives injected failures, same losses" "${verdict#FAIL } (see $OUT/torch-faults*)";; esac

part end
echo "total $((SECONDS - T0)) s" >>"$OUT/timings.txt"
echo "$passed passed, $failed failed (seconds per part: $OUT/timings.txt)"
[ $failed = 0 ]
