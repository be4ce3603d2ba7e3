#!/usr/bin/env bash
# record.sh — record the PyTorch traces of bench/traces on a GPU machine.
#
#   bench/traces/record.sh [record_torch.py options, e.g. --quick]
#
# Writes NAME.csv.gz and NAME.json next to this script (or into $OUT) and
# lists what was written. Needs python3 with torch, torchvision and
# transformers, and a CUDA GPU; downloads nothing.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-$here}
"${PYTHON:-python3}" "$here/record_torch.py" --out "$out" "$@"
echo
ls -l "$out"/*.csv.gz "$out"/*.json
du -ch "$out"/*.csv.gz | tail -n 1
