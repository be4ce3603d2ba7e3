#!/usr/bin/env bash
# Build carve and run its demo: on the GPU when a CUDA device is present,
# otherwise on the virtual backend. Installs meson and ninja when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
need_apt=()
command -v meson >/dev/null || need_apt+=(meson)
command -v ninja >/dev/null || need_apt+=(ninja-build)
command -v cc >/dev/null || need_apt+=(gcc)
if [ ${#need_apt[@]} -gt 0 ]; then
  sudo_cmd=""; [ "$(id -u)" != 0 ] && sudo_cmd=sudo
  $sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH
[ -f build-release/build.ninja ] || meson setup build-release --buildtype=release >/dev/null
ninja -C build-release examples/carve-demo >/dev/null
exec ./build-release/examples/carve-demo "$@"
