#!/usr/bin/env bash
# run_libfuzzer.sh — one bounded libFuzzer run, as a meson test (suite
# 'libfuzzer'). The one idea: libFuzzer writes new inputs into its first
# corpus directory and crash files next to its artifact prefix, so both go
# into a scratch directory under the build tree, seeded with a fresh copy of
# the committed corpus; the source tree is never written.
#
# Usage: run_libfuzzer.sh BINARY SEED_CORPUS_DIR WORK_DIR [libFuzzer flags...]
# Runs for CARVE_FUZZ_SECONDS (default 20) seconds. Exit status 0 when
# libFuzzer found nothing; otherwise 1, after printing the reproducer paths.
set -uo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 BINARY SEED_CORPUS_DIR WORK_DIR [libFuzzer flags...]" >&2
  exit 2
fi
bin=$1; seeds=$2; work=$3; shift 3
seconds=${CARVE_FUZZ_SECONDS:-20}

rm -rf "$work/corpus" "$work/artifacts"
mkdir -p "$work/corpus" "$work/artifacts" || exit 2
cp "$seeds"/* "$work/corpus/" || exit 2

echo "libFuzzer: $(basename "$bin") for ${seconds}s over a copy of $seeds in $work/corpus"
"$bin" -max_total_time="$seconds" -timeout=25 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$@" "$work/corpus" 2>&1 | tee "$work/log.txt" | tail -40
rc=${PIPESTATUS[0]}
found=$(ls -A "$work/artifacts")
if [ "$rc" != 0 ] || [ -n "$found" ]; then
  echo "FAILED: libFuzzer exit status $rc; full log: $work/log.txt"
  sed -n '/invariant violated\|==[0-9]*==ERROR\|runtime error\|deadly signal\|ERROR: libFuzzer/,$p' \
    "$work/log.txt" | head -150
  for f in "$work"/artifacts/*; do
    [ -e "$f" ] && echo "reproducer: $f  (replay: $bin $f)"
  done
  exit 1
fi
grep -E '^#[0-9]+ +DONE' "$work/log.txt" | tail -1
exit 0
