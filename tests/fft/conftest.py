"""A numpy emulation of cuFFT's advanced layout, driven by the pure FFT traits.

:func:`emulate` reads each cuFFT step's input from flat buffers with ``as_strided`` exactly as the
step's ``inembed``/``istride``/``idist``/``batch``/``offsets`` describe, transforms it with
``numpy.fft`` (unnormalized) and writes it through the step's output description. Comparing the final
buffer, viewed with the traits' result shape and strides, against ``numpy.fft.fftn`` over the
requested axes validates the layout inference without a GPU. Every view is bounds-checked, and
result buffers start as NaN so an element no step writes is caught.
"""

from __future__ import annotations

import math
import types

import numpy as np
import pytest

from nvmath._internal.tensors.base import span


def make_operand(rng, shape, perm=None, pads=None, steps=None, *, dtype="complex128"):
    """Return ``(array, flat)``: a strided view with logical ``shape`` and the flat buffer it starts.

    The buffer holds the axes in ``perm`` order (outer to inner), axis ``i`` padded by ``pads[i]``
    elements and walked with step ``steps[i]``.
    """
    nd = len(shape)
    perm = list(range(nd)) if perm is None else list(perm)
    pads = [0] * nd if pads is None else list(pads)
    steps = [1] * nd if steps is None else list(steps)
    mem_shape = [shape[p] * steps[p] + pads[p] for p in perm]
    base = rng.uniform(-1, 1, mem_shape) + 0.25
    if np.dtype(dtype).kind == "c":
        base = base + 1j * (rng.uniform(-1, 1, mem_shape) - 0.5)
    base = base.astype(dtype)
    view = base[tuple(slice(0, shape[p] * steps[p], steps[p]) for p in perm)]
    return view.transpose(np.argsort(perm)), base.reshape(-1)


def element_strides(a: np.ndarray) -> tuple[int, ...]:
    """Strides of ``a`` in elements."""
    return tuple(s // a.itemsize for s in a.strides)


def _view(buf: np.ndarray, offset: int, shape, strides) -> np.ndarray:
    hi = offset + sum((n - 1) * s for n, s in zip(shape, strides))
    assert 0 <= offset and hi < buf.size, f"view [{offset}, {hi}] outside a buffer of {buf.size} elements"
    assert all(s > 0 for s, n in zip(strides, shape) if n > 1), f"non-positive stride in {strides}"
    isz = buf.itemsize
    return np.lib.stride_tricks.as_strided(
        buf[offset:], shape=tuple(shape), strides=tuple(s * isz for s in strides)
    )


def _side(step, side: str):
    n = list(step.n)
    if (side == "in" and step.kind == "C2R") or (side == "out" and step.kind == "R2C"):
        n[-1] = n[-1] // 2 + 1
    embed, stride, dist = (
        (step.inembed, step.istride, step.idist) if side == "in" else (step.onembed, step.ostride, step.odist)
    )
    r = len(n)
    strides = [dist] + [stride * math.prod(embed[k + 1 :]) for k in range(r)]
    return [step.batch] + n, strides


def run_step(step, buffers: dict, direction: int) -> None:
    """Apply one cuFFT step to the named flat buffers (in place where the step says so)."""
    src, dst = buffers[step.src], buffers[step.dst]
    ishape, istrides = _side(step, "in")
    oshape, ostrides = _side(step, "out")
    axes = tuple(range(1, len(step.n) + 1))
    for ioff, ooff in step.offsets:
        x = _view(src, ioff, ishape, istrides).copy()
        if step.kind == "C2C":
            y = np.fft.fftn(x, axes=axes) if direction < 0 else np.fft.ifftn(x, axes=axes, norm="forward")
        elif step.kind == "R2C":
            y = np.fft.rfftn(x, axes=axes)
        else:
            y = np.fft.irfftn(x, s=step.n, axes=axes, norm="forward")
        _view(dst, ooff, oshape, ostrides)[...] = y


def emulate(traits, operand: np.ndarray, flat: np.ndarray, direction: int = -1) -> np.ndarray:
    """Run the traits' steps on ``flat`` (the buffer ``operand`` starts at); return the result view."""
    buffers = {"operand": flat}
    if traits.staging_strides is not None:
        _, hi = span(traits.operand_shape, traits.staging_strides)
        buffers["staging"] = np.full(hi + 1, np.nan, dtype=flat.dtype)
        _view(buffers["staging"], 0, traits.operand_shape, traits.staging_strides)[...] = operand
    if not traits.inplace:
        _lo, hi = span(traits.result_shape, traits.result_strides)
        buffers["result"] = np.full(hi + 1, np.nan, dtype=np.dtype(traits.result_dtype))
    for step in traits.steps:
        run_step(step, buffers, direction)
    final = traits.steps[-1].dst
    strides = {
        "result": traits.result_strides,
        "staging": traits.staging_strides,
        "operand": traits.operand_strides,
    }[final]
    return _view(buffers[final], 0, traits.result_shape, strides)


def reference(traits, operand: np.ndarray, direction: int = -1) -> np.ndarray:
    """numpy's unnormalized transform over the traits' axes."""
    axes = traits.axes
    if traits.fft_type == "C2C":
        if direction < 0:
            return np.fft.fftn(operand, axes=axes)
        return np.fft.ifftn(operand, axes=axes, norm="forward")
    if traits.fft_type == "R2C":
        return np.fft.rfftn(operand, axes=axes)
    return np.fft.irfftn(operand, s=traits.fft_shape, axes=axes, norm="forward")


@pytest.fixture(scope="session")
def fft_emu():
    """The emulator helpers, as a namespace."""
    return types.SimpleNamespace(
        make_operand=make_operand,
        element_strides=element_strides,
        emulate=emulate,
        reference=reference,
        run_step=run_step,
    )
