#!/usr/bin/env bash
# Assembles nvcc 13 from PyPI wheels into ~/.cache/gpushim/cuda-13 for machines without /usr/local/cuda
# (CUDA-FACTS.md §1: the wheels lack the libcudart.so link name, which is added here).
set -euo pipefail
dest="$HOME/.cache/gpushim/cuda-13"
[ -x "$dest/bin/nvcc" ] && exit 0
venv="$HOME/.cache/gpushim/cuda-13-wheels"
python3 -m pip install --quiet --target "$venv" 'nvidia-cuda-nvcc==13.0.*' 'nvidia-cuda-runtime==13.0.*' \
    'nvidia-cuda-crt==13.0.*' 'nvidia-nvvm==13.0.*'
root="$venv/nvidia/cu13"
[ -d "$root" ] || root="$(dirname "$(find "$venv" -path '*/bin/nvcc' | head -1)")/.."
mkdir -p "$(dirname "$dest")"
ln -sfn "$(cd "$root" && pwd)" "$dest"
lib="$dest/lib"
[ -d "$dest/lib64" ] || ln -sfn lib "$dest/lib64"
[ -e "$lib/libcudart.so" ] || ln -sfn libcudart.so.13 "$lib/libcudart.so"
"$dest/bin/nvcc" --version | tail -1
