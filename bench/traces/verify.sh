#!/usr/bin/env bash
# verify.sh — check the committed traces against their provenance: each
# TRACE.csv.gz is parsed by the trace loader (through carve_peers --convert)
# and its event count and peak of live requested bytes must equal those the
# recorder wrote in TRACE.json. Needs no GPU.
#
#   bench/traces/verify.sh [BUILD_DIR] [TRACE.csv.gz...]
set -u -o pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:-$here/../../build}
[ $# -gt 0 ] && shift
bin=$build/bench/peers/carve_peers
if [ ! -x "$bin" ]; then
    echo "verify.sh: $bin not built (ninja -C $build)" >&2
    exit 1
fi
traces=("$@")
if [ ${#traces[@]} -eq 0 ]; then
    shopt -s nullglob
    traces=("$here"/*.csv.gz)
fi
if [ ${#traces[@]} -eq 0 ]; then
    echo "verify.sh: no traces" >&2
    exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/carve-traces.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
bad=0
for t in "${traces[@]}"; do
    meta=${t%.csv.gz}.json
    if ! line=$("$bin" --convert "$t" "$tmp/t.bin" 2>&1 | tail -n 1); then
        echo "FAIL $t: $line"
        bad=$((bad + 1))
        continue
    fi
    # "carve_peers: PATH: N events, S slots, K streams, peak requested P bytes"
    events=$(sed -n 's/.*: \([0-9]*\) events, .*/\1/p' <<< "$line")
    peak=$(sed -n 's/.*peak requested \([0-9]*\) bytes.*/\1/p' <<< "$line")
    if [ -z "$events" ] || [ -z "$peak" ]; then
        echo "FAIL $t: $line"
        bad=$((bad + 1))
        continue
    fi
    if [ ! -f "$meta" ]; then
        echo "??   $t: $events events, peak $peak (no $meta)"
        continue
    fi
    if python3 - "$meta" "$events" "$peak" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
ok = m["events"] == int(sys.argv[2]) and m["peak_requested_bytes"] == int(sys.argv[3])
print(("ok   " if ok else "FAIL ") + f"{m['file']}: events {sys.argv[2]} (json {m['events']}), "
      f"peak {sys.argv[3]} (json {m['peak_requested_bytes']}), recorder checks "
      f"{'ok' if m.get('checks_ok') else 'FAILED'}")
sys.exit(0 if ok and m.get("checks_ok") else 1)
PY
    then :; else bad=$((bad + 1)); fi
done
echo "$(( ${#traces[@]} - bad )) passed, $bad failed"
[ $bad -eq 0 ]
