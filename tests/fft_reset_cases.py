"""Operand swaps of a planned FFT, shared by the CPU, fake-GPU and GPU tests of ``reset_operand`` and
``reset_operand_unchecked``.

Each :class:`SwapCase` is a planned operand layout and a list of candidate operands of the same dtype
(other batch arrangements, transposed batch strides, padding, other FFT sizes, another rank).
:func:`check_swaps` swaps every candidate in through the checked and the unchecked path of two
identically planned FFTs (and back to a plain copy of the first one): either both refuse it with
``ValueError``, or both return the numpy reference (shape and values). The unchecked path must never
return a result computed with the planned layout of another arrangement.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class SwapCase:
    """One planned layout (``shape`` over ``axes``) and the candidates swapped in."""

    name: str
    shape: tuple[int, ...]
    axes: tuple[int, ...]
    kind: str  # "C2C", "R2C" or "C2R"
    candidates: tuple[Callable[[np.ndarray], np.ndarray], ...]
    options: dict = dataclasses.field(default_factory=dict)


def _swap01(a: np.ndarray) -> np.ndarray:
    """The same data with its first two axes swapped: transposed batch strides."""
    return np.swapaxes(a, 0, 1)


def _batch_swapped_copy(a: np.ndarray) -> np.ndarray:
    """A contiguous array whose first two (batch) extents are exchanged."""
    return np.ascontiguousarray(np.swapaxes(a, 0, 1))


def _transposed_view_of_copy(a: np.ndarray) -> np.ndarray:
    """A view with the planned shape whose two leading batch axes are swapped in memory."""
    return np.swapaxes(np.ascontiguousarray(np.swapaxes(a, 0, 1)), 0, 1)


def _merged_batch(a: np.ndarray) -> np.ndarray:
    """The two leading batch axes merged into one with a leading 1: ``(1, B0*B1, ...)``."""
    return np.ascontiguousarray(a).reshape(1, a.shape[0] * a.shape[1], *a.shape[2:])


def _padded_batch(a: np.ndarray) -> np.ndarray:
    """The planned shape in a buffer padded along the last axis: another distance."""
    big = np.zeros((*a.shape[:-1], a.shape[-1] + 3), a.dtype)
    big[..., : a.shape[-1]] = a
    return big[..., : a.shape[-1]]


def _other_rank(a: np.ndarray) -> np.ndarray:
    """The batch merged away: one dimension fewer (the planned axes no longer apply)."""
    return np.ascontiguousarray(a).reshape(a.shape[0] * a.shape[1], *a.shape[2:])


def _shorter_fft(a: np.ndarray) -> np.ndarray:
    """Another transform size along the last axis."""
    return np.ascontiguousarray(a[..., :-1])


def _trailing_batch_swapped(a: np.ndarray) -> np.ndarray:
    """A contiguous array whose two trailing (batch) extents are exchanged."""
    return np.ascontiguousarray(np.swapaxes(a, 1, 2))


def _trailing_batch_transposed(a: np.ndarray) -> np.ndarray:
    """The planned shape with the two trailing batch axes swapped in memory."""
    return np.swapaxes(np.ascontiguousarray(np.swapaxes(a, 1, 2)), 1, 2)


_COMMON = (_batch_swapped_copy, _swap01, _transposed_view_of_copy, _merged_batch, _padded_batch)
_REFUSED = (_other_rank, _shorter_fft)

CASES = (
    SwapCase("c2c-1d", (2, 3, 8), (2,), "C2C", _COMMON + _REFUSED),
    SwapCase("c2c-2d", (2, 3, 4, 6), (2, 3), "C2C", _COMMON + _REFUSED),
    SwapCase("c2c-natural", (2, 3, 8), (2,), "C2C", _COMMON, {"result_layout": "natural"}),
    SwapCase("c2c-inplace", (2, 3, 8), (2,), "C2C", _COMMON, {"inplace": True}),
    SwapCase("c2c-leading-axis", (8, 2, 3), (0,), "C2C", (_trailing_batch_swapped, _trailing_batch_transposed)),
    SwapCase("r2c", (2, 3, 8), (2,), "R2C", _COMMON + _REFUSED),
    SwapCase("c2r", (2, 3, 5), (2,), "C2R", _COMMON + _REFUSED),
)


def make_operand(rng: np.random.Generator, case: SwapCase) -> np.ndarray:
    """A random host operand of the planned layout (complex128, or float64 for R2C)."""
    if case.kind == "C2R":  # a Hermitian-consistent spectrum: every library agrees on its inverse
        real = rng.uniform(-1, 1, [*case.shape[:-1], 2 * (case.shape[-1] - 1)])
        return np.ascontiguousarray(np.fft.rfftn(real, axes=case.axes))
    x = rng.uniform(-1, 1, case.shape)
    if case.kind != "R2C":
        x = x + 1j * rng.uniform(-1, 1, case.shape)
    return np.ascontiguousarray(x)


def reference(x: np.ndarray, case: SwapCase) -> np.ndarray:
    """The unnormalized numpy transform of ``x`` over the planned axes (``None``: not definable)."""
    axes = case.axes
    if max(axes) >= x.ndim:
        return None
    if case.kind == "C2C":
        return np.fft.fftn(x, axes=axes)
    if case.kind == "R2C":
        return np.fft.rfftn(x, axes=axes)
    n = [x.shape[a] for a in axes]
    n[-1] = 2 * (n[-1] - 1)
    return np.fft.irfftn(x, s=n, axes=axes) * math.prod(n)


def check_swaps(
    case: SwapCase,
    rng: np.random.Generator,
    make_fft: Callable[[Any, SwapCase], Any],
    to_package: Callable[[np.ndarray], Any],
    to_numpy: Callable[[Any], np.ndarray],
) -> list[str]:
    """Swap every candidate of ``case`` in through both paths; return what each candidate did.

    ``make_fft(operand, case)`` returns a planned FFT of the package operand; ``to_package`` turns a
    host array into the package's tensor with the same shape and strides; ``to_numpy`` reads a result.
    """
    base = make_operand(rng, case)
    checked, unchecked = make_fft(to_package(base.copy()), case), make_fft(to_package(base.copy()), case)
    outcomes = []
    try:
        for build in case.candidates:
            fresh = make_operand(rng, case)
            outcomes.append(_check_one(case, checked, unchecked, fresh, build, to_package, to_numpy))
            again = make_operand(rng, case)  # the planned layout swaps back in after any arrangement
            outcomes.append(_check_one(case, checked, unchecked, again, np.array, to_package, to_numpy))
    finally:
        checked.free()
        unchecked.free()
    return outcomes


def _check_one(case, checked, unchecked, fresh, build, to_package, to_numpy) -> str:
    """Swap ``build(fresh)`` (a new buffer for each path: in-place transforms write into it) in."""
    host = build(fresh.copy())
    expected = reference(host, case)
    refused, results = [], []
    for fft, swap in ((checked, checked.reset_operand), (unchecked, unchecked.reset_operand_unchecked)):
        operand = to_package(build(fresh.copy()))
        try:
            swap(operand)
        except ValueError:
            refused.append(True)
            continue
        refused.append(False)
        results.append(to_numpy(fft.execute()))
    where = f"{case.name}: shape {host.shape} strides {host.strides}"
    assert refused[0] == refused[1], f"{where}: checked refused={refused[0]}, unchecked refused={refused[1]}"
    if refused[0]:
        return "refused"
    for got in results:
        assert got.shape == expected.shape, f"{where}: result shape {got.shape}, expected {expected.shape}"
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-9 * math.sqrt(host.size))
    return "accepted"
