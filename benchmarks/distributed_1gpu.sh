#!/usr/bin/env bash
# The one-GPU table of the distributed suite (issue 20), on the H200 machine, from the repository root:
#
#     OUT=/some/dir bash benchmarks/distributed_1gpu.sh
#
# runs `python -m benchmarks distributed --quick` under `torchrun --standalone --nproc-per-node 1`:
# nvmath (cuFFTMp / cuBLASMp at one rank), nvmath-python 1.0's nvmath.distributed on the same engine
# libraries (its own process), our single-GPU cuFFT / cuBLASLt (nvmath-1gpu: the efficiency base) and
# torch DTensor matmul. Writes $OUT/distributed/{distributed.json,.md,.png,run.log,env.txt}; prints the
# table. One GPU measures no scaling: see benchmarks/results/*-distributed-1gpu/README.md.
#
# Environment (all optional):
#   ENG    the engines installed with `pip install --target`: nvidia/{nccl,cublasmp,cufftmp} (/tmp/eng).
#          NVSHMEM is the image's (torch's nvidia-nvshmem-cu13 wheel).
#   NVP    nvmath-python's --target directory (/tmp/nvp); made from WHL when missing.
#   WHL    folder of nvmath_python-1.0.0-*.whl and nccl4py-0.3.*.whl (.whl). nvmath-python's NCCL
#          backend (its GEMMs) needs nccl4py; without it those rows skip, saying so.
#   CASES  comma-separated case globs instead of the --quick selection (then normal iteration counts).
#   LIMIT  seconds for the whole torchrun (130); nvmath-python's process is killed in time for the
#          run to write what it measured (NVMATH_BENCH_DEADLINE).
set -u
OUT=${OUT:-/tmp/distributed-1gpu}
ENG=${ENG:-/tmp/eng}
NVP=${NVP:-/tmp/nvp}
WHL=${WHL:-.whl}
LIMIT=${LIMIT:-130}
dest=$OUT/distributed
mkdir -p "$dest"
export NVSHMEM_REMOTE_TRANSPORT=none NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
# a 512^3 C2C slab (1 GiB) plus cuFFTMp's scratch (up to 2 more) on the symmetric heap, per process
export NVSHMEM_SYMMETRIC_SIZE=${NVSHMEM_SYMMETRIC_SIZE:-5G}
export PYTHONUNBUFFERED=1 NVMATH_BENCH_TRACEBACK=1 NVMATH_BENCH_PEER_TIMEOUT=${NVMATH_BENCH_PEER_TIMEOUT:-75}

{
    echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown); $(date -u)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    nvidia-smi topo -m
    for lib in nccl/lib/libnccl.so.2 cublasmp/cu13/lib/libcublasmp.so.0 cufftmp/cu13/lib/libcufftMp.so.12; do
        if [ -f "$ENG/nvidia/$lib" ]; then echo "engine: $ENG/nvidia/$lib"; else echo "engine MISSING: $ENG/nvidia/$lib"; fi
    done
    if [ ! -f "$NVP/nvmath/__init__.py" ]; then
        python3 -m pip install -q --no-index --no-deps --target "$NVP" "$WHL"/nvmath_python-1.0.0-*.whl
    fi
    if [ ! -d "$NVP/nccl/core" ]; then
        ls "$WHL"/nccl4py-0.3*.whl >/dev/null 2>&1 && python3 -m pip install -q --no-index --no-deps --target "$NVP" "$WHL"/nccl4py-0.3*.whl
    fi
    ls -d "$NVP"/nvmath "$NVP"/nccl/core 2>&1
} > "$dest/env.txt" 2>&1

# Our nvmath finds the engines on sys.path (PYTHONPATH); nvmath-python's cuda.pathfinder looks in
# site-packages, then asks the dynamic loader: LD_LIBRARY_PATH gives it the same files. NCCL 2.32 is
# preloaded so that torch, nccl4py and cuBLASMp all use it (the image's 2.28 lacks what cuBLASMp calls).
export PYTHONPATH=$ENG:.
export LD_LIBRARY_PATH=$ENG/nvidia/cufftmp/cu13/lib:$ENG/nvidia/cublasmp/cu13/lib:$ENG/nvidia/nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -f "$ENG/nvidia/nccl/lib/libnccl.so.2" ] && export LD_PRELOAD=$ENG/nvidia/nccl/lib/libnccl.so.2
python3 - >> "$dest/env.txt" 2>&1 <<'PY'
import ctypes, importlib.metadata as md
for dist in ("torch", "cuda-core", "cuda-bindings", "cuda-pathfinder", "nvidia-nvshmem-cu13", "nvidia-cublas"):
    try:
        print(dist, md.version(dist))
    except md.PackageNotFoundError:
        print(dist, "not installed")
try:
    v = ctypes.c_int()
    ctypes.CDLL("libnccl.so.2").ncclGetVersion(ctypes.byref(v))
    print("NCCL loaded", v.value)
except OSError as exc:
    print("NCCL loaded: none:", exc)
PY

if [ -n "${CASES:-}" ]; then select=(--cases "$CASES"); else select=(--quick); fi
export NVMATH_BENCH_DEADLINE=$(( $(date +%s) + LIMIT - 10 ))
timeout -k 15 "$LIMIT" torchrun --standalone --nproc-per-node 1 -m benchmarks distributed "${select[@]}" \
    --nvmath-python-path "$NVP" --out "$dest" --plain > "$dest/run.log" 2>&1
rc=$?
echo "torchrun exit $rc (124: killed at $LIMIT s; the rows measured before are in distributed.json)" | tee -a "$dest/env.txt"
grep -E "^engine|nccl/core|NCCL loaded|No such|ERROR" "$dest/env.txt"
[ -f "$dest/distributed.md" ] && cat "$dest/distributed.md"
if [ "$rc" != 0 ] || [ ! -f "$dest/distributed.md" ]; then tail -c 4000 "$dest/run.log"; fi
