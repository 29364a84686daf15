#!/usr/bin/env bash
# `make gpu-check`: gpushim on a real NVIDIA GPU, from a fresh checkout, in a few minutes.
#   1. checks the driver and the GPU;  2. installs the Python packages (cuda-bindings matching the driver:
#   12.x for a CUDA 12 driver, 13.x for a CUDA 13 one) unless they are there;  3. builds the shim, the test
#   programs and bench/cuda_bench;  4. runs tests/e2e against `gpushim serve --backend cuda`;
#   5. runs bench/cuda_bench natively and through gpushim and prints a table.
# Environment: PYTHON (default python3), GPU_CHECK_OFFLINE=1 (never pip install), GPU_CHECK_OUT (where the
# logs go; default a temporary directory), GPU_CHECK_E2E_TIMEOUT (seconds, default 200), GPU_CHECK_TORCH=1
# (install PyTorch so the driver tests run torch add/sum/matmul through gpushim).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${GPU_CHECK_OUT:-$(mktemp -d -t gpushim-gpu-check.XXXXXX)}
mkdir -p "$OUT"
T0=$SECONDS
say() { printf '[gpu-check %3ds] %s\n' $((SECONDS - T0)) "$*"; }
die() { printf 'gpu-check: FAILED: %s\n' "$*" >&2; exit 1; }

# -- 1. driver and GPU ------------------------------------------------------------------------------------
"$PY" -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>/dev/null \
    || die "no NVIDIA driver here (libcuda.so.1 cannot be loaded)"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,mig.mode.current --format=csv,noheader \
        | sed 's/^/    /' || die "nvidia-smi cannot reach the GPU"
fi

# -- 2. Python packages -------------------------------------------------------------------------------------
pip_install() { "$PY" -m pip install --quiet --disable-pip-version-check "$@"; }
if [ "${GPU_CHECK_OFFLINE:-0}" != 1 ]; then
    "$PY" -c 'import pynvml' 2>/dev/null || pip_install nvidia-ml-py || die "cannot install nvidia-ml-py"
fi
CUDA_VERSION=$("$PY" -c 'import pynvml; pynvml.nvmlInit(); print(pynvml.nvmlSystemGetCudaDriverVersion())') \
    || die "NVML cannot reach the driver (is nvidia-ml-py installed?)"
if [ "$CUDA_VERSION" -ge 13000 ]; then PIN=">=13"; else PIN=">=12.4,<13"; fi
say "driver supports CUDA $((CUDA_VERSION / 1000)).$((CUDA_VERSION % 1000 / 10)): cuda-bindings$PIN"
have_packages() {
    "$PY" - "$PIN" <<'EOF' 2>/dev/null
import importlib.metadata as md, sys
import click, msgpack, numpy, pytest, cuda.bindings.driver  # noqa: F401
lo, hi = (13, 99) if sys.argv[1] == ">=13" else (12, 12)
major = int(md.version("cuda-bindings").split(".")[0])
sys.exit(0 if lo <= major <= hi else 1)
EOF
}
if ! have_packages; then
    [ "${GPU_CHECK_OFFLINE:-0}" != 1 ] || die "cuda-bindings$PIN, pytest, click, msgpack or numpy missing (offline)"
    say "installing gpushim[cuda,test] with cuda-bindings$PIN"
    pip_install -e '.[cuda,test]' "cuda-python$PIN" "cuda-bindings$PIN" || die "pip install failed"
    have_packages || die "cuda-bindings$PIN is still not importable after pip install"
fi

# PyTorch for tests/e2e/test_torch.py (add, sum, matmul and VMM-backed expandable segments through gpushim):
# about 5 GB, so opt-in
if [ "${GPU_CHECK_TORCH:-0}" = 1 ] && ! "$PY" -c 'import torch' 2>/dev/null; then
    say "installing torch (GPU_CHECK_TORCH=1)"
    pip_install torch || say "torch did not install: test_torch will skip"
fi

# -- 3. build -----------------------------------------------------------------------------------------------
NVCC=${NVCC:-}
for cand in /usr/local/cuda/bin/nvcc "$(command -v nvcc || true)" "$HOME/.cache/gpushim/cuda-13/bin/nvcc"; do
    if [ -z "$NVCC" ] && [ -n "$cand" ] && [ -x "$cand" ]; then NVCC=$cand; fi
done
if [ -z "$NVCC" ] && [ "${GPU_CHECK_OFFLINE:-0}" != 1 ]; then
    say "no nvcc: assembling CUDA 13.0 from PyPI (tools/install_nvcc.sh)"
    bash tools/install_nvcc.sh >"$OUT/install_nvcc.log" 2>&1 || die "tools/install_nvcc.sh failed: $OUT/install_nvcc.log"
    NVCC=$HOME/.cache/gpushim/cuda-13/bin/nvcc
fi
if [ -n "$NVCC" ]; then
    CUDA_HOME=$(cd "$(dirname "$NVCC")/.." && pwd)
    make -s CUDA_HOME="$CUDA_HOME" NVCC="$NVCC" shim programs >"$OUT/build.log" 2>&1 \
        || die "make shim programs failed: $OUT/build.log"
    mkdir -p bench/bin
    if [ ! -x bench/bin/cuda_bench ] || [ bench/cuda_bench.cu -nt bench/bin/cuda_bench ]; then
        "$NVCC" -O2 -cudart shared -o bench/bin/cuda_bench bench/cuda_bench.cu -Xlinker -rpath,"$CUDA_HOME/lib64" \
            >>"$OUT/build.log" 2>&1 || die "building bench/cuda_bench failed: $OUT/build.log"
    fi
else
    make -s shim >"$OUT/build.log" 2>&1 || die "make shim failed: $OUT/build.log"
    ls tests/programs/bin/* >/dev/null 2>&1 || die "no nvcc and no prebuilt tests/programs/bin"
fi
say "built the shim, the test programs and bench/cuda_bench (nvcc: ${NVCC:-none, prebuilt programs})"

# -- 4. the server offers the GPUs --------------------------------------------------------------------------
"$PY" -m gpushim devices --backend cuda | tee "$OUT/devices.txt" | sed 's/^/    /' \
    || die "gpushim devices --backend cuda failed"

# -- 5. the end-to-end suite against the cuda backend --------------------------------------------------------
say "tests/e2e against the cuda backend"
set +e
GPUSHIM_TEST_BACKEND=cuda timeout "${GPU_CHECK_E2E_TIMEOUT:-200}" "$PY" -m pytest tests/e2e -q -p no:cacheprovider \
    -o junit_family=xunit2 --junitxml="$OUT/e2e.xml" >"$OUT/e2e.log" 2>&1
E2E_RC=$?
set -e
tail -n 25 "$OUT/e2e.log" | sed 's/^/    /'

# -- 6. latency and bandwidth, natively and through gpushim ---------------------------------------------------
BENCH_ARGS=(-w skc -s 3000 -k 20000 -r 3 -z 67108864 -b 536870912 -H pageable)
say "bench/cuda_bench natively"
timeout 60 bench/bin/cuda_bench "${BENCH_ARGS[@]}" >"$OUT/native.jsonl" 2>"$OUT/native.err" \
    || say "native run failed: $OUT/native.err"
say "bench/cuda_bench through gpushim (embedded server, --backend cuda)"
timeout 120 "$PY" -m gpushim run --embedded --backend cuda -- bench/bin/cuda_bench "${BENCH_ARGS[@]}" \
    >"$OUT/gpushim.jsonl" 2>"$OUT/gpushim.err" || say "run through gpushim failed: $OUT/gpushim.err"

set +e
"$PY" tools/gpu_check_report.py "$OUT" "$E2E_RC"
STATUS=$?
say "done"
exit $STATUS
