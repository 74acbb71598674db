"""The cuFFT layout traits, validated by numpy emulation against numpy.fft (no GPU needed)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from nvmath._errors import UnsupportedLayoutError
from nvmath.fft import FFTOptions
from nvmath.fft import _layout as L
from nvmath.fft._traits import make_traits

RNG = np.random.default_rng(7)


def traits_of(arr, axes=None, *, cross=False, **options):
    """Traits of a numpy array for CUDA execution (the operand in device memory unless ``cross``)."""
    strides = tuple(s // arr.itemsize for s in arr.strides)
    return make_traits(
        arr.shape, strides, arr.dtype.name, axes=axes, options=FFTOptions(**options),
        execution="cuda", package="torch", operand_space="cpu" if cross else "cuda",
    )  # fmt: skip


def check(fft_emu, arr, flat, axes=None, direction=-1, *, cross=False, **options):
    """Emulate the traits of ``arr`` and compare with numpy; return the traits."""
    traits = traits_of(arr, axes, cross=cross, **options)
    expected = fft_emu.reference(traits, arr.copy(), direction)
    got = fft_emu.emulate(traits, arr.copy(), flat, direction)
    assert got.shape == expected.shape
    assert not np.isnan(got).any(), "an element of the result was never written"
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(expected).max()))
    return traits


# ----------------------------------------------------------------------------- fixed cases
def test_contiguous_3d_c2c_is_one_plan_one_launch(fft_emu):
    """A C-contiguous 3-D C2C over all axes is one rank-3 plan with unit stride and batch 1."""
    a, flat = fft_emu.make_operand(RNG, (4, 6, 8))
    t = check(fft_emu, a, flat)
    (step,) = t.steps
    assert (step.rank, step.n, step.istride, step.batch, step.launches) == (3, (4, 6, 8), 1, 1, 1)
    assert t.staging_strides is None and t.result_strides == (48, 8, 1)


def test_batched_last_axis_collapses_batch_dims(fft_emu):
    """Batch axes in front of the transformed axis collapse into one cuFFT batch."""
    a, flat = fft_emu.make_operand(RNG, (3, 4, 8))
    t = check(fft_emu, a, flat, axes=(-1,))
    (step,) = t.steps
    assert (step.batch, step.idist, step.odist, step.launches) == (12, 8, 8, 1)


def test_middle_axis_loops_over_smaller_batch_group(fft_emu):
    """Batch axes on both sides of the transformed axis: the larger group is batched, the other looped."""
    a, flat = fft_emu.make_operand(RNG, (3, 5, 7))
    t = check(fft_emu, a, flat, axes=(1,))
    (step,) = t.steps
    assert step.batch == 7 and step.launches == 3 and step.istride == 7


def test_axis0_of_2d_reads_strided(fft_emu):
    """Transforming axis 0 of a C-ordered 2-D array reads with the row stride (TARGETS 'axis 0' case)."""
    a, flat = fft_emu.make_operand(RNG, (16, 10))
    t = check(fft_emu, a, flat, axes=(0,))
    (step,) = t.steps
    assert (step.istride, step.idist, step.batch) == (10, 1, 10)
    assert (step.ostride, step.odist) == (1, 16), "optimized layout: the transformed axis is innermost"
    assert t.result_strides == (1, 16)


def test_natural_result_layout_keeps_operand_order(fft_emu):
    """result_layout='natural' keeps the operand's axis order."""
    a, flat = fft_emu.make_operand(RNG, (16, 10))
    t = check(fft_emu, a, flat, axes=(0,), result_layout="natural")
    assert t.result_strides == (10, 1)


def test_non_nesting_strides_raise_with_a_fix(fft_emu):
    """Strides that do not nest raise UnsupportedLayoutError naming the transpose and the fallback."""
    base = np.zeros((8, 10), dtype=np.complex128)
    a = base[:, ::3]
    with pytest.raises(UnsupportedLayoutError, match="layout_fallback") as info:
        traits_of(a)
    assert info.value.permutation == (0, 1) and info.value.axes == (0, 1)
    assert "(10, 3)" in str(info.value)


def test_layout_fallback_copy_stages_the_operand(fft_emu):
    """layout_fallback='copy' turns an unsupported layout into a staged (copied) one."""
    a, flat = fft_emu.make_operand(RNG, (6, 4), steps=(1, 3), pads=(0, 1))
    assert math.gcd(*(s // 16 for s in a.strides)) >= 1
    t = check(fft_emu, a, flat, layout_fallback="copy")
    assert t.staging_strides is not None and t.steps[0].src == "staging"


def test_r2c_needs_halved_axis_innermost(fft_emu):
    """R2C whose last axis is not the innermost transformed axis raises, with a working suggestion."""
    a, _flat = fft_emu.make_operand(RNG, (6, 8), perm=(1, 0), dtype="float64")
    with pytest.raises(UnsupportedLayoutError) as info:
        traits_of(a, axes=(0, 1))
    perm, axes = info.value.permutation, info.value.axes
    fixed = np.ascontiguousarray(a.transpose(perm))
    check(fft_emu, fixed, fixed.reshape(-1).copy(), axes=axes)


def test_c2r_always_stages_and_is_repeatable(fft_emu):
    """C2R reads an internal copy (cuFFT overwrites its input), so the operand is never touched."""
    a, flat = fft_emu.make_operand(RNG, (4, 5))
    before = flat.copy()
    t = check(fft_emu, a, flat, fft_type="C2R", direction=1)
    assert t.staging_strides is not None and t.steps[-1].src == "staging"
    np.testing.assert_array_equal(flat, before)


def test_c2r_odd_parity(fft_emu):
    """last_axis_parity='odd' gives 2m-1 outputs along the last axis."""
    a, flat = fft_emu.make_operand(RNG, (3, 5))
    t = check(fft_emu, a, flat, fft_type="C2R", last_axis_parity="odd", direction=1)
    assert t.result_shape == (3, 9)


def test_five_axes_compose_two_plans(fft_emu):
    """More than 3 axes run as an out-of-place rank-3 plan followed by an in-place rank-2 plan."""
    a, flat = fft_emu.make_operand(RNG, (2, 3, 4, 3, 2))
    t = check(fft_emu, a, flat)
    assert [s.rank for s in t.steps] == [3, 2] and t.steps[1].inplace


@pytest.mark.parametrize("fft_type", ["R2C", "C2R"])
def test_four_axes_real_transforms(fft_emu, fft_type):
    """R2C and C2R over 4 axes compose a real step with a C2C step in the right order."""
    dtype = "float64" if fft_type == "R2C" else "complex128"
    a, flat = fft_emu.make_operand(RNG, (3, 2, 4, 6), dtype=dtype)
    t = check(fft_emu, a, flat, fft_type=fft_type, direction=-1 if fft_type == "R2C" else 1)
    kinds = [s.kind for s in t.steps]
    assert kinds == (["R2C", "C2C"] if fft_type == "R2C" else ["C2C", "C2R"])


def test_inplace_uses_operand_layout(fft_emu):
    """An in-place C2C reads and writes the operand's own layout."""
    a, flat = fft_emu.make_operand(RNG, (4, 6), perm=(1, 0), pads=(1, 0))
    t = check(fft_emu, a, flat, inplace=True)
    assert t.steps[0].src == t.steps[0].dst == "operand" and t.result_strides == t.operand_strides


def test_inplace_rejects_overlap():
    """An in-place transform of an overlapping (broadcast) view is refused."""
    a = np.broadcast_to(np.ones(4, dtype=np.complex128), (3, 4))
    with pytest.raises(ValueError, match="overlap"):
        traits_of(a, axes=(1,), inplace=True)


def test_host_operand_staged_in_its_own_order(fft_emu):
    """A host operand run on the GPU is copied into a dense device buffer in its own axis order."""
    a, flat = fft_emu.make_operand(RNG, (4, 6), perm=(1, 0), steps=(2, 1))
    t = check(fft_emu, a, flat, cross=True)
    assert t.staging_strides == (1, 4)


def test_operand_loop_limit_falls_back_or_raises():
    """A layout needing more launches than MAX_OPERAND_LAUNCHES counts as unsupported."""
    n = L.MAX_OPERAND_LAUNCHES + 1
    a = np.zeros((n, 2, n), dtype=np.complex64)
    with pytest.raises(UnsupportedLayoutError, match="launches"):
        traits_of(a, axes=(1,))
    t = traits_of(a, axes=(1,), layout_fallback="copy")
    assert t.launches == 1


def test_size_one_axes_are_identity():
    """Extent-1 transformed axes are dropped from the plan (the halved axis is kept)."""
    a = np.zeros((1, 8, 1), dtype=np.complex64)
    (step,) = traits_of(a).steps
    assert step.n == (8,)
    (step,) = traits_of(np.zeros((1, 1), dtype=np.complex64)).steps
    assert step.n == (1,)
    (step,) = traits_of(np.zeros((8, 1), dtype=np.float32)).steps
    assert step.n == (8, 1)


def test_fft_embedding_rejects_non_positive_stride():
    """A zero or negative stride on a transformed axis cannot be described."""
    with pytest.raises(L.LayoutUnsupported, match="positive"):
        L.fft_embedding((0,), (4,), (0,))
    with pytest.raises(L.LayoutUnsupported, match="nest"):
        L.fft_embedding((3, 1), (4, 4), (0, 1))


def test_chunk_axes_orders_groups():
    """Axes are split into groups of 3, innermost first (C2C/R2C) or last (C2R)."""
    assert L.chunk_axes((0, 1, 2, 3, 4), "C2C") == [(2, 3, 4), (0, 1)]
    assert L.chunk_axes((0, 1, 2, 3, 4), "C2R") == [(0, 1), (2, 3, 4)]
    assert L.chunk_axes((5,), "R2C") == [(5,)]


def test_is_non_overlapping():
    """Nested positive strides do not overlap; equal or too-small strides do."""
    assert L.is_non_overlapping((3, 4), (4, 1))
    assert not L.is_non_overlapping((3, 4), (2, 1))
    assert L.is_non_overlapping((1, 4), (0, 1))


# ----------------------------------------------------------------------------- hypothesis
@st.composite
def problems(draw):
    ndim = draw(st.integers(1, 5))
    shape = draw(st.lists(st.integers(1, 5 if ndim <= 3 else 3), min_size=ndim, max_size=ndim))
    perm = draw(st.permutations(range(ndim)))
    pads = draw(st.lists(st.integers(0, 2), min_size=ndim, max_size=ndim))
    steps = draw(st.lists(st.integers(1, 2), min_size=ndim, max_size=ndim))
    order = draw(st.permutations(range(ndim)))
    axes = [a - ndim if draw(st.booleans()) else a for a in order[: draw(st.integers(1, ndim))]]
    fft_type = draw(st.sampled_from(["C2C", "R2C", "C2R"]))
    options = {
        "fft_type": fft_type,
        "result_layout": draw(st.sampled_from(["optimized", "natural"])),
        "layout_fallback": draw(st.sampled_from(["error", "copy"])),
        "inplace": fft_type == "C2C" and draw(st.booleans()),
        "last_axis_parity": draw(st.sampled_from(["even", "odd"])),
    }
    return shape, perm, pads, steps, tuple(axes), options, draw(st.booleans()), draw(st.sampled_from([-1, 1]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_traits_match_numpy_for_any_layout(fft_emu, problem):
    """For random shapes, axes, strides and options, the emulated cuFFT steps equal numpy.fft."""
    shape, perm, pads, steps, axes, options, cross, direction = problem
    assume(math.prod(n * s + p for n, s, p in zip(shape, steps, pads)) <= 20000)
    fft_type = options["fft_type"]
    if fft_type == "C2R" and shape[axes[-1]] == 1 and options["last_axis_parity"] == "even":
        options["last_axis_parity"] = "odd"
    direction = {"R2C": -1, "C2R": 1}.get(fft_type, direction)
    dtype = "float64" if fft_type == "R2C" else "complex128"
    a, flat = fft_emu.make_operand(RNG, shape, perm, pads, steps, dtype=dtype)
    try:
        check(fft_emu, a, flat, axes, direction, cross=cross, **options)
    except UnsupportedLayoutError as exc:
        assert not cross and (options["layout_fallback"] == "error" or options["inplace"])
        fixed = np.ascontiguousarray(a.transpose(exc.permutation))
        check(fft_emu, fixed, fixed.reshape(-1), exc.axes, direction, **options)
