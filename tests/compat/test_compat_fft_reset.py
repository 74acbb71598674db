"""``FFT.reset_operand_unchecked`` as nvmath-python 1.0 programs use it (the caching pattern: one FFT
per ``create_key``, operands swapped in unchecked): another batch arrangement with the same key is
re-derived or refused, never transformed with the planned layout. CPU execution here, the GPU below
(torch and cupy operands)."""

from __future__ import annotations

import numpy as np
import pytest

import fft_reset_cases
import nvmath.fft
from nvmath.fft import FFT


def _planned(operand, case, execution=None):
    options = nvmath.fft.FFTOptions(fft_type=case.kind, **case.options)
    f = FFT(operand, axes=case.axes, options=options, execution=execution)
    f.plan()
    return f


def test_caching_pattern_with_another_batch_arrangement_cpu(rng):
    """The nvmath-python caching example, CPU execution: an operand of another batch arrangement
    swapped in unchecked is transformed correctly or refused -- never the planned shape's result."""
    cache = {}
    outs = []
    for shape in ((2, 3, 16), (3, 2, 16)):
        x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
        key = FFT.create_key(x, axes=(2,))
        if key not in cache:
            cache[key] = FFT(x, axes=(2,))
            cache[key].plan()
        f = cache[key]
        try:
            f.reset_operand_unchecked(x)
        except ValueError:
            continue
        y = f.execute()
        outs.append(y.shape)
        np.testing.assert_allclose(y, np.fft.fft(x, axis=2), rtol=1e-4, atol=1e-4)
    for f in cache.values():
        f.free()
    assert outs[0] == (2, 3, 16)


@pytest.mark.parametrize("package", ["numpy", "torch"])
@pytest.mark.parametrize("case", fft_reset_cases.CASES, ids=lambda c: c.name)
def test_reset_operand_unchecked_matches_checked_path_cpu(rng, case, package):
    """CPU execution (numpy and torch-CPU operands): both swap paths accept and refuse the same
    operands, and what they accept gives numpy's result shape and values."""
    if package == "torch":
        torch = pytest.importorskip("torch")
        to_package, to_numpy = torch.from_numpy, lambda t: t.numpy()
    else:
        to_package, to_numpy = (lambda a: a), np.asarray
    fft_reset_cases.check_swaps(case, rng, lambda op, c: _planned(op, c, "cpu"), to_package, to_numpy)


def _keys(a: np.ndarray, case) -> tuple:
    """``a``'s key with CPU execution, and the key of a device operand of ``a``'s layout (CUDA)."""
    options = {"fft_type": case.kind, **case.options}
    strides = tuple(s // a.itemsize for s in a.strides)
    return (
        FFT.create_key(a, axes=case.axes, options=options, execution="cpu"),
        FFT.create_key_from_metadata(
            a.shape, a.dtype, "cuda", strides=strides, axes=case.axes, options=options
        ),
    )


@pytest.mark.parametrize("case", fft_reset_cases.CASES, ids=lambda c: c.name)
def test_cpu_keys_and_resets_accept_the_arrangements_cuda_keys_accept(rng, case):
    """CPU keys group batch arrangements as CUDA keys do: a candidate's CPU key equals the planned
    operand's exactly when its CUDA key does, and reset_operand / reset_operand_unchecked on the CPU
    accept exactly those candidates (at least one other arrangement), with numpy's result."""
    base = fft_reset_cases.make_operand(rng, case)
    cpu0, cuda0 = _keys(base, case)
    expected = []
    for build in case.candidates:
        candidate = build(base.copy())
        try:
            cpu, cuda = _keys(candidate, case)
        except (TypeError, ValueError):  # no key at all (the planned axes do not apply)
            expected.append("refused")
            continue
        assert (cpu == cpu0) == (cuda == cuda0), f"{case.name}: {candidate.shape} {candidate.strides}"
        expected.append("accepted" if cpu == cpu0 else "refused")
    on_cpu = lambda op, c: _planned(op, c, "cpu")  # noqa: E731
    outcomes = fft_reset_cases.check_swaps(case, rng, on_cpu, np.asarray, np.asarray)
    assert outcomes[::2] == expected
    assert "accepted" in expected


def _strided_copy(module, a: np.ndarray, empty, as_strided):
    """A device copy of ``a`` with ``a``'s exact strides (padding and transposed batches kept)."""
    item = a.itemsize
    strides = tuple(s // item for s in a.strides)
    span = 1 + sum((n - 1) * s for n, s in zip(a.shape, strides))
    view = as_strided(empty(span), a.shape, strides)
    view[...] = module(a)
    return view


@pytest.mark.gpu
@pytest.mark.parametrize("case", fft_reset_cases.CASES, ids=lambda c: c.name)
def test_reset_operand_unchecked_matches_checked_path_torch_gpu(torch_cuda, rng, case):
    """torch CUDA operands with exact strides: both paths accept the same arrangements (at least one
    other than the planned one), refuse the same, and the accepted ones match numpy."""
    torch = torch_cuda
    dt = torch.float64 if case.kind == "R2C" else torch.complex128

    def to_package(a):
        return _strided_copy(
            lambda x: torch.from_numpy(np.ascontiguousarray(x)).cuda(), a,
            lambda n: torch.empty(n, dtype=dt, device="cuda"), torch.as_strided,
        )  # fmt: skip

    def to_numpy(t):
        torch.cuda.synchronize()
        return t.cpu().numpy()

    outcomes = fft_reset_cases.check_swaps(case, rng, _planned, to_package, to_numpy)
    assert "accepted" in outcomes[::2]


@pytest.mark.gpu
@pytest.mark.parametrize("case", fft_reset_cases.CASES[:2], ids=lambda c: c.name)
def test_reset_operand_unchecked_matches_checked_path_cupy(cupy, rng, case):
    """cupy operands with exact strides: the same agreement as with torch."""
    cp = cupy
    dt = np.float64 if case.kind == "R2C" else np.complex128

    def to_package(a):
        return _strided_copy(
            cp.asarray, a, lambda n: cp.empty(n, dtype=dt),
            lambda b, shape, strides: cp.lib.stride_tricks.as_strided(
                b, shape, [s * b.itemsize for s in strides]
            ),
        )  # fmt: skip

    outcomes = fft_reset_cases.check_swaps(case, rng, _planned, to_package, cp.asnumpy)
    assert "accepted" in outcomes[::2]
