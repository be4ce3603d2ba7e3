#!/usr/bin/env bash
# gpu_run.sh — ggml (llama.cpp's engine) on carve, on one GPU: build, model,
# measure. Exits 77 (skipped) without a GPU.
#
#   build    integrations/ggml/build.sh: carve into a prefix; ggml at the
#            pinned commit (.vendor/ggml, vendor.sh) with its CUDA backend
#            for sm_90 and its GPT-2 programs, unmodified; then with
#            ggml-carve.patch, the adapter and the programs linked through
#            it (about 5 minutes on 16 cores; once per machine).
#   model    a GPT-2 (small, fp16) with random weights, written by
#            make_gpt2.py (numpy; nothing downloaded) in the layout ggml's
#            GPT-2 programs load (ggml's convert-h5-to-ggml.py does not fit
#            today's transformers checkpoints: the programs refuse its file).
#   measure  measure.py: ggml's own VMM and legacy pools, carve-run over
#            each, and the program linked through the adapter; tokens,
#            tokens/s (prompt and generation), peak reserved and nvidia-smi
#            memory, a --limit too small, --trace with carve-replay, the
#            other GPT-2 programs, ggml-carve-models, and carve-run's
#            effect inside one process (ab-gpt2). Writes
#            OUT/results.md and OUT/results.json; PASS/FAIL lines.
#   ab       measure.py --only ab: carve-run's effect on tokens/s inside
#            one process alone (ab-gpt2 turning carve-run's measurement
#            switch between rounds, over each of ggml's pools; about 6
#            minutes on an H100 with the default 120 pairs). Writes OUT/results-ab.md
#            and OUT/results-ab.json.
#   all      build, model and measure in turn (the default).
#
# Usage: integrations/ggml/gpu_run.sh OUT [build|model|measure|ab|all]
# Environment: GGML_WORK (default build-ggml), GGML_GPT2_SIZE (small,
#   medium, large, xl; default small), GGML_RUN_REPS (5), GGML_GEN_TOKENS
#   (256), GGML_AB_PAIRS (120), GGML_AB_WARMUP (1), and build.sh's
#   GGML_CUDA_ARCH, JOBS, GGML_CARVE_FA, GGML_CARVE_GRAPHS.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: gpu_run.sh OUT [build|model|measure|ab|all]}
STEP=${2:-all}
case "$STEP" in build|model|measure|ab|all) ;; *) echo "gpu_run.sh: unknown step '$STEP'" >&2; exit 2;; esac
WORK=${GGML_WORK:-build-ggml}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# Leave NVLink multicast off, in whatever this starts.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH

if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: no GPU (nvidia-smi lists none)"
  exit 77
fi
nvidia-smi -L | tee -a "$OUT/run.log"
rc=0

if [ "$STEP" = build ] || [ "$STEP" = all ]; then
  if integrations/ggml/build.sh "$WORK" 2>&1 | tee -a "$OUT/run.log"; then
    echo "PASS build: carve, ggml unmodified, ggml with the patch and the adapter" | tee -a "$OUT/run.log"
  else
    echo "FAIL build (see $OUT/run.log)" | tee -a "$OUT/run.log"
    exit 1
  fi
fi

if [ "$STEP" = model ] || [ "$STEP" = all ]; then
  if python3 integrations/ggml/make_gpt2.py "$WORK/gpt2" --size "${GGML_GPT2_SIZE:-small}" 2>&1 |
       tee -a "$OUT/run.log" && [ "${PIPESTATUS[0]}" = 0 ] &&
     [ -s "$WORK/gpt2/ggml-model.bin" ]; then
    echo "PASS model: GPT-2 with random weights in ggml's model file ($(du -h "$WORK/gpt2/ggml-model.bin" | cut -f1))" |
      tee -a "$OUT/run.log"
  else
    echo "FAIL model (see $OUT/run.log)" | tee -a "$OUT/run.log"
    exit 1
  fi
fi

if [ "$STEP" = measure ] || [ "$STEP" = ab ] || [ "$STEP" = all ]; then
  only=(); [ "$STEP" = ab ] && only=(--only ab)
  python3 integrations/ggml/measure.py --work "$WORK" --out "$OUT" "${only[@]}" 2>&1 | tee -a "$OUT/run.log"
  rc=${PIPESTATUS[0]}
  # Everything but the summary in one file (what comes back from a device run is a few files).
  tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs 2>/dev/null && rm -rf "$OUT/logs"
fi
exit "$rc"
