"""The batched small-QR ``orgqr`` kernel (``_kernels.orgqr_small``).

Without a GPU the kernel's own CUDA source is compiled for the host with a C++20 shim (one
``std::thread`` per CUDA thread, ``__syncthreads`` a ``std::barrier``, blocks run one after the
other) and compared with LAPACK's ``orgqr`` / ``ungqr``: this checks the indexing, the complex
arithmetic, the thread partitioning and the grid-stride loop over the batch. The ``gpu`` tests
check ``Q`` from the real launch against numpy.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest
from scipy.linalg import lapack
from solver_testing import orthogonality, random_matrix, rel, tol

from nvmath.linalg._solvers import _dispatch, _kernels

_SHIM = r"""
#include <barrier>
#include <thread>
#include <vector>
struct nvmath_dim3 { long long x = 0, y = 0, z = 0; };
thread_local nvmath_dim3 threadIdx, blockIdx;
nvmath_dim3 blockDim, gridDim;
thread_local std::barrier<>* nvmath_bar = nullptr;
#define __global__
#define __align__(n) alignas(n)
#define __syncthreads() nvmath_bar->arrive_and_wait()
#include <atomic>
#define __shared__ static  // one block runs at a time: a static is that block's shared memory
template <typename T>
T atomicMin(T* p, T v) {
  std::atomic_ref<T> r(*p);
  T old = r.load();
  while (v < old && !r.compare_exchange_weak(old, v)) {
  }
  return old;
}
"""

_RUNNER = r"""
template <typename R, int C>
static void run(R* a, const R* tau, long long m, long long q, long long k, long long ld, long long stride,
                long long count, int threads, int blocks) {
  blockDim.x = threads;
  gridDim.x = blocks;
  for (int bk = 0; bk < blocks; ++bk) {
    std::barrier<> bar(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        threadIdx.x = t;
        blockIdx.x = bk;
        nvmath_bar = &bar;
        nvmath_orgqr_small<R, C>(a, tau, m, q, k, ld, stride, k, count);
      });
    for (auto& th : pool) th.join();
  }
}
#define NVMATH_RUN(name, R, C)                                                                     \
  extern "C" void name(void* a, const void* t, long long m, long long q, long long k, long long ld, \
                       long long s, long long c, int th, int b) {                                  \
    run<R, C>((R*)a, (const R*)t, m, q, k, ld, s, c, th, b);                                       \
  }
NVMATH_RUN(run_s, float, 1)
NVMATH_RUN(run_d, double, 1)
NVMATH_RUN(run_c, float, 2)
NVMATH_RUN(run_z, double, 2)

template <typename P, typename W>
static void run_piv(P* piv, int* info, W* x, long long n, long long nrhs, long long ld, long long stride,
                    int words, W nan, long long count, int threads, int blocks) {
  blockDim.x = threads;
  gridDim.x = blocks;
  for (int bk = 0; bk < blocks; ++bk) {
    std::barrier<> bar(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        threadIdx.x = t;
        blockIdx.x = bk;
        nvmath_bar = &bar;
        nvmath_check_pivots<P, W>(piv, info, x, n, nrhs, ld, stride, words, nan, count);
      });
    for (auto& th : pool) th.join();
  }
}
extern "C" void run_piv32_w8(void* p, int* i, void* x, long long n, long long r, long long ld, long long s,
                             int w, unsigned long long nan, long long c, int th, int b) {
  run_piv<int, unsigned long long>((int*)p, i, (unsigned long long*)x, n, r, ld, s, w, nan, c, th, b);
}

template <typename W>
static void run_blocks(int threads, int blocks, void (*body)(void*), void* arg) {
  blockDim.x = threads;
  gridDim.x = blocks;
  for (int bk = 0; bk < blocks; ++bk) {
    std::barrier<> bar(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        threadIdx.x = t;
        blockIdx.x = bk;
        nvmath_bar = &bar;
        body(arg);
      });
    for (auto& th : pool) th.join();
  }
}
struct nvmath_nf_args { void* x; int* flags; long long rows, per, stride, count; int words; unsigned long long a, b; };
template <typename W>
static void scan_body(void* p) {
  auto* q = (nvmath_nf_args*)p;
  nvmath_scan_nonfinite<W>((const W*)q->x, q->flags, q->per, q->stride, q->count, (W)q->a);
}
template <typename W>
static void fill_body(void* p) {
  auto* q = (nvmath_nf_args*)p;
  nvmath_fill_flagged<W>((W*)q->x, q->flags, q->rows, q->per, q->stride, q->count, q->words, (W)q->a, (W)q->b);
}
extern "C" void run_nonfinite(int fill, int word, void* x, int* flags, long long rows, long long per,
                              long long stride, long long count, int words, unsigned long long a,
                              unsigned long long b, int threads, int blocks) {
  nvmath_nf_args args{x, flags, rows, per, stride, count, words, a, b};
  if (word == 4)
    run_blocks<unsigned int>(threads, blocks, fill ? fill_body<unsigned int> : scan_body<unsigned int>, &args);
  else
    run_blocks<unsigned long long>(threads, blocks, fill ? fill_body<unsigned long long> : scan_body<unsigned long long>,
                                   &args);
}
"""

_PREFIX = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}


@pytest.fixture(scope="module")
def host_kernel(tmp_path_factory):
    """The kernel source built for the host (skips without g++ with C++20 <barrier>)."""
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("no g++ to build the kernel source for the host")
    folder = tmp_path_factory.mktemp("orgqr_host")
    src, lib = folder / "kernels.cpp", folder / "kernels.so"
    src.write_text(_SHIM + _kernels._SOURCE + _RUNNER)
    cmd = [compiler, "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-Wall", "-Werror", "-o", str(lib)]
    out = subprocess.run([*cmd, str(src)], capture_output=True, text=True, check=False)
    if out.returncode != 0 and "barrier" in out.stderr:
        pytest.skip(f"g++ lacks C++20 <barrier>: {out.stderr[:200]}")
    assert out.returncode == 0, out.stderr
    handle = ctypes.CDLL(str(lib))
    p, ll = ctypes.c_void_p, ctypes.c_longlong
    for letter in "sdcz":
        getattr(handle, f"run_{letter}").argtypes = [p, p, ll, ll, ll, ll, ll, ll, ctypes.c_int, ctypes.c_int]
    handle.run_piv32_w8.argtypes = [p, p, p, ll, ll, ll, ll, ctypes.c_int, ctypes.c_ulonglong, ll, ctypes.c_int, ctypes.c_int]
    i, u = ctypes.c_int, ctypes.c_ulonglong
    handle.run_nonfinite.argtypes = [i, i, p, p, ll, ll, ll, ll, i, u, u, i, i]
    return handle


@pytest.mark.parametrize("threads,blocks", [(128, 2), (3, 1), (1, 4)])
def test_host_build_of_the_pivot_check(host_kernel, threads, blocks):
    """The pivot check flags exactly the matrices with a pivot outside 1..n (info = -(1 + first bad
    position)), resets their pivots to the identity and their right-hand side to NaN; good matrices
    are untouched."""
    n, nrhs, count = 5, 2, 4
    piv = np.tile(np.arange(1, n + 1, dtype=np.int32), (count, 1))
    piv[0] = [2, 2, 3, 5, 5]  # valid (non-identity)
    piv[1, 3] = 0
    piv[2, 1], piv[2, 4] = 99, -5
    piv[3, 4] = 2**31 - 1
    good = piv[0].copy()
    x = np.ones((count, nrhs, n))  # column-major matrices: x[b, j, i] = X_b[i, j]
    info = np.zeros(count, dtype=np.int32)
    host_kernel.run_piv32_w8(
        piv.ctypes.data, info.ctypes.data, x.ctypes.data, n, nrhs, n, n * nrhs, 1, 0x7FF8000000000000, count,
        threads, blocks,
    )  # fmt: skip
    assert info.tolist() == [0, -4, -2, -5]
    assert piv[0].tolist() == good.tolist() and np.all(x[0] == 1)
    for b in (1, 2, 3):
        assert piv[b].tolist() == list(range(1, n + 1)) and np.all(np.isnan(x[b]))


def _geqrf_batch(a: np.ndarray, cols: int):
    """LAPACK geqrf of each matrix, laid out like the plan's buffer (column-major, ``cols`` columns)."""
    count, m, n = a.shape
    letter = _PREFIX[a.dtype.name]
    work = np.full((count, cols, m), 7.5, dtype=a.dtype)  # work[b, j, i] = A_b[i, j]; junk columns
    tau = np.zeros((count, min(m, n)), dtype=a.dtype)
    for b in range(count):
        qr, tau[b], _, info = getattr(lapack, f"{letter}geqrf")(a[b])
        assert info == 0
        work[b, :n, :] = qr.T
    return work, tau


def _lapack_q(work: np.ndarray, tau: np.ndarray, qcols: int) -> np.ndarray:
    letter = _PREFIX[work.dtype.name]
    fn = getattr(lapack, f"{letter}ungqr" if letter in "cz" else f"{letter}orgqr")
    k = tau.shape[1]
    out = []
    for b in range(work.shape[0]):
        start = np.zeros((work.shape[2], qcols), dtype=work.dtype)
        start[:, :k] = work[b, :k, :].T
        q, _, info = fn(start, tau[b])
        assert info == 0
        out.append(q)
    return np.stack(out)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize(
    "m,n,mode",
    [(8, 8, "reduced"), (12, 5, "reduced"), (12, 5, "complete"), (1, 1, "reduced"), (5, 1, "complete"),
     (33, 32, "reduced"), (64, 64, "reduced"), (64, 20, "complete")],
)  # fmt: skip
@pytest.mark.parametrize("threads,blocks", [(64, 2), (7, 1), (1, 3)])
def test_host_build_of_the_kernel_matches_lapack(host_kernel, rng, dtype, m, n, mode, threads, blocks):
    """Q of org2r / ung2r, for 3 matrices on fewer or more blocks and any number of threads."""
    k = min(m, n)
    qcols = m if mode == "complete" else k
    cols = m if (mode == "complete" and m > n) else n
    a = random_matrix(rng, (3, m, n), dtype)
    work, tau = _geqrf_batch(a, cols)
    expected = _lapack_q(work, tau, qcols)
    getattr(host_kernel, f"run_{_PREFIX[dtype]}")(
        work.ctypes.data, tau.ctypes.data, m, qcols, k, m, m * cols, 3, threads, blocks
    )
    q = np.swapaxes(work[:, :qcols, :], 1, 2)
    assert rel(q, expected) < tol(dtype, m)
    assert orthogonality(q) < tol(dtype, m)


# ------------------------------------------------------------------------------------ GPU
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize(
    "shape,mode", [((300, 32, 32), "reduced"), ((50, 40, 12), "complete"), ((7, 64, 64), "reduced")]
)
def test_gpu_batched_qr_q_kernel(gpu_space, solvers, rng, monkeypatch, dtype, shape, mode):
    """geqrfBatched + the Q kernel: orthonormal Q, Q R = A, and the same Q as the orgqr loop."""
    a = random_matrix(rng, shape, dtype)
    m = shape[-2]
    opts = {"algorithm": "batched"}
    with solvers.QR(gpu_space.put(a), mode=mode, options=opts, **gpu_space.kwargs()) as qr:
        qr.plan()
        assert qr._gpu.q_kernel
        q, r = (gpu_space.get(t) for t in qr.execute())
    assert orthogonality(q) < tol(dtype, m)
    assert rel(q @ r, a) < tol(dtype, m)
    monkeypatch.setitem(_dispatch.LIMITS, "orgqr_kernel", 0)  # the orgqr loop, for comparison
    with solvers.QR(gpu_space.put(a), mode=mode, options=opts, **gpu_space.kwargs()) as qr:
        qr.plan()
        assert not qr._gpu.q_kernel
        q2, r2 = (gpu_space.get(t) for t in qr.execute())
    assert rel(q, q2) < tol(dtype, m) and rel(r, r2) < tol(dtype, m)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("threads,blocks", [(64, 2), (3, 1), (1, 5)])
def test_host_build_of_the_nonfinite_kernels(host_kernel, dtype, threads, blocks):
    """scan_nonfinite flags exactly the matrices holding NaN/Inf in their first columns (not in the
    columns beyond, which a working buffer may hold uninitialized); fill_flagged writes the identity
    stand-in (or NaN) over flagged matrices only and leaves the rest untouched."""
    word, nan, words = _kernels._NAN_WORDS[dtype]
    rows, cols, alloc, count = 3, 4, 5, 5
    rng = np.random.default_rng(3)
    a = rng.standard_normal((count, alloc, rows)).astype(dtype)  # column-major blocks: (col, row)
    a[:, cols:, :] = np.nan  # beyond the scanned columns: must not flag
    a[1, 2, 0] = np.nan
    a[3, 0, 2] = np.inf if dtype.startswith("float") else complex(0, -np.inf)
    before = a.copy()
    flags = np.zeros(count, dtype=np.int32)
    per, stride = rows * cols * words, rows * alloc * words
    exponent = 0x7F800000 if word == 4 else 0x7FF0000000000000
    ptr, fptr = a.ctypes.data, flags.ctypes.data
    host_kernel.run_nonfinite(0, word, ptr, fptr, rows, per, stride, count, words, exponent, 0, threads, blocks)
    assert flags.tolist() == [0, 1, 0, 1, 0]
    one = 0x3F800000 if word == 4 else 0x3FF0000000000000
    host_kernel.run_nonfinite(1, word, ptr, fptr, rows, per, stride, count, words, one, 0, threads, blocks)
    for b in range(count):
        if flags[b]:
            np.testing.assert_array_equal(a[b, :cols, :].T, np.eye(rows, cols))
        else:
            np.testing.assert_array_equal(a[b, :cols], before[b, :cols])
        np.testing.assert_array_equal(a[b, cols:], before[b, cols:])  # beyond per: untouched
    host_kernel.run_nonfinite(1, word, ptr, fptr, rows, stride, stride, count, words, nan, nan, threads, blocks)
    assert np.isnan(a[[1, 3]]).all() and np.isfinite(a[[0, 2, 4], :cols]).all()
