"""Self-test checks of :mod:`nvmath.fft` for ``python -m nvmath`` (CPU and GPU)."""

from __future__ import annotations

import numpy as np

from nvmath._diagnostics.selftest import Context, check


def _signal(shape: tuple[int, ...], complex_: bool = True) -> np.ndarray:
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 1.5, shape)
    return x + 1j * rng.uniform(-1.5, -0.5, shape) if complex_ else x


def _rel(got: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(np.asarray(got) - ref) / np.linalg.norm(ref))


def _expect(err: float, tol: float, what: str) -> str:
    if not err < tol:
        raise AssertionError(f"{what}: relative error {err:.2e} exceeds {tol:.0e}")
    return f"rel. error {err:.1e}"


@check("fft: C2C on the CPU matches numpy", requires=("scipy",))
def _cpu_c2c(ctx: Context) -> str:
    import nvmath.fft as nf

    x = _signal((16, 24))
    return _expect(_rel(nf.fft(x, axes=[0, 1]), np.fft.fft2(x)), 1e-12, "fft")


@check("fft: R2C/C2R round trip on the CPU (float32)", requires=("scipy",))
def _cpu_real(ctx: Context) -> str:
    import nvmath.fft as nf

    x = _signal((8, 32), complex_=False).astype(np.float32)
    y = nf.irfft(nf.rfft(x))
    if y.dtype != np.float32:
        raise AssertionError(f"float32 input came back as {y.dtype}")
    return _expect(_rel(y / x.size, x), 1e-5, "irfft(rfft(x)) / N")


@check("fft: C2C on the GPU matches numpy", gpu=True)
def _gpu_c2c(ctx: Context) -> str:
    import nvmath.fft as nf

    x = _signal((64, 100))
    y = nf.fft(x, axes=[1], execution={"name": "cuda", "device_id": ctx.device_id})
    return _expect(_rel(y, np.fft.fft(x, axis=1)), 1e-12, "fft on the GPU")


@check("fft: planned C2R on the GPU repeats without touching its input", gpu=True)
def _gpu_c2r(ctx: Context) -> str:
    from nvmath.fft import FFT

    s = _signal((6, 8, 10), complex_=False)
    spectrum = np.fft.rfftn(s)
    keep = spectrum.copy()
    with FFT(spectrum, options={"fft_type": "C2R"}, execution={"name": "cuda", "device_id": ctx.device_id}) as f:
        f.plan()
        first, second = f.execute(), f.execute()
    if not np.array_equal(spectrum, keep) or not np.array_equal(first, second):
        raise AssertionError("C2R modified its operand or gave different results")
    return _expect(_rel(first, s * s.size), 1e-12, "irfft on the GPU")
