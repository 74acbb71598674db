"""FFT calls written for nvmath-python 1.0 run unchanged (CPU): keys, in-place rules, attributes,
callback exception types, ``nvmath._utils.get_nvrtc_version``."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import nvmath.fft as nf
from nvmath.bindings.cufft import cuFFTError
from nvmath.fft import FFT, DeviceCallable
from nvmath.fft._callbacks import callback_symbol, find_symbol


def _c64(rng, shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape) + 0.1).astype(np.complex64)


def test_create_key_equal_for_operands_of_the_same_plan(rng):
    """(2, 3, 64) and (3, 2, 64) over axis 2 need the same cuFFT plan: equal keys (GPU execution)."""
    k1 = FFT.create_key(_c64(rng, (2, 3, 64)), axes=(2,), execution="cuda")
    k2 = FFT.create_key(_c64(rng, (3, 2, 64)), axes=(2,), execution="cuda")
    k3 = FFT.create_key(_c64(rng, (6, 64)), axes=(1,), execution="cuda")
    assert k1 == k2 == k3 and hash(k1) == hash(k2)


def test_create_key_transposed_batch_strides_same_plan(rng):
    """Batch axes whose strides are transposed but collapse to the same batch stride: equal keys."""
    x = _c64(rng, (3, 2, 64))
    y = np.swapaxes(x, 0, 1)  # shape (2, 3, 64), strides (64, 128, 1): batch 6, distance 64
    assert FFT.create_key(y, axes=(2,), execution="cuda") == FFT.create_key(x, axes=(2,), execution="cuda")


def test_create_key_differs_for_another_plan(rng):
    """Another FFT size, batch count, dtype or callback: another key."""
    base = FFT.create_key(_c64(rng, (6, 64)), axes=(1,), execution="cuda")
    assert FFT.create_key(_c64(rng, (6, 32)), axes=(1,), execution="cuda") != base
    assert FFT.create_key(_c64(rng, (5, 64)), axes=(1,), execution="cuda") != base
    assert FFT.create_key(_c64(rng, (6, 64)).astype(np.complex128), axes=(1,), execution="cuda") != base
    cb = DeviceCallable(b"x" * 16)
    assert FFT.create_key(_c64(rng, (6, 64)), axes=(1,), execution="cuda", prolog=cb) != base


def test_get_key_matches_create_key(rng):
    """get_key() of a planned FFT equals create_key() of its operand (CPU execution)."""
    x = _c64(rng, (4, 32))
    with FFT(x, axes=(1,), execution="cpu") as f:
        f.plan()
        assert f.get_key() == FFT.create_key(x, axes=(1,), execution="cpu")


def test_inplace_on_non_overlapping_sliced_operand_accepted(rng):
    """An in-place FFT of a sliced view whose elements do not overlap runs and writes the view."""
    base = _c64(rng, (40,))
    # strides (3, 2) elements for shape (2, 3): offsets 0 2 4 / 3 5 7 -- disjoint, though the strides
    # do not nest (the view of a reshaped slice); only such exact checks accept it
    view = np.lib.stride_tricks.as_strided(base, shape=(2, 3), strides=(3 * 8, 2 * 8))
    ref = np.fft.fft(view.copy(), axis=1)
    with FFT(view, axes=(1,), options={"inplace": True}, execution="cpu") as f:
        f.plan()
        out = f.execute()
    assert out is view
    np.testing.assert_allclose(view, ref, rtol=1e-5, atol=1e-5)


def test_inplace_on_overlapping_operand_refused(rng):
    """Only truly overlapping operands are refused in place (ValueError naming the layout)."""
    base = _c64(rng, (64,))
    view = np.lib.stride_tricks.as_strided(base, shape=(4, 8), strides=(2 * 8, 8))
    with pytest.raises(ValueError, match="overlap"):
        FFT(view, axes=(1,), options={"inplace": True}, execution="cpu")


def test_fft_attributes_have_nvmath_python_meanings(rng):
    """options, execution_options, axes, inplace, package, spaces, device_id, dtypes, type, layout."""
    x = (rng.standard_normal((4, 6, 8)) + 0.5).astype(np.float32)
    opts = nf.FFTOptions(result_layout="natural")
    with FFT(x, axes=(-1, 1), options=opts, execution="cpu") as f:
        assert f.options.result_layout == "natural" and isinstance(f.options, nf.FFTOptions)
        assert f.execution_options.name == "cpu"
        assert f.axes == (2, 1)
        assert f.inplace is False
        assert f.package == "numpy"
        assert (f.memory_space, f.execution_space, f.device_id) == ("cpu", "cpu", "cpu")
        assert (f.operand_data_type, f.fft_abstract_type) == ("float32", "R2C")
        assert f.result_data_type == "complex64"
        layout = f.internal_operand_layout
        assert (layout.shape, layout.strides) == ((4, 6, 8), (48, 8, 1))
        assert f.get_input_layout() == ((4, 6, 8), (48, 8, 1))


def test_fft_attributes_cross_space(rng):
    """Host operand with GPU execution: memory_space 'cpu', execution_space 'cuda' (key only, no GPU)."""
    x = _c64(rng, (4, 8))
    key = FFT.create_key(x, axes=(1,), execution={"name": "cuda", "device_id": 0})
    assert key[-1] == ("cuda", 0)


def test_fft_options_mutated_between_calls(rng):
    """A mutated FFTOptions object is read afresh by the next call (no stale cached plan)."""
    x = (rng.standard_normal((4, 9)) + 0.5).astype(np.float32)
    spectrum = nf.rfft(x, axes=(1,), execution="cpu")
    o = nf.FFTOptions(last_axis_parity="even")
    even = nf.irfft(spectrum, axes=(1,), options=o, execution="cpu")
    o.last_axis_parity = "odd"
    odd = nf.irfft(spectrum, axes=(1,), options=o, execution="cpu")
    assert even.shape == (4, 8) and odd.shape == (4, 9)
    np.testing.assert_allclose(odd / 9, x, rtol=1e-4, atol=1e-4)


def test_callback_of_another_dtype_is_cufft_error():
    """A prolog compiled for complex128 used on complex64: cuFFTError (as nvmath-python) and ValueError."""
    from nvmath.fft._callbacks import CompiledCallback

    wrong = CompiledCallback(
        b"\0" * 32, kind="prolog", element_dtype="complex128", symbol=callback_symbol("prolog", "complex128")
    )
    with pytest.raises(cuFFTError) as info:
        find_symbol(DeviceCallable(wrong), "prolog", "complex64")
    assert isinstance(info.value, ValueError)
    assert callback_symbol("prolog", "complex64") in str(info.value)


def test_get_nvrtc_version():
    """nvmath._utils.get_nvrtc_version() gives (major, minor, patch) ints (the published examples use it)."""
    from nvmath._utils import get_nvrtc_version

    try:
        version = get_nvrtc_version()
    except RuntimeError as exc:
        pytest.skip(f"NVRTC not loadable here: {exc}")
    assert len(version) == 3 and all(isinstance(v, int) for v in version)
    assert version[0] >= 11


def test_fft_logger_option_is_used(rng, caplog):
    """options.logger receives the phase messages (nvmath-python's logger option)."""
    log = logging.getLogger("compat.fft")
    x = _c64(rng, (2, 8))
    with caplog.at_level(logging.INFO, logger="compat.fft"):
        nf.fft(x, axes=(1,), options={"logger": log}, execution="cpu")
    assert any(r.name == "compat.fft" for r in caplog.records)


@pytest.mark.parametrize(
    ("shape", "strides", "axes"),
    [((4, 64), (32, 1), (0, 1)), ((4, 64), (32, 1), (1,)), ((3, 4, 64), (1024, 32, 1), (1, 2))],
)
def test_overlapping_operand_read_as_nvmath_python_does(shape, strides, axes):
    """Out of place, an operand whose transformed rows overlap (as nvmath-python accepts, also with
    callbacks) is read directly: cuFFT's addressing of the plan visits exactly the operand's elements."""
    import math

    from nvmath.fft._traits import make_traits

    t = make_traits(shape, strides, "complex64", axes=axes, package="torch", operand_space="cuda")
    assert t.staging_strides is None and len(t.steps) == 1 and t.launches == 1
    step = t.steps[0]
    embed_strides = [step.istride * math.prod(step.inembed[k + 1 :]) for k in range(step.rank)]
    cufft = np.add.outer(np.arange(step.batch) * step.idist, 0)
    for n, s in zip(step.n, embed_strides):
        cufft = np.add.outer(cufft, np.arange(n) * s)
    batch_axes = [a for a in range(len(shape)) if a not in step.axes]
    order = batch_axes + list(step.axes)
    ours = np.zeros([shape[a] for a in order], dtype=np.int64)
    for i, a in enumerate(order):
        axis_offsets = np.arange(shape[a]) * strides[a]
        ours = ours + axis_offsets.reshape([-1 if j == i else 1 for j in range(len(order))])
    np.testing.assert_array_equal(np.sort(cufft.ravel()), np.sort(ours.ravel()))
    assert np.array_equal(cufft.reshape(ours.shape), ours)


def test_overlapping_operand_refused_in_place():
    """In place, overlapping rows stay refused (ValueError)."""
    from nvmath.fft._traits import make_traits

    with pytest.raises(ValueError):
        make_traits((4, 64), (32, 1), "complex64", axes=(1,), options=nf.FFTOptions(inplace=True))


def test_rfft_of_complex_is_runtime_error(rng):
    """rfft() of a complex operand raises RuntimeError as nvmath-python (and ValueError as before)."""
    x = _c64(rng, (4, 8))
    with pytest.raises(RuntimeError, match="real operand"):
        nf.rfft(x, execution="cpu")
    with pytest.raises(ValueError, match="real operand"):
        nf.rfft(x, execution="cpu")
    with pytest.raises(RuntimeError):
        FFT(x, options={"fft_type": "R2C"}, execution="cpu")


# ------------------------------------------------------------------------------ DeviceCallable
def test_device_callable_fields_in_nvmath_python_order_and_positional():
    """DeviceCallable(ltoir, size, data) positionally, as nvmath-python's dataclass (defaults None;
    data None means no user data, stored as 0); ``name`` (ours) comes after them."""
    import dataclasses

    fields = dataclasses.fields(DeviceCallable)
    assert [f.name for f in fields][:3] == ["ltoir", "size", "data"]
    assert [f.default for f in fields][:3] == [None, None, None]
    cb = DeviceCallable(0x1000, 64, 0x2000)
    assert (cb.ltoir, cb.size, cb.data, cb.name) == (0x1000, 64, 0x2000, None)
    cb = DeviceCallable(b"x" * 16, 16, None)
    assert (cb.ltoir, cb.size, cb.data) == (b"x" * 16, 16, 0)
    assert DeviceCallable() == DeviceCallable(None, None, None)


def test_device_callable_assigned_after_construction(rng):
    """Fields assigned after construction are what an FFT uses: the key equals that of a callable
    built with those values, and follows a later assignment."""
    x = _c64(rng, (6, 64))
    cb = DeviceCallable()
    cb.ltoir = b"y" * 32
    cb.data = 0x40
    key = FFT.create_key(x, axes=(1,), execution="cuda", prolog=cb)
    assert key == FFT.create_key(x, axes=(1,), execution="cuda", prolog=DeviceCallable(b"y" * 32, 32, 0x40))
    cb.data = 0x80
    assert FFT.create_key(x, axes=(1,), execution="cuda", prolog=cb) != key
    cb.ltoir, cb.size = 0x5000, 128  # an address (with its size) instead of bytes
    assert FFT.create_key(x, axes=(1,), execution="cuda", prolog=cb) == FFT.create_key(
        x, axes=(1,), execution="cuda", prolog=DeviceCallable(0x5000, 128, 0x80)
    )


def test_device_callable_bad_value_refused_when_used(rng):
    """A size that does not fit the LTO-IR, assigned after construction, is reported (ValueError, the
    value in the message) when an FFT takes the callable, before any GPU work; a value of the wrong
    kind is refused (TypeError) where it is assigned, and the field keeps its value."""
    x = _c64(rng, (6, 64))
    cb = DeviceCallable(b"z" * 8)
    cb.size = 9  # cheap per-field check passes; the rule across fields is checked on use
    with pytest.raises(ValueError, match=r"size=9 does not match the 8 bytes"):
        FFT.create_key(x, axes=(1,), execution="cuda", prolog=cb)
    with pytest.raises(ValueError, match=r"size=9"):
        nf.fft(x, axes=(1,), execution="cuda", epilog=cb)
    cb.ltoir = 0x1000
    cb.size = None
    with pytest.raises(ValueError, match="needs a positive int size; got None"):
        FFT.create_key(x, axes=(1,), execution="cuda", epilog=cb)
    with pytest.raises(TypeError, match="1.5"):
        cb.data = 1.5
    with pytest.raises(TypeError, match="str"):
        cb.ltoir = "not LTO-IR"
    assert (cb.ltoir, cb.data) == (0x1000, 0)


def test_device_callable_size_and_data_defaults():
    """nvmath-python's defaults: size = len(ltoir) for bytes, data = 0 (a null pointer) once an ltoir
    is given; an empty DeviceCallable keeps both None."""
    cb = DeviceCallable(b"\x01\x02\x03\x04")
    assert cb.size == 4 and cb.data == 0
    assert DeviceCallable(ltoir=b"xy", data=None).data == 0
    empty = DeviceCallable()
    assert empty.ltoir is None and empty.size is None and empty.data is None


@pytest.mark.parametrize("key", [("not", "a", "key"), (), "key", ("nvmath.fft", 1)])
def test_estimate_workspace_size_malformed_key_is_value_error(key):
    """A key not made by create_key raises ValueError, as in nvmath-python."""
    with pytest.raises(ValueError):
        nf.estimate_workspace_size(key)


@pytest.mark.parametrize(
    ("function", "kind", "fft_type", "error"),
    [
        ("rfft", "real", "C2C", ValueError),
        ("rfft", "real", "C2R", ValueError),
        ("fft", "complex", "C2R", ValueError),  # C2R runs only INVERSE
        ("fft", "complex", "R2C", ValueError),
        ("ifft", "complex", "R2C", ValueError),
    ],
)
def test_mismatched_fft_type_raises(rng, function, kind, fft_type, error):
    """An fft_type that does not fit the function and operand raises, as in nvmath-python (the option
    is not silently replaced)."""
    x = rng.standard_normal(16)
    if kind == "complex":
        x = x + 1j * rng.standard_normal(16)
    with pytest.raises(error):
        getattr(nf, function)(x, options={"fft_type": fft_type})


def test_fitting_fft_type_options_are_honoured(rng):
    """ifft with fft_type='C2R' is a C2R transform; irfft always computes C2R; rfft with 'R2C' runs."""
    x = rng.standard_normal(16)
    spec = np.fft.rfft(x)
    np.testing.assert_allclose(nf.ifft(spec, options={"fft_type": "C2R"}), x * 16, atol=1e-9)
    np.testing.assert_allclose(nf.irfft(spec, options={"fft_type": "C2C"}), x * 16, atol=1e-9)
    np.testing.assert_allclose(nf.rfft(x, options={"fft_type": "R2C"}), spec, atol=1e-9)
