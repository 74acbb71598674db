"""Tests of nvmath._internal.state: the planner state machine and its guard."""

from __future__ import annotations

import contextlib
import inspect

import pytest
from call_profile import c_calls, profile_calls, python_calls

from nvmath._errors import InvalidFFTState, InvalidMatmulState, InvalidPlannerState
from nvmath._internal.state import Lifecycle, PlannerState, StateGuard, requires


class Resource:
    """A RAII stand-in for a library descriptor."""

    def __init__(self, log, fail=False):
        if fail:
            raise RuntimeError("library refused")
        self.log, self.closed = log, False
        log.append("open")

    def close(self):
        self.closed = True
        self.log.append("close")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Toy:
    """A minimal planner following the documented pattern."""

    def __init__(self):
        self.log = []
        self.desc = None
        self._lifecycle = Lifecycle("Matmul", InvalidMatmulState)

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def plan(self, *, fail_after_open=False):
        with contextlib.ExitStack() as undo:
            desc = undo.enter_context(Resource(self.log))
            if fail_after_open:
                raise ValueError("heuristic found nothing")
            undo.pop_all()
        old, self.desc = self.desc, desc
        if old is not None:
            old.close()
        self._lifecycle.mark_planned()

    @requires(PlannerState.PLANNED, operands=True)
    def execute(self, *, algorithm=None, release_workspace=False, stream=None):
        """Execute the toy."""
        return ("ran", algorithm, release_workspace, stream)

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def reset_operands(self, a=None, /, *, b=None):
        self._lifecycle.mark_operands_reset()
        return a, b

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def release_operands(self):
        self._lifecycle.mark_operands_released()

    def free(self):
        if self.desc is not None:
            self.desc.close()
            self.desc = None
        self._lifecycle.mark_freed()


def test_initial_state():
    """A new lifecycle is CREATED with operands attached."""
    lc = Lifecycle("Matmul")
    assert lc.state is PlannerState.CREATED and not lc.operands_released


def test_execute_before_plan_names_method_state_and_fix():
    """execute() before plan() raises the planner's error saying to call plan() first."""
    t = Toy()
    with pytest.raises(
        InvalidMatmulState, match=r"^Matmul\.execute\(\) called before plan\(\): call plan\(\) first$"
    ):
        t.execute()


def test_before_plan_error_is_a_runtime_error():
    """The 'before plan' error is also a RuntimeError and an InvalidPlannerState."""
    with pytest.raises(RuntimeError) as info:
        Toy().execute()
    assert isinstance(info.value, InvalidPlannerState)


def test_after_free():
    """Any guarded call after free() says to create a new object."""
    t = Toy()
    t.plan()
    t.free()
    for call in (t.execute, t.plan, t.reset_operands):
        with pytest.raises(InvalidMatmulState, match=r"called after free\(\): create a new Matmul"):
            call()


def test_free_is_idempotent():
    """free() may be called repeatedly and leaves the FREED state."""
    t = Toy()
    t.free()
    t.free()
    assert t._lifecycle.state is PlannerState.FREED


def test_released_operands():
    """execute() after release_operands() asks for reset_operands(); reset restores execution."""
    t = Toy()
    t.plan()
    t.release_operands()
    with pytest.raises(
        InvalidMatmulState, match=r"after release_operands\(\): call reset_operands\(\) with new"
    ):
        t.execute()
    t.reset_operands(1, b=2)
    assert t.execute(stream=5) == ("ran", None, False, 5)


def test_custom_method_names_and_error_class():
    """The error class and the reset/release method names are configurable per planner."""
    lc = Lifecycle("FFT", InvalidFFTState, reset_method="reset_operand", release_method="release_operand")
    lc.mark_planned()
    lc.mark_operands_released()
    with pytest.raises(
        InvalidFFTState, match=r"FFT\.execute\(\) called after release_operand\(\): call reset_operand\(\)"
    ):
        lc.require("execute", StateGuard(PlannerState.PLANNED, operands=True))


def test_generic_message_for_other_refusals():
    """A refusal not covered by the common cases names the state and the allowed states."""
    lc = Lifecycle("Matmul")
    lc.mark_planned()
    with pytest.raises(InvalidPlannerState, match=r"cannot be called in state PLANNED \(allowed: CREATED\)"):
        StateGuard(PlannerState.CREATED).check(lc, "configure")


def test_failed_method_leaves_object_unchanged():
    """A plan() that fails closes what it opened and keeps the previous plan and state."""
    t = Toy()
    with pytest.raises(ValueError):
        t.plan(fail_after_open=True)
    assert t._lifecycle.state is PlannerState.CREATED and t.desc is None
    assert t.log == ["open", "close"]
    t.plan()
    first = t.desc
    with pytest.raises(ValueError):
        t.plan(fail_after_open=True)
    assert t.desc is first and not first.closed and t._lifecycle.state is PlannerState.PLANNED


def test_replan_closes_previous_resources():
    """A successful re-plan replaces and closes the previous descriptor."""
    t = Toy()
    t.plan()
    first = t.desc
    t.plan()
    assert first.closed and not t.desc.closed


def test_mark_planned_after_free_refused():
    """mark_planned() on a freed lifecycle raises instead of resurrecting it."""
    lc = Lifecycle("Matmul", InvalidMatmulState)
    lc.mark_freed()
    with pytest.raises(InvalidMatmulState, match="after free"):
        lc.mark_planned()


def test_decorator_keeps_signature_and_metadata():
    """The generated wrapper keeps the method's signature, name, docstring and argument passing."""
    assert (
        str(inspect.signature(Toy.execute))
        == "(self, *, algorithm=None, release_workspace=False, stream=None)"
    )
    assert Toy.execute.__name__ == "execute" and Toy.execute.__doc__ == "Execute the toy."
    assert Toy.execute.__state_guard__.operands
    t = Toy()
    assert t.reset_operands(1, b=2) == (1, 2)
    with pytest.raises(TypeError):
        t.reset_operands(a=1)  # positional-only stays positional-only


def test_decorator_varargs_and_custom_attribute():
    """The decorator forwards *args/**kwargs and can read the lifecycle from another attribute."""

    class P:
        def __init__(self):
            self.lc = Lifecycle("P")

        @requires(PlannerState.CREATED, attr="lc")
        def f(self, a, /, b=[], *args, c, d=2, **kw):  # noqa: B006
            return a, b, args, c, d, kw

    assert P().f(1, 2, 3, c=4, e=5) == (1, 2, (3,), 4, 2, {"e": 5})
    assert P().f(1, c=0)[1] == []


def test_guard_validation():
    """StateGuard needs PlannerState values; requires needs an identifier; error_class must fit."""
    with pytest.raises(TypeError):
        StateGuard()
    with pytest.raises(TypeError):
        StateGuard("PLANNED")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        requires(PlannerState.PLANNED, attr="not an attr")
    with pytest.raises(TypeError):
        Lifecycle("X", ValueError)  # type: ignore[arg-type]


class _Guarded:
    """A planned object with the same method unguarded (``bare``) and guarded (``guarded``)."""

    def __init__(self, lifecycle=None):
        self._lifecycle = lifecycle if lifecycle is not None else Lifecycle("P")
        self._lifecycle.mark_planned()

    def bare(self, *, stream=None):
        return stream

    @requires(PlannerState.PLANNED, operands=True)
    def guarded(self, *, stream=None):
        return stream


def test_guard_adds_one_frame_and_no_calls():
    """On the allowed path the guard is one Python frame around the method and one C call (the thread
    ident of the one-thread-at-a-time flag): no other call, no argument repacking (its speed is measured
    by the benchmarks' overhead/planner-guard row)."""
    p = _Guarded()
    bare, guarded = profile_calls(lambda: p.bare(stream=1)), profile_calls(lambda: p.guarded(stream=1))
    assert python_calls(bare) == ["bare"] and c_calls(bare) == []
    assert len(python_calls(guarded)) == 2 and python_calls(guarded)[1] == "guarded"
    assert c_calls(guarded) == ["get_ident"]


def test_guard_reads_only_the_state_bits():
    """On the allowed path the guard reads two attributes of the Lifecycle (its state bits and the owning
    thread), nothing else."""
    reads: list[str] = []

    class CountingLifecycle(Lifecycle):
        __slots__ = ()

        def __getattribute__(self, name):
            reads.append(name)
            return object.__getattribute__(self, name)

    p = _Guarded(CountingLifecycle("P"))
    reads.clear()
    assert p.guarded(stream=3) == 3
    assert reads == ["bits", "owner"]


def test_freed_on_error_releases_only_on_failure():
    """freed_on_error frees the object when the block raises (and re-raises), and keeps it otherwise."""
    from nvmath._internal.state import freed_on_error

    class Thing:
        freed = 0

        def free(self):
            self.freed += 1

    kept, lost = Thing(), Thing()
    with freed_on_error(kept):
        pass
    with pytest.raises(ValueError, match="boom"), freed_on_error(lost):
        raise ValueError("boom")
    assert (kept.freed, lost.freed) == (0, 1)


def test_guard_frames_show_their_source():
    """A refused call's traceback shows the guard's line (its generated source is in linecache)."""
    import linecache
    import traceback

    class Planner:
        def __init__(self):
            self._lifecycle = Lifecycle("Planner", InvalidMatmulState)

        @requires(PlannerState.PLANNED)
        def execute(self, *, stream=None):
            return stream

    with pytest.raises(InvalidMatmulState) as info:
        Planner().execute()
    frames = traceback.extract_tb(info.value.__traceback__)
    guard = [f for f in frames if f.filename.startswith("<state guard of")]
    assert guard and "raise" in guard[0].line and linecache.getline(guard[0].filename, guard[0].lineno)
