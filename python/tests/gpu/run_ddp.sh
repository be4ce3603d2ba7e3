#!/usr/bin/env bash
# run_ddp.sh — ddp_gpt2.py on two GPUs: PyTorch's allocator, then carve
# (carve.torch.enable(limit=...) in each process), then the comparison.
# Exits 77 (skipped) with fewer than two GPUs.
# Usage: python/tests/gpu/run_ddp.sh OUT [LIMIT]     (default LIMIT 12GiB)
set -uo pipefail
cd "$(dirname "$0")"
OUT=${1:?usage: run_ddp.sh OUT [LIMIT]}
LIMIT=${2:-12GiB}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${n:-0}" -lt 2 ]; then
  echo "SKIP: ddp_gpt2 needs two GPUs ($n visible)"
  exit 77
fi
for mode in default carve; do
  python3 -m torch.distributed.run --standalone --nproc_per_node=2 ddp_gpt2.py --mode "$mode" --limit "$LIMIT" \
    --out "$OUT" 2>&1 | tee "$OUT/ddp-$mode.log"
done
python3 ddp_gpt2.py --compare "$OUT" 2>&1 | tee "$OUT/ddp-compare.log"
exit "${PIPESTATUS[0]}"
