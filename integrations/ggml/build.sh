#!/usr/bin/env bash
# build.sh — carve installed into a prefix, then ggml (pinned, vendored in
# .vendor/ggml by vendor.sh) with its CUDA backend for sm_90 and its GPT-2
# programs, twice in one build tree: first as they are (copied to
# WORK/bin: gpt-2-backend, gpt-2-sched, gpt-2-batched), then with
# ggml-carve.patch applied (only ggml-cuda.cu recompiles) and the programs
# linked through the adapter (gpt-2-*-carve), with ggml-carve-models and
# libggml_no_vmm.so. Needs cmake, ninja or make, meson, nvcc; no GPU.
#
# ggml unmodified is built without CUDA graphs (ggml's default), as before,
# so that measure.py's ways over ggml's own pools compare as they did. The
# patched ggml is built with them (GGML_CUDA_GRAPHS=ON, as llama.cpp builds
# it) unless GGML_CARVE_GRAPHS=OFF, so that ggml-carve-models checks the
# adapter under captured graphs; the option is a compile definition of every
# CUDA file of ggml, so the second stage then recompiles all of ggml's CUDA
# backend, not only ggml-cuda.cu (about twice the build time). The
# gpt-2-*-carve programs are built the same way: their graphs change at
# every token (the KV cache views move), so ggml should capture none of them
# (their GGML_CARVE_REPORT counts captured allocations), but it compares each
# graph's nodes with the last one's. WORK/bin/carve-graphs.txt says which
# build this was (ON/OFF); measure.py notes it. The first stage also builds
# ab-gpt2 (ab_gpt2.cpp: gpt-2-backend's unmodified main called many times in
# one process, for measure.py's in-process A/B of carve-run).
#
# With cpu as the second argument, only ggml's CPU backend, gpt-2-backend
# and ab-gpt2, from .vendor/ggml as it is, into WORK/cpu/bin (no CUDA, no
# carve, no GPU): the build ab_cpu_smoke.sh runs ab-gpt2 in, to show that
# gpt-2-backend's main can be called again and again in one process.
#
# Usage: integrations/ggml/build.sh [WORK] [cpu]   (default build-ggml)
# Environment: GGML_CUDA_ARCH (default 90), JOBS (default nproc),
#   GGML_CARVE_FA (default OFF: ggml's flash-attention kernels, which the
#   GPT-2 programs do not use, built as stubs; ON for llama.cpp-like builds),
#   GGML_CARVE_GRAPHS (default ON: the patched ggml with CUDA graphs; OFF:
#   without, like the unmodified one)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
WORK=${1:-build-ggml}
MODE=${2:-gpu}
case "$MODE" in gpu|cpu) ;; *) echo "build.sh: the second argument is cpu or nothing, not '$MODE'" >&2; exit 1;; esac
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
ARCH=${GGML_CUDA_ARCH:-90}
JOBS=${JOBS:-$(nproc)}
FA=${GGML_CARVE_FA:-OFF}
GRAPHS=${GGML_CARVE_GRAPHS:-ON}
case "$GRAPHS" in ON|OFF) ;; *) echo "build.sh: GGML_CARVE_GRAPHS must be ON or OFF, not '$GRAPHS'" >&2; exit 1;; esac
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
t0=$(date +%s)
stamp() { echo "build.sh: $1 ($(( $(date +%s) - t0 )) s)"; }

pin=$(cat integrations/ggml/PINNED_COMMIT)
# ggml-carve.patch, forward or (-R) reversed: GNU patch where there is one.
apply() {
  if command -v patch >/dev/null; then
    # -E: reversed, the header the patch created is removed, not left empty
    (cd "$src" && patch -p1 -E "$@" --quiet < "$root/integrations/ggml/ggml-carve.patch")
  else
    python3 "$root/integrations/ggml/apply_patch.py" "$@" "$src" "$root/integrations/ggml/ggml-carve.patch"
  fi
}
if [ "$(cat .vendor/ggml/PINNED_COMMIT 2>/dev/null)" != "$pin" ]; then
  echo "build.sh: .vendor/ggml is not ggml $pin: run integrations/ggml/vendor.sh" >&2
  exit 1
fi

if [ "$MODE" = cpu ]; then
  cmake -S integrations/ggml -B "$WORK/cpu/build" "${gen[@]}" -DGGML_SOURCE_DIR="$root/.vendor/ggml" \
    -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=OFF -DBUILD_SHARED_LIBS=OFF -DGGML_BUILD_TESTS=OFF \
    -DGGML_BUILD_EXAMPLES=OFF -DGGML_CARVE=OFF >"$WORK/cpu-configure.log" 2>&1 ||
    { tail -40 "$WORK/cpu-configure.log"; exit 1; }
  cmake --build "$WORK/cpu/build" -j "$JOBS" --target gpt-2-backend ab-gpt2 >"$WORK/cpu-build.log" 2>&1 ||
    { tail -40 "$WORK/cpu-build.log"; exit 1; }
  mkdir -p "$WORK/cpu/bin"
  cp "$WORK/cpu/build/bin/gpt-2-backend" "$WORK/cpu/build/bin/ab-gpt2" "$WORK/cpu/bin/"
  stamp "ggml $pin for the CPU: gpt-2-backend and ab-gpt2 in $WORK/cpu/bin"
  exit 0
fi

# 1. carve: the library, carve-run and its interposer, installed with the CMake package.
if [ ! -f "$WORK/carve/build.ninja" ]; then
  meson setup "$WORK/carve" --buildtype=release -Dtests=false -Dbenchmarks=false -Dpython_package=disabled \
    -Dsm_arch="$ARCH" --prefix="$WORK/prefix" >"$WORK/carve-setup.log" 2>&1 || { cat "$WORK/carve-setup.log"; exit 1; }
fi
ninja -C "$WORK/carve" -j "$JOBS" >"$WORK/carve-build.log" 2>&1 || { tail -30 "$WORK/carve-build.log"; exit 1; }
meson install -C "$WORK/carve" --quiet >/dev/null
stamp "carve installed in $WORK/prefix"

# 2. ggml as it is, and its GPT-2 programs.
src="$WORK/ggml-src"
if [ "$(cat "$src/PINNED_COMMIT" 2>/dev/null)" != "$pin" ]; then
  rm -rf "$src" "$WORK/build"
  cp -r .vendor/ggml "$src"
elif [ -f "$src/include/ggml-cuda-allocator.h" ]; then
  # A tree patched by an earlier run: unpatched again, only ggml-cuda.cu recompiles.
  apply -R
fi
cmake -S integrations/ggml -B "$WORK/build" "${gen[@]}" -DGGML_SOURCE_DIR="$src" -DCMAKE_BUILD_TYPE=Release \
  -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DBUILD_SHARED_LIBS=OFF -DGGML_CUDA_NCCL=OFF \
  -DGGML_CUDA_FA="$FA" -DGGML_CUDA_GRAPHS=OFF -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF -DGGML_CARVE=OFF \
  -DCMAKE_PREFIX_PATH="$WORK/prefix" >"$WORK/ggml-configure.log" 2>&1 || { tail -40 "$WORK/ggml-configure.log"; exit 1; }
cmake --build "$WORK/build" -j "$JOBS" --target gpt-2-backend gpt-2-sched gpt-2-batched ab-gpt2 \
  >"$WORK/ggml-build.log" 2>&1 || { tail -40 "$WORK/ggml-build.log"; exit 1; }
mkdir -p "$WORK/bin"
for p in backend sched batched; do cp "$WORK/build/bin/gpt-2-$p" "$WORK/bin/"; done
cp "$WORK/build/bin/ab-gpt2" "$WORK/bin/"
stamp "ggml $pin (unmodified), its GPT-2 programs and ab-gpt2 in $WORK/bin"

# 3. The patch, the adapter, the programs linked through it.
apply
cmake -S integrations/ggml -B "$WORK/build" -DGGML_CARVE=ON -DGGML_CUDA_GRAPHS="$GRAPHS" \
  >>"$WORK/ggml-configure.log" 2>&1 || { tail -40 "$WORK/ggml-configure.log"; exit 1; }
cmake --build "$WORK/build" -j "$JOBS" --target gpt-2-backend-carve gpt-2-sched-carve gpt-2-batched-carve \
  ggml-carve-models ggml_no_vmm >>"$WORK/ggml-build.log" 2>&1 || { tail -40 "$WORK/ggml-build.log"; exit 1; }
for p in backend sched batched; do cp "$WORK/build/bin/gpt-2-$p-carve" "$WORK/bin/"; done
cp "$WORK/build/bin/ggml-carve-models" "$WORK/bin/"
cp "$(find "$WORK/build" -name libggml_no_vmm.so | head -1)" "$WORK/bin/"
echo "$GRAPHS" >"$WORK/bin/carve-graphs.txt"
stamp "ggml with ggml-carve.patch (CUDA graphs $GRAPHS), the adapter and the linked programs in $WORK/bin"
ls "$WORK/bin"
