"""CPU execution (scipy.fft): values against numpy.fft, dtypes, packages, layouts, C2R safety."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nvmath.fft as nf
from nvmath.fft import FFT, ExecutionCPU, FFTOptions


def crandn(rng, shape, dtype=np.complex128):
    """Random complex data, never zero."""
    return (rng.uniform(0.5, 1.5, shape) + 1j * rng.uniform(-1.5, -0.5, shape)).astype(dtype)


def rel_err(got, ref):
    """||got - ref|| / ||ref|| in float64."""
    got, ref = np.asarray(got, dtype=np.complex128), np.asarray(ref, dtype=np.complex128)
    return np.linalg.norm(got - ref) / np.linalg.norm(ref)


def test_c2c_matches_numpy(rng):
    """C2C forward and inverse equal numpy's unnormalized transforms."""
    x = crandn(rng, (6, 10, 4))
    assert rel_err(nf.fft(x), np.fft.fftn(x)) < 1e-14
    assert rel_err(nf.ifft(x, axes=(0, 2)), np.fft.ifftn(x, axes=(0, 2), norm="forward")) < 1e-14


def test_no_normalization(rng):
    """ifft(fft(x)) == N * x."""
    x = crandn(rng, (8, 6))
    np.testing.assert_allclose(nf.ifft(nf.fft(x)), 48 * x, rtol=1e-12)


def test_float32_stays_single(rng):
    """float32 -> complex64 -> float32; single precision is never promoted."""
    x = rng.uniform(-1, 1, (16, 32)).astype(np.float32)
    y = nf.rfft(x)
    assert y.dtype == np.complex64 and y.shape == (16, 17)
    assert rel_err(y, np.fft.rfftn(x)) < 1e-6 * np.log2(512)
    z = nf.irfft(y)
    assert z.dtype == np.float32
    assert rel_err(z, 512 * x) < 1e-6 * np.log2(512)


def test_c2r_never_destroys_input_and_repeats(rng):
    """C2R leaves the operand intact and gives the same result on every execution."""
    y = np.fft.rfftn(rng.uniform(-1, 1, (6, 8)))
    keep = y.copy()
    with FFT(y, options={"fft_type": "C2R"}) as f:
        f.plan()
        a, b = f.execute(), f.execute()
    np.testing.assert_array_equal(y, keep)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(a, np.fft.irfftn(keep, s=(6, 8), axes=(0, 1), norm="forward"), rtol=1e-12)


def test_c2r_odd_parity(rng):
    """last_axis_parity='odd' reconstructs odd-length signals."""
    s = rng.uniform(-1, 1, (4, 7))
    y = np.fft.rfftn(s)
    z = nf.irfft(y, options=FFTOptions(last_axis_parity="odd"))
    np.testing.assert_allclose(z, 28 * s, rtol=1e-12, atol=1e-12)


def test_inplace_returns_the_operand(rng):
    """inplace=True writes into the operand and returns it."""
    x = crandn(rng, (5, 6))
    ref = np.fft.fftn(x)
    y = nf.fft(x, options={"inplace": True})
    assert y is x
    np.testing.assert_allclose(x, ref, rtol=1e-12)


def test_result_layouts(rng):
    """The result has the strides get_output_layout reports, for both layouts."""
    x = crandn(rng, (16, 10))
    for layout, strides in (("optimized", (1, 16)), ("natural", (10, 1))):
        with FFT(x, axes=(0,), options={"result_layout": layout}) as f:
            f.plan()
            y = f.execute()
            assert f.get_output_layout() == ((16, 10), strides)
            assert tuple(s // y.itemsize for s in y.strides) == strides
            np.testing.assert_allclose(y, np.fft.fft(x, axis=0), rtol=1e-12)


def test_more_than_three_axes(rng):
    """Any number of axes is transformed (beyond nvmath-python's limit of 3)."""
    x = crandn(rng, (2, 3, 4, 5, 2))
    assert rel_err(nf.fft(x), np.fft.fftn(x)) < 1e-14


def test_torch_cpu_tensors_come_back_as_torch(torch):
    """torch CPU operands give torch CPU results of the matching dtype."""
    x = torch.randn(4, 8, dtype=torch.complex64)
    y = nf.fft(x, axes=[1])
    assert isinstance(y, torch.Tensor) and y.dtype == torch.complex64 and y.device.type == "cpu"
    torch.testing.assert_close(y, torch.fft.fft(x, dim=1), rtol=1e-5, atol=1e-5)
    r = torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    z = nf.rfft(r)
    assert z.dtype == torch.complex128
    torch.testing.assert_close(z, torch.fft.rfftn(r.detach()))


def test_torch_inplace_and_conjugate(torch):
    """torch in-place writes the tensor; a lazily conjugated tensor is transformed as conjugated."""
    x = torch.randn(6, dtype=torch.complex128)
    ref = torch.fft.fft(x)
    assert nf.fft(x, options={"inplace": True}) is x
    torch.testing.assert_close(x, ref)
    c = torch.randn(6, dtype=torch.complex128).conj()
    torch.testing.assert_close(nf.fft(c), torch.fft.fft(c.resolve_conj()))


def test_execution_cpu_threads(rng, monkeypatch):
    """ExecutionCPU(num_threads) becomes scipy's workers; the default is half the CPUs (>= 1)."""
    from nvmath.fft import _cpu

    seen = []
    sfft = _cpu.scipy_fft()
    real_fftn = sfft.fftn
    monkeypatch.setattr(sfft, "fftn", lambda *a, **k: seen.append(k["workers"]) or real_fftn(*a, **k))
    x = crandn(rng, (4, 4))
    nf.fft(x, execution=ExecutionCPU(num_threads=3))
    nf.fft(x, execution="cpu")
    assert seen == [3, _cpu.default_threads()] and _cpu.default_threads() >= 1


@st.composite
def host_problems(draw):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=ndim, max_size=ndim)))
    perm = draw(st.permutations(range(ndim)))
    step = draw(st.integers(1, 2))
    axes = draw(st.permutations(range(ndim)))[: draw(st.integers(1, ndim))]
    kind = draw(st.sampled_from(["fft", "ifft", "rfft", "irfft"]))
    dtype = draw(st.sampled_from(["single", "double"]))
    layout = draw(st.sampled_from(["optimized", "natural"]))
    return shape, perm, step, tuple(axes), kind, dtype, layout


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(host_problems())
def test_cpu_matches_numpy_for_strided_views(problem):
    """Stateless CPU transforms of transposed, sliced views equal numpy.fft in float64."""
    shape, perm, step, axes, kind, precision, layout = problem
    rng = np.random.default_rng(1)
    real = kind == "rfft"
    big = tuple(shape[p] * step for p in perm)
    base = rng.uniform(0.5, 1.5, big) if real else crandn(rng, big)
    if precision == "single":
        base = base.astype(np.float32 if real else np.complex64)
    x = base[tuple(slice(None, None, step) for _ in perm)].transpose(np.argsort(perm))
    options = {"result_layout": layout}
    if kind == "irfft" and x.shape[axes[-1]] == 1:
        options["last_axis_parity"] = "odd"
    y = getattr(nf, kind)(x, axes=axes, options=options)
    xd = x.astype(np.complex128 if not real else np.float64)
    ref = {
        "fft": lambda: np.fft.fftn(xd, axes=axes),
        "ifft": lambda: np.fft.ifftn(xd, axes=axes, norm="forward"),
        "rfft": lambda: np.fft.rfftn(xd, axes=axes),
        "irfft": lambda: np.fft.irfftn(
            xd, s=[x.shape[a] for a in axes[:-1]] + [y.shape[axes[-1]]], axes=axes, norm="forward"
        ),
    }[kind]()
    n = int(np.prod([max(x.shape[a], y.shape[a]) for a in axes]))
    tol = (1e-5 if precision == "single" else 1e-12) * max(1.0, np.log2(n))
    assert y.shape == ref.shape
    assert rel_err(y, ref) < tol
