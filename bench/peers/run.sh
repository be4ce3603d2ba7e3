#!/usr/bin/env bash
# run.sh — build and run carve's peer benchmark on a GPU machine; the table
# comes last on stdout.
#
#   bench/peers/run.sh [BUILD_DIR] [TRACE...]
#
# BUILD_DIR: a meson build folder configured with CUDA (default: build).
# TRACE: text traces to replay (default: bench/traces/*.csv.gz).
# Every allocator runs every workload in a process of its own. Outputs go to
# ${OUT:-bench/results/peers}: header.txt, raw.jsonl (one JSON object per
# result), results.csv, results.json, table.txt and run.log (everything the
# processes printed).
#
# Environment: OUT; QUICK=1 (a smoke run: fewer steps and repetitions);
# PYTHON (default python3); SKIP_TORCH=1; ALLOCATORS (native peers, default
# "cudaMalloc cudaMallocAsync cub carve carve-segments"); WORKLOADS (default
# "pair churn threads"); STEP_TIMEOUT (seconds per process, default 300).
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cmdline="$0 $*"
build=${1:-$root/build}
[ $# -gt 0 ] && shift
if ! build=$(cd "$build" 2>/dev/null && pwd); then
    echo "run.sh: no build folder '${1:-build}' (meson setup build -Dcuda=enabled)" >&2
    exit 1
fi
traces=("$@")
if [ ${#traces[@]} -eq 0 ]; then
    shopt -s nullglob
    traces=("$root"/bench/traces/*.csv.gz)
    shopt -u nullglob
fi
out=${OUT:-$root/bench/results/peers}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1
raw=$out/raw.jsonl
log=$out/run.log
: > "$raw"
: > "$log"
py=${PYTHON:-python3}
quick=()
[ "${QUICK:-0}" = 1 ] && quick=(--quick)
allocs=${ALLOCATORS:-"cudaMalloc cudaMallocAsync cub carve carve-segments"}
workloads=${WORKLOADS:-"pair churn threads"}
step_timeout=${STEP_TIMEOUT:-300}
t_start=$(date +%s)

gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
{
    echo "carve peer benchmark"
    echo "date:     $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "command:  $cmdline"
    echo "gpu:      ${gpu:-unknown (nvidia-smi unavailable)}"
    echo "commit:   $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
    echo "traces:   ${traces[*]:-none}"
    [ ${#quick[@]} -gt 0 ] && echo "mode:     QUICK (smoke run, numbers not for publication)"
} > "$out/header.txt"
cat "$out/header.txt"
echo

note() { printf '[%4ds] %s\n' $(($(date +%s) - t_start)) "$*" >&2; }

# step LABEL COMMAND...: run one process with a time limit, its output to the log.
failures=0
step() {
    local label=$1 rc
    shift
    echo "=== $label: $*" >> "$log"
    timeout "$step_timeout" "$@" >> "$log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        note "$label"
    else
        failures=$((failures + 1))
        note "$label FAILED (exit $rc; see $log)"
    fi
}

note "building carve_peers in $build"
if ! ninja -C "$build" bench/peers/carve_peers >> "$log" 2>&1; then
    note "build FAILED; see $log"
    tail -n 30 "$log" >&2
    exit 1
fi
bin=$build/bench/peers/carve_peers

# Text traces -> the benchmark's binary form, once, so that every allocator
# (PyTorch's extension included) replays exactly the same operations.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/carve-peers.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
bins=()
for t in ${traces[@]+"${traces[@]}"}; do
    label=$(basename "$t")
    label=${label%.gz}
    label=${label%.csv}
    if "$bin" --convert "$t" "$tmp/$label.bin" >> "$log" 2>&1; then
        bins+=("$tmp/$label.bin")
        note "trace $label: $(tail -n 1 "$log" | sed 's/^carve_peers: [^:]*: //')"
    else
        failures=$((failures + 1))
        note "trace $t: conversion FAILED (see $log)"
    fi
done

torch_ok=0
if [ "${SKIP_TORCH:-0}" != 1 ]; then
    note "building the PyTorch extension (first time: about a minute)"
    if timeout 900 "$py" "$here/torch_peer.py" --build-dir "$build/torch_peer" --build-only >> "$log" 2>&1; then
        torch_ok=1
        note "$(tail -n 1 "$log")"
    else
        failures=$((failures + 1))
        note "PyTorch extension build FAILED (see $log); torch columns skipped"
    fi
fi

for a in $allocs; do
    for w in $workloads; do
        step "$a $w" "$bin" --alloc "$a" --workload "$w" --out "$raw" ${quick[@]+"${quick[@]}"}
    done
    for b in ${bins[@]+"${bins[@]}"}; do
        step "$a trace $(basename "$b" .bin)" "$bin" --alloc "$a" --workload trace --trace "$b" \
            --out "$raw" ${quick[@]+"${quick[@]}"}
    done
done

if [ $torch_ok = 1 ]; then
    # PYTORCH_CUDA_ALLOC_CONF is read once at CUDA init: one process per configuration.
    for conf in "" "expandable_segments:True"; do
        if [ -z "$conf" ]; then
            envset=(env -u PYTORCH_CUDA_ALLOC_CONF -u PYTORCH_ALLOC_CONF)
            name=torch
        else
            envset=(env PYTORCH_CUDA_ALLOC_CONF="$conf" PYTORCH_ALLOC_CONF="$conf")
            name=torch-expandable
        fi
        for w in $workloads; do
            step "$name $w" "${envset[@]}" "$py" "$here/torch_peer.py" --build-dir "$build/torch_peer" \
                -- --workload "$w" --out "$raw" ${quick[@]+"${quick[@]}"}
        done
        for b in ${bins[@]+"${bins[@]}"}; do
            step "$name trace $(basename "$b" .bin)" "${envset[@]}" "$py" "$here/torch_peer.py" \
                --build-dir "$build/torch_peer" -- --workload trace --trace "$b" --out "$raw" \
                ${quick[@]+"${quick[@]}"}
        done
    done
fi

note "done in $(($(date +%s) - t_start)) s, $failures failed step(s); outputs in $out"
if ! "$py" "$here/summarize.py" "$raw" --csv "$out/results.csv" --json "$out/results.json" \
    --header "$out/header.txt" > "$out/table.txt" 2>> "$log"; then
    echo "run.sh: no results to summarize; see $log" >&2
    tail -n 40 "$log" >&2
    exit 1
fi
echo
cat "$out/table.txt"
[ $failures -eq 0 ]
