#!/bin/sh
# run.sh — the GPU suite as meson runs it, then every test under each of
# compute-sanitizer's tools (memcheck with its leak check, racecheck,
# synccheck) with CARVE_TEST_QUICK=1.
#
# usage: tests/gpu/run.sh [BUILD_DIR]        (default: build)
#
# Environment:
#   SANITIZER           compute-sanitizer to use (default: from PATH, else
#                       /usr/local/cuda/bin/compute-sanitizer)
#   SANITIZER_TOOLS     tools to run (default "memcheck racecheck synccheck")
#   SANITIZER_ARGS      extra arguments for every sanitizer run
#   SANITIZER_TIMEOUT   seconds per test under the sanitizer (default 1800)
#   SKIP_SANITIZER=1    run the meson suite only
#   GPU_TESTS           names of the tests to run (default: every test of
#                       the gpu suite), e.g. "gpu_graph gpu_peer"
#
# Under the sanitizer:
#   - CARVE_TEST_QUICK=1 shrinks step counts and sleeps (memcheck slows
#     kernels 10-100x);
#   - CARVE_TEST_MEM_SLACK_MIB=512, because the sanitizer keeps device memory
#     of its own that would otherwise read as a leak in the tests' driver
#     counts (its --leak-check full is the stricter leak check there);
#   - gpu_oom, gpu_two_devices and gpu_peer run with --report-api-errors no:
#     gpu_oom makes cudaMalloc fail on purpose, NCCL probes optional driver
#     entry points that fail by design, and gpu_peer enables peer access
#     that is already enabled on purpose (cudaErrorPeerAccessAlreadyEnabled).
#     Memory access checking stays on.
#   - an API error that answers carve's question "is a blocking stream of
#     this context being captured?" (cuStreamIsCapturing on the legacy
#     stream, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT: the only way the driver
#     tells) is expected while another thread captures (gpu_graph's
#     case_other_thread); a run whose every reported error is that answer
#     passes, with the count printed. Every error is printed (--print-limit
#     0), so that none hides behind the limit.
#
# Prints one line per test and run; exits non-zero if anything failed
# (a skip, exit code 77, is not a failure).

BUILD=${1:-build}
if [ ! -f "$BUILD/build.ninja" ]; then
    echo "run.sh: $BUILD is not a meson build directory" >&2
    exit 2
fi
LOGS="$BUILD/meson-logs/gpu-sanitizer"
mkdir -p "$LOGS" || exit 2
failed=0

echo "== meson test --suite gpu ${GPU_TESTS:-}"
# shellcheck disable=SC2086 # the names are split on purpose
if ! meson test -C "$BUILD" --suite gpu --print-errorlogs ${GPU_TESTS:-}; then
    failed=1
fi

if [ "${SKIP_SANITIZER:-0}" = 1 ]; then
    echo "== compute-sanitizer run skipped (SKIP_SANITIZER=1)"
    exit $failed
fi

SAN=${SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
if [ ! -x "$SAN" ]; then
    echo "run.sh: compute-sanitizer not found (set SANITIZER, or SKIP_SANITIZER=1)" >&2
    exit 1
fi

# One line per gpu test: name, then NAME=VALUE environment words, "--", command words.
LIST="$LOGS/tests.txt"
meson introspect --tests "$BUILD" | python3 -c '
import json, shlex, sys
for t in json.load(sys.stdin):
    if not any(s.endswith(":gpu") or s == "gpu" for s in t["suite"]):
        continue
    env = ["%s=%s" % kv for kv in sorted((t.get("env") or {}).items())]
    print(" ".join([t["name"]] + [shlex.quote(w) for w in env] + ["--"] + [shlex.quote(w) for w in t["cmd"]]))
' > "$LIST" || { echo "run.sh: meson introspect failed" >&2; exit 1; }

for tool in ${SANITIZER_TOOLS:-memcheck racecheck synccheck}; do
echo "== compute-sanitizer --tool $tool (CARVE_TEST_QUICK=1), logs in $LOGS"
while read -r name rest; do
    case " ${GPU_TESTS:-$name} " in *" $name "*) ;; *) continue ;; esac
    api=""
    case "$name" in
    gpu_oom | gpu_two_devices | gpu_peer) api="--report-api-errors no" ;;
    esac
    leak=""
    [ "$tool" = memcheck ] && leak="--leak-check full"
    log="$LOGS/$name.$tool.log"
    start=$(date +%s)
    eval "set -- $rest"
    envs=""
    while [ "$1" != "--" ]; do
        envs="$envs $1"
        shift
    done
    shift
    # shellcheck disable=SC2086 # the environment and option lists are split on purpose
    env $envs CARVE_TEST_QUICK=1 CARVE_TEST_MEM_SLACK_MIB=512 \
        timeout "${SANITIZER_TIMEOUT:-1800}" \
        "$SAN" --tool "$tool" $leak --print-limit 0 --error-exitcode 1 $api ${SANITIZER_ARGS:-} "$@" \
        > "$log" 2>&1 < /dev/null
    rc=$?
    note=""
    if [ $rc = 1 ]; then
        errors=$(sed -n 's/^=* *ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$log" | tail -1)
        asked=$(grep -cE "Program hit (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT|cudaErrorStreamCaptureImplicit) .* on CUDA API call to cuStreamIsCapturing" "$log")
        if [ -n "$errors" ] && [ "$errors" -gt 0 ] && [ "$errors" = "$asked" ] &&
           grep -qE "^[0-9]+ checks, 0 failed" "$log" && ! grep -qE "^(\[ FAIL \]|FAIL|FATAL)" "$log"; then
            rc=0
            note=" ($asked expected answers to carve's capture question)"
        fi
    fi
    secs=$(($(date +%s) - start))
    summary=$(grep -E "ERROR SUMMARY|LEAK SUMMARY" "$log" | tail -1 | sed 's/^=* *//')
    case $rc in
    0) printf 'PASS  %-22s %-9s %5ss  %s%s\n' "$name" "$tool" "$secs" "$summary" "$note" ;;
    77) printf 'SKIP  %-22s %-9s %5ss  %s\n' "$name" "$tool" "$secs" "$(grep -m1 SKIP "$log")" ;;
    124) printf 'FAIL  %-22s %-9s %5ss  timed out, see %s\n' "$name" "$tool" "$secs" "$log"; failed=1 ;;
    *) printf 'FAIL  %-22s %-9s %5ss  exit %s, %s; see %s\n' "$name" "$tool" "$secs" "$rc" "$summary" "$log"
       grep -E "FAIL|FATAL|=========  *(Invalid|Program hit|Leaked|Error)" "$log" | head -5 | sed 's/^/      /'
       failed=1 ;;
    esac
done < "$LIST"
done

if [ $failed = 0 ]; then
    echo "== gpu suite: all passed or skipped"
else
    echo "== gpu suite: FAILURES (see above)"
fi
exit $failed
