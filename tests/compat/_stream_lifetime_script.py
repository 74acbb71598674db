"""Run FFTs and matmuls on streams that are destroyed between calls (see test_compat_streams_gpu.py).

Usage: ``python _stream_lifetime_script.py <cupy|torch|torch-external|core> <blocking|nonblocking>``.
Exits 0 when every result matched numpy; a use of a destroyed stream crashes the process instead.
"""

from __future__ import annotations

import gc
import sys

import numpy as np

import nvmath.fft as nf
import nvmath.linalg as la
from nvmath.fft import FFT
from nvmath.linalg import advanced

KIND, MODE = sys.argv[1], sys.argv[2]
NONBLOCKING = MODE == "nonblocking"
rng = np.random.default_rng(7)
HOST = (rng.standard_normal((4, 64)) + 1j * rng.standard_normal((4, 64)) + 0.1).astype(np.complex64)
A = rng.standard_normal((32, 16)).astype(np.float32) + 0.1
B = rng.standard_normal((16, 8)).astype(np.float32) + 0.1
S = (rng.standard_normal((16, 16)) + 16 * np.eye(16)).astype(np.float32)  # a well-conditioned system
R = rng.standard_normal((16, 3)).astype(np.float32)


def _driver_stream():
    from cuda.bindings import driver as drv

    flags = drv.CUstream_flags.CU_STREAM_NON_BLOCKING if NONBLOCKING else drv.CUstream_flags.CU_STREAM_DEFAULT
    err, s = drv.cuStreamCreate(flags)
    assert int(err) == 0, err
    return s


if KIND == "cupy":
    import cupy as xp

    def make():
        return xp.cuda.Stream(non_blocking=NONBLOCKING)

    def destroy(s):
        del s
        gc.collect()

    def dev(h):
        return xp.asarray(h)

    def host(x):
        return x.get()

    def sync():
        xp.cuda.Device().synchronize()

    def current(s):
        return s
else:
    import torch

    torch.cuda.init()

    def dev(h):
        return torch.from_numpy(h).cuda()

    def host(x):
        return x.cpu().numpy()

    def sync():
        torch.cuda.synchronize()

    if KIND == "torch":

        def make():
            return torch.cuda.Stream()

        def destroy(s):
            del s
            gc.collect()

        def current(s):
            return torch.cuda.stream(s)
    elif KIND == "torch-external":

        RAW = {}  # id(external stream) -> the CUstream it wraps

        def make():
            raw = _driver_stream()
            ext = torch.cuda.ExternalStream(int(raw))
            RAW[id(ext)] = raw
            return ext

        def destroy(s):
            from cuda.bindings import driver as drv

            sync()
            (err,) = drv.cuStreamDestroy(RAW.pop(id(s)))
            assert int(err) == 0, err

        def current(s):
            return torch.cuda.stream(s)
    else:  # cuda.core streams with torch operands
        from cuda.core import Device, StreamOptions

        Device(0).set_current()

        def make():
            return Device(0).create_stream(options=StreamOptions(nonblocking=NONBLOCKING))

        def destroy(s):
            sync()
            s.close()

        current = None


def check_fft(y):
    sync()  # results on a non-blocking stream: the host copy below runs on another stream
    ref = np.fft.fft(HOST, axis=-1)
    got = host(y)
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert err < 1e-5, err


def check_solve(x):
    sync()
    ref = np.linalg.solve(S.astype(np.float64), R.astype(np.float64))
    err = np.linalg.norm(host(x) - ref) / np.linalg.norm(ref)
    assert err < 1e-4, err


def check_mm(d):
    sync()
    ref = A.astype(np.float64) @ B.astype(np.float64)
    err = np.linalg.norm(host(d) - ref) / np.linalg.norm(ref)
    assert err < 1e-5, err


x, a, b = dev(HOST), dev(A), dev(B)
sa, sr = dev(S), dev(R)
for round_ in range(4):
    s = make()
    check_fft_y = nf.fft(x, axes=(1,), stream=s)  # a cached plan bound to s
    d = advanced.matmul(a, b, stream=s)
    sync()
    check_fft(check_fft_y)
    check_mm(d)
    if current is not None:
        with current(s):
            y = nf.fft(x, axes=(1,))  # the package's current stream
            d = advanced.matmul(a, b)
        sync()
        check_fft(y)
        check_mm(d)
    solver = la.DirectSolver(sa, sr, stream=s)  # a solver planned and run on s, reused after s is gone
    solver.plan(stream=s)
    solver.factorize(stream=s)
    check_solve(solver.solve(stream=s))
    f = FFT(x, axes=(1,), stream=s)
    f.plan(stream=s)
    y = f.execute(stream=s)
    sync()
    check_fft(y)
    destroy(s)
    del s
    gc.collect()
    s2 = make()
    check_fft(f.execute(stream=s2))  # rebinding from a destroyed stream
    check_solve(solver.solve(stream=s2))
    solver.free()
    f.free()
    check_fft(nf.fft(x, axes=(1,)))  # the cached plan, last bound to the destroyed stream
    check_mm(advanced.matmul(a, b))
    sync()
    destroy(s2)
    del s2
    gc.collect()
nf.plan_cache.clear()  # frees workspaces last used on destroyed streams
advanced.plan_cache.clear()
sync()
print("ok", KIND, MODE)
