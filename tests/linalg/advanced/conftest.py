"""A numpy emulation of cuBLASLt's strided-batch matmul, driven by the pure traits.

The traits say where each matrix lives (rows, cols, leading dimension, order, batch offset) and which
operation applies; :class:`LtEmulator` reads the matrices back from the operands' flat buffers with
``as_strided`` exactly as cuBLASLt would, multiplies them, writes D through D's layout and views the
result with the traits' result shape and strides. Comparing that with ``np.matmul`` validates the
layout inference end to end without a GPU.
"""

from __future__ import annotations

import os
import sys
import types

import numpy as np
import pytest

from nvmath._internal import caches
from nvmath.linalg.advanced._layout import Op, OperandSpec, Order

sys.path.insert(0, os.path.dirname(__file__))  # the fake GPU, ``import matmul_fakes``, for this folder's tests


@pytest.fixture
def lt(monkeypatch):
    """The fake GPU of ``matmul_fakes.py`` (cuBLASLt emulated, calls recorded), installed for one test;
    every cache is emptied afterwards."""
    import matmul_fakes

    fake = matmul_fakes.install(monkeypatch)
    yield fake
    caches.clear_all()


def make_operand(rng, shape, perm=None, pads=None, steps=None, *, complex_=False):
    """Return ``(array, flat)``: a strided view with logical ``shape`` and the flat buffer it views.

    The buffer is laid out with axes in ``perm`` order (outer to inner), each axis padded by
    ``pads[i]`` elements and walked with step ``steps[i]``; the view starts at the buffer's start.
    """
    nd = len(shape)
    perm = list(range(nd)) if perm is None else list(perm)
    pads = [0] * nd if pads is None else list(pads)
    steps = [1] * nd if steps is None else list(steps)
    mem_shape = [shape[p] * steps[p] + pads[p] for p in perm]
    base = rng.uniform(-1, 1, mem_shape) + 0.25
    if complex_:
        base = base + 1j * (rng.uniform(-1, 1, mem_shape) - 0.5)
    view = base[tuple(slice(0, shape[p] * steps[p], steps[p]) for p in perm)]
    arr = view.transpose(np.argsort(perm))
    return arr, base.reshape(-1)


def spec_of(arr, *, dtype=None, conj=False) -> OperandSpec:
    """The OperandSpec of a numpy array (strides in elements)."""
    item = arr.itemsize
    assert all(s % item == 0 for s in arr.strides)
    name = dtype or ("complex128" if np.iscomplexobj(arr) else "float64")
    return OperandSpec(tuple(arr.shape), tuple(s // item for s in arr.strides), name, conj)


def lt_matrix(flat, layout, batch_index):
    """Read one matrix of a cuBLASLt layout from a flat buffer (checks the reads stay inside)."""
    item = flat.itemsize
    start = batch_index * layout.batch_offset
    if layout.order == Order.COL:
        strides = (1, layout.ld)
        assert layout.ld >= layout.rows or layout.cols == 1 or layout.ld == 0
    else:
        strides = (layout.ld, 1)
        assert layout.ld >= layout.cols or layout.rows == 1
    last = start + (layout.rows - 1) * strides[0] + (layout.cols - 1) * strides[1]
    assert 0 <= start and last < flat.size, (layout, batch_index, flat.size)
    return np.lib.stride_tricks.as_strided(
        flat[start:],
        shape=(layout.rows, layout.cols),
        strides=(strides[0] * item, strides[1] * item),
        writeable=False,
    )


def apply_op(mat, op):
    """cuBLAS operation on a matrix."""
    if op == Op.N:
        return mat
    if op == Op.T:
        return mat.T
    return mat.conj().T


def write_matrix(flat, layout, batch_index, value):
    """Write one matrix through a (column-major) cuBLASLt layout."""
    assert layout.order == Order.COL
    start = batch_index * layout.batch_offset
    for j in range(layout.cols):
        flat[start + j * layout.ld : start + j * layout.ld + layout.rows] = value[:, j]


def run_problem(problem, flats, c_flat=None, alpha=1.0, beta=0.0, epilog=None):
    """Emulate ``cublasLtMatmul`` for ``problem``; return the flat D buffer.

    ``flats`` maps user operand names ("a", "b") to their flat buffers. ``epilog(d, batch_index)``
    may post-process each D matrix (cuBLASLt orientation).
    """
    dtype = np.result_type(
        *(f.dtype for f in flats.values()), *([c_flat.dtype] if c_flat is not None else [])
    )
    if problem.inplace:
        d_flat = c_flat.astype(dtype, copy=True)
    else:
        d_flat = np.full(problem.batch.count * problem.m * problem.n, np.nan, dtype=dtype)
    for i in range(problem.batch.count):
        a = apply_op(lt_matrix(flats[problem.a_operand], problem.a, i), problem.transa)
        b = apply_op(lt_matrix(flats[problem.b_operand], problem.b, i), problem.transb)
        assert a.shape == (problem.m, problem.k) and b.shape == (problem.k, problem.n)
        d = alpha * (a @ b)
        if problem.has_c:
            d = d + beta * lt_matrix(c_flat, problem.c, i)
        if epilog is not None:
            d = epilog(d, i)
        write_matrix(d_flat, problem.d, i, d)
    return d_flat


def result_view(problem, d_flat):
    """View the emulated D buffer with the traits' result shape and strides."""
    item = d_flat.itemsize
    strides = tuple(s * item for s in problem.result_strides)
    if problem.result_shape:
        span = sum((e - 1) * s for e, s in zip(problem.result_shape, problem.result_strides))
        assert span < d_flat.size
    return np.lib.stride_tricks.as_strided(d_flat, problem.result_shape, strides, writeable=False)


@pytest.fixture(scope="session")
def emulator():
    """The cuBLASLt emulator helpers (the fake GPU that runs planners is the fixture ``lt``)."""
    return types.SimpleNamespace(
        make_operand=make_operand,
        spec_of=spec_of,
        lt_matrix=lt_matrix,
        apply_op=apply_op,
        write_matrix=write_matrix,
        run_problem=run_problem,
        result_view=result_view,
    )
