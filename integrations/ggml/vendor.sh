#!/usr/bin/env bash
# vendor.sh — put ggml's source at the pinned commit into .vendor/ggml (an
# ignored folder, carried to the GPU machine, which cannot download).
#
# Only what building ggml's CPU and CUDA backends and its GPT-2 programs
# needs: the build files, the public headers, src/ (its top-level files,
# ggml-cpu/, ggml-cuda/), examples/gpt-2 with the examples' common code and
# the converter. Reads a local clone of github.com/ggml-org/ggml (the git
# directory of a fetched mirror, or any clone holding the commit).
#
# Usage: integrations/ggml/vendor.sh [GGML_GIT_DIR] [DEST]
#   GGML_GIT_DIR  default /work/.mirror/ggml-org+ggml/repo
#   DEST          default .vendor/ggml (relative to the repository root)
# Prints the pinned commit and the size; exits 1 when the commit is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
PIN=$(cat integrations/ggml/PINNED_COMMIT)
GIT_DIR_IN=${1:-/work/.mirror/ggml-org+ggml/repo}
DEST=${2:-.vendor/ggml}

if ! git --git-dir="$GIT_DIR_IN" cat-file -e "$PIN^{commit}" 2>/dev/null; then
  echo "vendor.sh: commit $PIN is not in $GIT_DIR_IN (fetch github:ggml-org/ggml first)" >&2
  exit 1
fi
top_files=$(git --git-dir="$GIT_DIR_IN" ls-tree --name-only "$PIN" src/ |
            while read -r p; do
              [ "$(git --git-dir="$GIT_DIR_IN" cat-file -t "$PIN:$p")" = blob ] && echo "$p"
            done)
paths=(CMakeLists.txt LICENSE ggml.pc.in cmake include src/ggml-cpu src/ggml-cuda
       examples/common.cpp examples/common.h examples/common-ggml.cpp examples/common-ggml.h examples/gpt-2
       $top_files)
rm -rf "$DEST"
mkdir -p "$DEST"
git --git-dir="$GIT_DIR_IN" archive --format=tar "$PIN" -- "${paths[@]}" | tar -x -C "$DEST"
echo "$PIN" > "$DEST/PINNED_COMMIT"
case "$DEST" in
  .vendor/*) grep -qx '/.vendor/' .gitignore || echo "vendor.sh: note: .vendor/ is not in .gitignore" >&2 ;;
esac
echo "ggml $PIN in $DEST: $(du -sh "$DEST" | cut -f1), $(find "$DEST" -type f | wc -l) files"
