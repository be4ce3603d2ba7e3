#!/usr/bin/env bash
# Instructions per carve_alloc + carve_free pair, counted by callgrind (exact
# and repeatable whatever else the machine is doing, unlike a timer).
#
# Runs bench_alloc --quick --only WORKLOAD under valgrind with collection on
# only inside carve_alloc and carve_free, then divides the instructions
# collected by the number of pairs bench_alloc reports it ran. Workloads: pair (one size
# allocated and freed again, 256 B .. 64 MiB) and churn (1000 live buffers of
# random sizes), in the default mode (virtual-memory mode on bench_alloc's
# virtual backend); pair-segments and churn-segments in segments mode (vmm=0).
# Needs valgrind (apt-get install valgrind).
#
# Usage: bench/count_instructions.sh BENCH_ALLOC_BINARY [WORKLOAD ...]
#   e.g. bench/count_instructions.sh build-release/bench/bench_alloc pair churn pair-segments churn-segments
set -euo pipefail
if [ $# -lt 1 ] || [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  [ $# -lt 1 ] && exit 2 || exit 0
fi
bin=$1; shift
[ -x "$bin" ] || { echo "count_instructions: $bin is not an executable" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "count_instructions: valgrind not found" >&2; exit 2; }
workloads=("$@"); [ ${#workloads[@]} -eq 0 ] && workloads=(pair churn)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for w in "${workloads[@]}"; do
  case $w in
    pair|churn) args=(--only "$w") ;;
    pair-segments|churn-segments) args=(--only "${w%-segments}" --segments) ;;
    *) echo "count_instructions: unknown workload '$w' (pair, churn, pair-segments, churn-segments)" >&2; exit 2;;
  esac
  valgrind --tool=callgrind --callgrind-out-file="$tmp/$w.out" \
    --toggle-collect=carve_alloc --toggle-collect=carve_free \
    "$bin" --quick "${args[@]}" >"$tmp/$w.log" 2>"$tmp/$w.err" || { cat "$tmp/$w.err" >&2; exit 1; }
  /usr/bin/env python3 - "$tmp/$w.out" "$w" "$tmp/$w.log" <<'PY'
import re, sys
total = 0
for line in open(sys.argv[1]):
    if line.startswith("summary:"):
        total = int(line.split()[1])
pairs = 0
for line in open(sys.argv[3]):  # bench_alloc says how many pairs it ran
    m = re.match(r"alloc\+free pairs: (\d+)", line)
    if m:
        pairs = int(m.group(1))
if not pairs or not total:
    sys.exit("count_instructions: no instructions or no pair count recorded")
print(f"{sys.argv[2]:14s} {total / pairs:8.1f} instructions per alloc+free pair "
      f"({total} instructions, {pairs} pairs)")
PY
done
