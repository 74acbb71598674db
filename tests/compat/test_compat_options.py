"""Options objects behave as nvmath-python 1.0's: mutable positional dataclasses (advanced matmul,
FFT), frozen keyword-only ones where nvmath-python's are, validated on assignment and when a planner
takes them, and safe as plan-cache keys after the caller mutates them."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

import nvmath.fft as nf
import nvmath.linalg as la
import nvmath.linalg.advanced as adv
from nvmath._internal.options import check_or_create_options, freeze_options


@pytest.mark.parametrize(
    ("cls", "fields"),
    [
        (adv.MatmulOptions, ["inplace", "compute_type", "scale_type", "result_type", "result_amax",
                             "block_scaling", "sm_count_target", "fast_accumulation", "device_id", "handle",
                             "logger", "memory_limit", "blocking", "allocator"]),
        (adv.MatmulPlanPreferences, ["reduction_scheme_mask", "max_waves_count", "numerical_impl_mask",
                                     "limit", "epilog"]),
        (adv.MatmulEpilogPreferences, ["aux_type", "aux_amax"]),
        (adv.MatmulQuantizationScales, ["a", "b", "c", "d"]),
        (nf.FFTOptions, ["fft_type", "inplace", "last_axis_parity", "result_layout", "logger", "blocking",
                         "allocator"]),
    ],
)  # fmt: skip
def test_mutable_options_have_nvmath_python_positional_field_order(cls, fields):
    """The first fields, in order, are nvmath-python's, and each can be given positionally."""
    params = list(inspect.signature(cls).parameters.values())
    assert [p.name for p in params[: len(fields)]] == fields
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params)
    assert not cls.__dataclass_params__.frozen


def test_matmul_options_assigned_after_construction():
    """``o = MatmulOptions(); o.result_type = ...`` works; the value is normalized."""
    o = adv.MatmulOptions()
    o.result_type = 14  # CUDA_R_16BF
    o.compute_type = 77
    assert o.result_type == 14
    assert o.compute_type == adv.MatmulComputeType.COMPUTE_32F_FAST_TF32


@pytest.mark.parametrize(
    ("obj", "field", "value", "exc"),
    [
        (adv.MatmulOptions(), "blocking", False, ValueError),
        (adv.MatmulOptions(), "inplace", "yes", TypeError),
        (adv.MatmulOptions(), "memory_limit", "lots", ValueError),
        (adv.MatmulPlanPreferences(), "limit", 0, ValueError),
        (adv.MatmulEpilogPreferences(), "aux_type", 1000, ValueError),
        (nf.FFTOptions(), "last_axis_parity", "any", ValueError),
        (nf.FFTOptions(), "fft_type", "X2Y", ValueError),
    ],
)
def test_bad_assignment_is_refused_and_leaves_the_field(obj, field, value, exc):
    """A bad value is reported where it is assigned (the value in the message); the field keeps its value."""
    before = getattr(obj, field)
    with pytest.raises(exc, match=repr(value).strip("'")):
        setattr(obj, field, value)
    assert getattr(obj, field) == before


def test_cross_field_rules_checked_when_a_planner_takes_the_object():
    """FFTOptions(inplace=True) then fft_type='C2R' is accepted on assignment, refused on use."""
    o = nf.FFTOptions(inplace=True)
    o.fft_type = "C2R"
    with pytest.raises(ValueError, match="inplace"):
        check_or_create_options(nf.FFTOptions, o, "FFT options")


def test_dicts_still_accepted():
    """A dict of fields is accepted wherever an options object is."""
    o = check_or_create_options(adv.MatmulOptions, {"result_type": 0, "blocking": True}, "options")
    assert (o.result_type, o.blocking) == (0, True)


def test_planner_keeps_a_frozen_snapshot_so_cache_keys_stay_valid():
    """A planner's copy is frozen and hashable; mutating the caller's object gives a new, unequal key."""
    o = adv.MatmulOptions(blocking=True)
    snap = freeze_options(o)
    key = hash(snap)
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.blocking = "auto"
    assert freeze_options(o) is snap  # unchanged object: the same snapshot, no cost
    o.blocking = "auto"
    new = freeze_options(o)
    assert new is not snap and new != snap
    assert hash(snap) == key and snap.blocking is True


def test_nested_epilog_preferences_snapshot_follows_changes():
    """Changing ``prefs.epilog.aux_amax`` after a snapshot gives a new snapshot."""
    p = adv.MatmulPlanPreferences(epilog={"aux_amax": False})
    first = freeze_options(p)
    p.epilog.aux_amax = True
    second = freeze_options(p)
    assert second.epilog.aux_amax is True and first.epilog.aux_amax is False


def test_stateless_matmul_key_follows_mutated_options(fake_gpu):
    """The stateless cache keys on the options' values: a mutated options object is another key."""
    import numpy as np

    from nvmath.linalg.advanced import _stateless

    a = fake_gpu.fake(np.ones((4, 3), np.float32))
    b = fake_gpu.fake(np.ones((3, 5), np.float32))
    wrapped = {"a": fake_gpu.FakeAdapter(a), "b": fake_gpu.FakeAdapter(b)}
    o = adv.MatmulOptions(sm_count_target=0)
    k1 = _stateless.stateless_key(wrapped, options=o)
    o.sm_count_target = 4
    k2 = _stateless.stateless_key(wrapped, options=o)
    assert k1 != k2 and hash(k1) != hash(k2)


@pytest.mark.parametrize("cls", [la.ExecutionCUDA, la.ExecutionCPU, la.DirectSolverOptions])
def test_frozen_keyword_only_where_nvmath_python_has_them(cls):
    """Execution* and DirectSolverOptions stay frozen and keyword-only, as nvmath-python's."""
    obj = cls()
    field = dataclasses.fields(obj)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(obj, field, getattr(obj, field))
    params = inspect.signature(cls).parameters.values()
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)


def test_direct_solver_options_execution_stream_positional():
    """``DirectSolver(a, b, options, execution, stream)`` takes them positionally, as nvmath-python."""
    params = list(inspect.signature(la.DirectSolver).parameters.values())
    assert [p.name for p in params] == ["a", "b", "options", "execution", "stream"]
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params)


def test_execution_dict_without_name_runs_in_the_operands_space():
    """``execution={"num_threads": 2}`` for numpy operands runs on the CPU (nvmath-python's default name)."""
    import numpy as np

    import nvmath.fft
    import nvmath.linalg

    x = np.arange(8, dtype=np.complex128)
    np.testing.assert_allclose(nvmath.fft.fft(x, execution={"num_threads": 2}), np.fft.fft(x))
    a = np.eye(3)
    np.testing.assert_allclose(nvmath.linalg.matmul(a, a, execution={"num_threads": 1}), a)
