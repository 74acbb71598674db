"""The FFT planner on the CPU: lifecycle, operand swaps, directions, layouts and keys."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import nvmath.fft as nf
from nvmath._errors import InvalidFFTState
from nvmath.fft import FFT, DeviceCallable, FFTDirection


@pytest.fixture
def x(rng):
    """A complex128 operand."""
    return rng.uniform(-1, 1, (4, 8)) + 1j * rng.uniform(-1, 1, (4, 8))


def test_signatures_match_nvmath_python():
    """The public signatures are nvmath-python 1.0's (operand positional-only, the same keywords)."""
    p = inspect.signature(FFT).parameters
    assert list(p) == ["operand", "axes", "options", "execution", "stream"]
    assert p["operand"].kind is inspect.Parameter.POSITIONAL_ONLY
    assert list(inspect.signature(FFT.plan).parameters) == ["self", "prolog", "epilog", "stream", "direction"]
    ex = inspect.signature(FFT.execute).parameters
    assert list(ex) == ["self", "direction", "stream", "release_workspace"]
    assert ex["direction"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert list(inspect.signature(nf.fft).parameters) == [
        "operand", "axes", "direction", "options", "execution", "prolog", "epilog", "stream", "check_dtype",
    ]  # fmt: skip
    assert list(inspect.signature(nf.irfft).parameters) == [
        "operand", "axes", "options", "execution", "prolog", "epilog", "stream",
    ]  # fmt: skip


def test_execute_before_plan_raises(x):
    """execute() before plan() raises InvalidFFTState (a RuntimeError) naming the fix."""
    f = FFT(x)
    with pytest.raises(InvalidFFTState, match=r"FFT.execute\(\) called before plan\(\)"):
        f.execute()
    assert issubclass(InvalidFFTState, RuntimeError)


def test_use_after_free_raises(x):
    """Every method but free() raises after free(); free() is idempotent."""
    f = FFT(x)
    f.plan()
    f.free()
    f.free()
    for call in (f.plan, f.execute, f.release_operand, lambda: f.reset_operand(x)):
        with pytest.raises(InvalidFFTState, match="after free"):
            call()


def test_context_manager_frees(x):
    """Leaving the with-block frees the planner."""
    with FFT(x) as f:
        f.plan()
        f.execute()
    with pytest.raises(InvalidFFTState):
        f.execute()


def test_plan_twice_is_a_no_op(x):
    """A second plan() does nothing."""
    with FFT(x) as f:
        f.plan()
        f.plan()
        np.testing.assert_allclose(f.execute(), np.fft.fft2(x))


def test_reset_operand_swaps_data(x, rng):
    """reset_operand() with a matching operand transforms the new data."""
    y = rng.uniform(-1, 1, x.shape) + 0j
    with FFT(x) as f:
        f.plan()
        f.reset_operand(y)
        np.testing.assert_allclose(f.execute(), np.fft.fft2(y))
        f.reset_operand_unchecked(x)
        np.testing.assert_allclose(f.execute(), np.fft.fft2(x))


def test_release_then_execute_raises(x):
    """After release_operand() (or reset_operand(None)) execute() asks for reset_operand()."""
    with FFT(x) as f:
        f.plan()
        f.release_operand()
        with pytest.raises(InvalidFFTState, match=r"reset_operand\(\)"):
            f.execute()
        f.reset_operand(x)
        f.execute()
        f.reset_operand(None)
        with pytest.raises(InvalidFFTState, match="release_operand"):
            f.execute()


def test_directions(x):
    """C2C executes both ways; plan(direction=) sets the default; R2C refuses INVERSE."""
    with FFT(x, axes=[1]) as f:
        f.plan(direction="inverse")
        np.testing.assert_allclose(f.execute(), np.fft.ifft(x, axis=1, norm="forward"))
        np.testing.assert_allclose(f.execute(FFTDirection.FORWARD), np.fft.fft(x, axis=1))
        np.testing.assert_allclose(f.execute(-1), np.fft.fft(x, axis=1))
    with FFT(x.real) as f:
        f.plan()
        with pytest.raises(ValueError, match="R2C transform runs only FORWARD"):
            f.execute(FFTDirection.INVERSE)
    with (
        FFT(x, options={"fft_type": "C2R"}) as f,
        pytest.raises(ValueError, match="C2R transform runs only INVERSE"),
    ):
        f.plan(direction="forward")


def test_layouts_reported(x):
    """get_input_layout / get_output_layout give shapes and element strides."""
    with FFT(np.ascontiguousarray(x.real), axes=[1]) as f:
        assert f.get_input_layout() == ((4, 8), (8, 1))
        assert f.get_output_layout() == ((4, 5), (5, 1))


def test_keys(x, rng):
    """Keys are equal for equal layouts and differ when anything that decides the plan differs."""
    y = rng.uniform(-1, 1, x.shape) + 0j
    k = FFT.create_key(x)
    assert k == FFT.create_key(y) and hash(k) == hash(FFT.create_key(y))
    assert k == FFT.create_key_from_metadata(x.shape, "complex128", "cpu")
    assert k == FFT.create_key_from_metadata(x.shape, np.complex128, "cpu", strides=(8, 1))
    with FFT(x) as f:
        assert f.get_key() == k
    assert k != FFT.create_key(x, axes=[1])
    assert k != FFT.create_key(np.asfortranarray(x)), "another memory order: another plan"
    assert k == FFT.create_key(x.T), "the same plan over the same memory (as on the GPU)"
    assert k != FFT.create_key(x.astype(np.complex64))
    k0 = FFT.create_key(x, axes=[0])
    assert k0 != FFT.create_key(x, axes=[0], options={"result_layout": "natural"})
    assert k == FFT.create_key(x, options={"result_layout": "natural"}), "the same plan: the same key"
    assert k != FFT.create_key(x, execution={"name": "cpu", "num_threads": 2})
    assert k != FFT.create_key(x, prolog=DeviceCallable(b"\x01"))
    with pytest.raises(ValueError, match="memory_space"):
        FFT.create_key_from_metadata((4,), "complex64", "gpu")


def test_estimate_workspace_size_cpu_and_errors(x):
    """CPU keys need no workspace; bad keys and techniques raise."""
    assert nf.estimate_workspace_size(FFT.create_key(x)) == 0
    with pytest.raises(ValueError, match="create_key"):  # nvmath-python's type for a malformed key
        nf.estimate_workspace_size(("not", "a", "key"))
    with pytest.raises(ValueError, match="'exact'"):
        nf.estimate_workspace_size(FFT.create_key(x), technique="exact")


def test_callbacks_on_cpu_raise_and_leave_state(x):
    """Callbacks with CPU execution raise ValueError; the planner stays usable."""
    f = FFT(x)
    with pytest.raises(ValueError, match="GPU only"):
        f.plan(prolog=DeviceCallable(b"\x00\x01"))
    f.plan()
    f.execute()
    f.free()


def test_repr(x):
    """repr names the transform and the state."""
    f = FFT(x)
    assert "C2C" in repr(f) and "CREATED" in repr(f)
