"""Small device kernels the solvers need and no library offers, compiled with NVRTC on first use.

* ``zero_triangle``: zero the strictly lower (or upper) triangle of a batch of column-major
  matrices (Cholesky factors and QR's ``R`` come back from cuSOLVER with the other triangle holding
  the input or the Householder vectors).
* ``fill_identity``: write identity matrices (the right-hand side of an inverse on the looped path).
* ``scan_nonfinite`` / ``fill_flagged``: flag the matrices of a batch that hold NaN or Inf (one
  grid-stride pass over the input) and overwrite flagged matrices (with an identity stand-in before
  the library call, with NaN in the results after it) -- the solvers' non-finite policy.
* ``orgqr_small``: form ``Q`` from the Householder reflectors of a batch of small QR factorizations
  (cuBLAS ``geqrfBatched``), one thread block per matrix -- instead of one ``orgqr`` call per matrix.

Compiled once per device through :mod:`nvmath._internal.nvrtc` (like nvmath's strided-copy kernel)
and launched on the caller's stream. Nothing is compiled or loaded at import time.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from nvmath._internal import nvrtc, streams
from nvmath._internal.streams import StreamHandle

__all__ = [
    "CHECK_PIVOTS_THREADS",
    "ORGQR_THREADS",
    "check_pivots",
    "fill_flagged",
    "fill_identity",
    "orgqr_small",
    "scan_nonfinite",
    "zero_triangle",
]

logger = logging.getLogger(__name__)

_TYPES = {4: "unsigned int", 8: "unsigned long long", 16: "nvmath_solver_b16"}

_SOURCE = r"""
struct __align__(16) nvmath_solver_b16 { unsigned long long x, y; };

template <typename T>
__global__ void nvmath_zero_triangle(T* a, long long rows, long long cols, long long ld, long long stride,
                                     long long count, int zero_lower) {
  const long long per = rows * cols;
  const long long total = per * count;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (long long)gridDim.x * blockDim.x) {
    long long b = t / per, r = t % per;
    long long j = r / rows, i = r % rows;
    if (zero_lower ? (i > j) : (i < j)) {
      a[b * stride + j * ld + i] = T{};
    }
  }
}

// Q = H(0) H(1) ... H(k-1) of LAPACK's org2r / ung2r, in place, for matrix b of a batch (one block per
// matrix, grid-stride over the batch). Column i < k holds v_i below the diagonal (v_i[i] = 1 implied,
// zero above); H(i) = I - tau_i v_i v_i^H. Columns k..qcols-1 start as identity columns; the
// reflectors are applied backwards, H(i) to columns i+1..qcols-1 (one thread per column), then
// column i becomes H(i) e_i. C = 2 for complex (interleaved real, imaginary parts of type R).
template <typename R, int C>
__global__ void nvmath_orgqr_small(R* a, const R* tau, long long m, long long qcols, long long k,
                                   long long ld, long long stride, long long tau_stride, long long count) {
  const long long tid = threadIdx.x, nt = blockDim.x;
  for (long long b = blockIdx.x; b < count; b += gridDim.x) {
    R* A = a + b * stride * C;
    const R* T = tau + b * tau_stride * C;
    for (long long e = tid; e < m * (qcols - k); e += nt) {
      const long long j = k + e / m, r = e % m;
      R* p = A + (j * ld + r) * C;
      p[0] = (r == j) ? R(1) : R(0);
      if (C == 2) p[C - 1] = R(0);
    }
    __syncthreads();
    for (long long i = k - 1; i >= 0; --i) {
      const R tr = T[i * C], ti = (C == 2) ? T[i * C + C - 1] : R(0);
      const R* v = A + i * ld * C;
      for (long long j = i + 1 + tid; j < qcols; j += nt) {
        R* c = A + j * ld * C;
        R sr = c[i * C], si = (C == 2) ? c[i * C + C - 1] : R(0);  // s = v^H c, with v[i] = 1
        for (long long r = i + 1; r < m; ++r) {
          const R vr = v[r * C], vi = (C == 2) ? v[r * C + C - 1] : R(0);
          const R cr = c[r * C], ci = (C == 2) ? c[r * C + C - 1] : R(0);
          sr += vr * cr + vi * ci;
          si += vr * ci - vi * cr;
        }
        const R wr = tr * sr - ti * si, wi = tr * si + ti * sr;  // w = tau s; c -= v w
        c[i * C] -= wr;
        if (C == 2) c[i * C + C - 1] -= wi;
        for (long long r = i + 1; r < m; ++r) {
          const R vr = v[r * C], vi = (C == 2) ? v[r * C + C - 1] : R(0);
          c[r * C] -= vr * wr - vi * wi;
          if (C == 2) c[r * C + C - 1] -= vr * wi + vi * wr;
        }
      }
      __syncthreads();
      R* col = A + i * ld * C;  // column i = H(i) e_i: 0 above, 1 - tau on, -tau v below the diagonal
      for (long long r = tid; r < m; r += nt) {
        R* p = col + r * C;
        const R vr = p[0], vi = (C == 2) ? p[C - 1] : R(0);
        R xr = R(0), xi = R(0);
        if (r == i) {
          xr = R(1) - tr;
          xi = -ti;
        } else if (r > i) {
          xr = -(tr * vr - ti * vi);
          xi = -(tr * vi + ti * vr);
        }
        p[0] = xr;
        if (C == 2) p[C - 1] = xi;
      }
      __syncthreads();
    }
  }
}

// Pivot check before getrs (one block per matrix, grid-stride over the batch): a matrix whose pivots are
// not all in 1..n gets info = -(1 + its first bad position) (negative: never a LAPACK getrf value),
// identity pivots (so getrs reads only inside the matrix) and a NaN right-hand side (so its solution is
// NaN, never a plausible wrong answer). W is the 32- or 64-bit word of the element type; nan is that
// word's quiet NaN; words = words per element (2 for complex).
template <typename P, typename W>
__global__ void nvmath_check_pivots(P* piv, int* info, W* x, long long n, long long nrhs, long long ld,
                                    long long stride, int words, W nan, long long count) {
  __shared__ long long first_bad;
  for (long long b = blockIdx.x; b < count; b += gridDim.x) {
    if (threadIdx.x == 0) first_bad = n;
    __syncthreads();
    P* p = piv + b * n;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
      if (p[i] < 1 || p[i] > n) atomicMin((unsigned long long*)&first_bad, (unsigned long long)i);
    }
    __syncthreads();
    if (first_bad < n) {
      for (long long i = threadIdx.x; i < n; i += blockDim.x) p[i] = (P)(i + 1);
      W* xb = x + b * stride * words;
      for (long long e = threadIdx.x; e < n * nrhs * words; e += blockDim.x) {
        long long j = e / (n * words), r = e % (n * words);
        xb[j * ld * words + r] = nan;
      }
      if (threadIdx.x == 0) info[b] = (int)(-1 - first_bad);
    }
    __syncthreads();
  }
}

// flags[b] = 1 when block b (the first per words at a + b * stride) holds a NaN or Inf: a word of a float
// (W = unsigned int) or double (unsigned long long) whose exponent bits (`exponent`) are all ones. flags
// are zeroed first; every writer writes 1, so the race is benign.
template <typename W>
__global__ void nvmath_scan_nonfinite(const W* a, int* flags, long long per, long long stride, long long count,
                                      W exponent) {
  const long long total = per * count;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (long long)gridDim.x * blockDim.x) {
    const long long b = t / per;
    if ((a[b * stride + t % per] & exponent) == exponent) flags[b] = 1;
  }
}

// Overwrite every flagged block b (the first per words at x + b * stride) of column-major matrices with
// `rows` rows: word 0 of a diagonal element gets `diag`, every other word `off` (identity: 1 and 0; NaN:
// both NaN). One thread block per matrix (grid-stride over the batch): a block whose flag is clear reads
// one int and exits, so the common all-finite case costs a launch.
template <typename W>
__global__ void nvmath_fill_flagged(W* x, const int* flags, long long rows, long long per, long long stride,
                                    long long count, int words, W diag, W off) {
  for (long long b = blockIdx.x; b < count; b += gridDim.x) {
    if (!flags[b]) continue;
    W* xb = x + b * stride;
    for (long long r = threadIdx.x; r < per; r += blockDim.x) {
      const long long e = r / words, k = r % words;
      xb[r] = (k == 0 && e % rows == e / rows) ? diag : off;
    }
  }
}

__global__ void nvmath_fill_identity(unsigned int* a, long long n, long long stride_words, long long count,
                                     int words, unsigned int w0, unsigned int w1) {
  const long long per = n * n * words;
  const long long total = per * count;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (long long)gridDim.x * blockDim.x) {
    long long b = t / per, r = t % per;
    long long e = r / words, k = r % words;
    long long j = e / n, i = e % n;
    unsigned int v = 0u;
    if (i == j) v = (k == 0) ? w0 : ((k == 1) ? w1 : 0u);
    a[b * stride_words + r] = v;
  }
}
"""

_NAMES = {f"zero{size}": f"nvmath_zero_triangle<{ctype}>" for size, ctype in _TYPES.items()}
_NAMES["eye"] = "nvmath_fill_identity"
_ORGQR = {
    "float32": "nvmath_orgqr_small<float, 1>",
    "float64": "nvmath_orgqr_small<double, 1>",
    "complex64": "nvmath_orgqr_small<float, 2>",
    "complex128": "nvmath_orgqr_small<double, 2>",
}
_NAMES.update(
    {
        f"pivots{p}_{w}": f"nvmath_check_pivots<{pt}, {wt}>"
        for p, pt in ((4, "int"), (8, "long long"))
        for w, wt in ((4, "unsigned int"), (8, "unsigned long long"))
    }
)
_NAMES.update({f"orgqr_{dtype}": name for dtype, name in _ORGQR.items()})
_NAMES.update(
    {"scan4": "nvmath_scan_nonfinite<unsigned int>", "scan8": "nvmath_scan_nonfinite<unsigned long long>"}
)
_NAMES.update(
    {"flag4": "nvmath_fill_flagged<unsigned int>", "flag8": "nvmath_fill_flagged<unsigned long long>"}
)
# The quiet NaN of the 32- and 64-bit words of each dtype, and the words per element.
_NAN_WORDS = {
    "float32": (4, 0x7FC00000, 1),
    "float64": (8, 0x7FF8000000000000, 1),
    "complex64": (4, 0x7FC00000, 2),
    "complex128": (8, 0x7FF8000000000000, 2),
}
CHECK_PIVOTS_THREADS = 128
FILL_FLAGGED_THREADS = 256

ORGQR_THREADS = 64
"""Threads per block of :func:`orgqr_small` (one column of ``Q`` per thread up to 64 columns)."""


def _kernels(device_id: int) -> dict[str, Any]:
    return nvrtc.compiled_kernels(_SOURCE, _NAMES, device_id, what="solver kernels", logger=logger)


def zero_triangle(
    ptr: int,
    *,
    rows: int,
    cols: int,
    ld: int,
    stride: int,
    count: int,
    itemsize: int,
    zero_lower: bool,
    device_id: int,
    stream: StreamHandle,
) -> None:
    """Zero the strictly lower (``zero_lower``) or strictly upper triangle of ``count`` matrices.

    Matrix ``b`` is column-major at ``ptr + b * stride * itemsize`` with leading dimension ``ld``.
    """
    total = rows * cols * count
    if total == 0:
        return
    kernel = _kernels(device_id)[f"zero{itemsize}"]
    args = (
        np.uintp(ptr),
        np.int64(rows),
        np.int64(cols),
        np.int64(ld),
        np.int64(stride),
        np.int64(count),
        np.int32(1 if zero_lower else 0),
    )
    nvrtc.launch_1d(kernel, total, stream, *args)


# The 32-bit words of 1 in each dtype (little endian; the imaginary part is zero).
_ONE_WORDS = {
    "float32": (1, 0x3F800000, 0),
    "float64": (2, 0x00000000, 0x3FF00000),
    "complex64": (2, 0x3F800000, 0),
    "complex128": (4, 0x00000000, 0x3FF00000),
}


def fill_identity(
    ptr: int, *, n: int, stride: int, count: int, dtype: str, device_id: int, stream: StreamHandle
) -> None:
    """Write ``count`` identity matrices of order ``n`` (column-major, ``ld = n``) at ``ptr``.

    Matrix ``b`` starts at element ``b * stride``.
    """
    words, w0, w1 = _ONE_WORDS[dtype]
    kernel = _kernels(device_id)["eye"]
    args = (
        np.uintp(ptr),
        np.int64(n),
        np.int64(stride * words),
        np.int64(count),
        np.int32(words),
        np.uint32(w0),
        np.uint32(w1),
    )
    nvrtc.launch_1d(kernel, n * n * count * words, stream, *args)


def orgqr_small(
    ptr: int,
    tau: int,
    *,
    m: int,
    qcols: int,
    k: int,
    ld: int,
    stride: int,
    count: int,
    dtype: str,
    device_id: int,
    stream: StreamHandle,
) -> None:
    """Overwrite ``count`` QR factorizations (LAPACK ``geqrf`` layout) with the first ``qcols`` columns of Q.

    Matrix ``b`` is column-major at element ``b * stride`` of ``ptr`` (leading dimension ``ld``), holding
    ``k`` Householder vectors; its ``k`` scalars ``tau`` are at element ``b * k`` of ``tau``. Meant for
    small matrices (the work of one matrix runs in one thread block); ``k <= qcols <= m``.
    """
    from cuda.core import LaunchConfig, launch

    if count == 0 or m == 0 or qcols == 0:
        return
    kernel = _kernels(device_id)[f"orgqr_{dtype}"]
    args = (
        np.uintp(ptr),
        np.uintp(tau),
        np.int64(m),
        np.int64(qcols),
        np.int64(k),
        np.int64(ld),
        np.int64(stride),
        np.int64(k),
        np.int64(count),
    )
    config = LaunchConfig(
        grid=min(count, nvrtc.MAX_BLOCKS), block=ORGQR_THREADS
    )  # grid-stride over the batch
    with streams.stream_ctx(stream):
        launch(stream.core, config, kernel, *args)


def check_pivots(
    piv: int,
    info: int,
    x: int,
    *,
    piv_size: int,
    n: int,
    nrhs: int,
    ld: int,
    stride: int,
    count: int,
    dtype: str,
    device_id: int,
    stream: StreamHandle,
) -> None:
    """Check ``count`` pivot vectors (1..n) on the device, without a host synchronization.

    A matrix with a bad pivot gets ``info[b] = -(1 + first bad position)``, identity pivots and a NaN
    right-hand side (``x``: column-major, leading dimension ``ld``, matrix ``b`` at element
    ``b * stride``), so the solve that follows stays in bounds and yields NaN for it.
    """
    from cuda.core import LaunchConfig, launch

    if count == 0 or n == 0:
        return
    word, nan, words = _NAN_WORDS[dtype]
    kernel = _kernels(device_id)[f"pivots{piv_size}_{word}"]
    word_type = np.uint32 if word == 4 else np.uint64
    args = (
        np.uintp(piv),
        np.uintp(info),
        np.uintp(x),
        np.int64(n),
        np.int64(nrhs),
        np.int64(ld),
        np.int64(stride),
        np.int32(words),
        word_type(nan),
        np.int64(count),
    )
    config = LaunchConfig(grid=min(count, nvrtc.MAX_BLOCKS), block=CHECK_PIVOTS_THREADS)
    with streams.stream_ctx(stream):
        launch(stream.core, config, kernel, *args)


def scan_nonfinite(
    ptr: int, flags: int, *, per: int, stride: int, count: int, dtype: str, device_id: int, stream: StreamHandle
) -> None:
    """Set ``flags[b] = 1`` (int32, zeroed by the caller) for each of ``count`` blocks (the first ``per``
    elements at element ``b * stride`` of ``ptr``) holding a NaN or Inf (one grid-stride read, no sync)."""
    word, _, words = _NAN_WORDS[dtype]
    total = per * words * count
    if total == 0:
        return
    kernel = _kernels(device_id)[f"scan{word}"]
    exponent = np.uint32(0x7F800000) if word == 4 else np.uint64(0x7FF0000000000000)
    args = (np.uintp(ptr), np.uintp(flags), np.int64(per * words), np.int64(stride * words), np.int64(count))
    nvrtc.launch_1d(kernel, total, stream, *args, exponent)


def fill_flagged(
    ptr: int,
    flags: int,
    *,
    rows: int,
    per: int,
    stride: int,
    count: int,
    dtype: str,
    identity: bool,
    device_id: int,
    stream: StreamHandle,
) -> None:
    """Overwrite each flagged block (``flags[b] != 0``; the first ``per`` elements at element
    ``b * stride`` of ``ptr``): with identity matrices of ``rows`` rows (column-major) or with NaN."""
    from cuda.core import LaunchConfig, launch

    word, nan, words = _NAN_WORDS[dtype]
    total = per * words * count
    if total == 0:
        return
    one = {4: 0x3F800000, 8: 0x3FF0000000000000}[word]
    diag, off = (one, 0) if identity else (nan, nan)
    word_type = np.uint32 if word == 4 else np.uint64
    kernel = _kernels(device_id)[f"flag{word}"]
    args = (
        np.uintp(ptr),
        np.uintp(flags),
        np.int64(max(rows, 1)),
        np.int64(per * words),
        np.int64(stride * words),
        np.int64(count),
    )
    config = LaunchConfig(grid=min(count, nvrtc.MAX_BLOCKS), block=FILL_FLAGGED_THREADS)
    with streams.stream_ctx(stream):
        launch(stream.core, config, kernel, *args, np.int32(words), word_type(diag), word_type(off))
