"""Planner lifecycle: one state machine and one guard for every stateful planner.

A planner (``Matmul``, ``FFT``, ``DirectSolver``, ...) owns a :class:`Lifecycle` and guards each
public method with a :class:`StateGuard`, either with the :func:`requires` decorator or inline::

    class Matmul:
        def __init__(self, a, b, ...):
            ...                                     # everything that can fail comes first
            self._lifecycle = Lifecycle("Matmul", InvalidMatmulState)

        @requires(PlannerState.CREATED, PlannerState.PLANNED)
        def plan(self, ...): ...

        @requires(PlannerState.PLANNED, operands=True)
        def execute(self, ...): ...

        def free(self):                            # always allowed, idempotent
            ...
            self._lifecycle.mark_freed()

States go ``CREATED -> PLANNED -> FREED``; ``release_operands()`` sets a separate flag that
``reset_operands()`` clears. A refused call raises the planner's error class (a subclass of
:class:`nvmath._errors.InvalidPlannerState`, hence a ``RuntimeError``) with a message that names the
method, the state and the fix, e.g. ``"Matmul.execute() called before plan(): call plan() first"``.

**A method that fails leaves the object as it was.** Build new resources into locals, let an
``ExitStack`` close them if anything raises, and commit (assign attributes, then change state) only
at the end; for one object whose later steps may fail, :func:`freed_on_error` is that stack with
one entry (``with freed_on_error(planner): planner.plan(...)``)::

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def plan(self, ...):
        with contextlib.ExitStack() as undo:
            desc = undo.enter_context(MatmulDesc(...))     # RAII object with close()
            algos = query_algorithms(desc, ...)             # may raise: desc is closed
            undo.pop_all()                                  # success: keep what was built
        old, self._desc, self._algorithms = self._desc, desc, algos
        if old is not None:
            old.close()
        self._lifecycle.mark_planned()                      # state changes last

The guard costs one attribute read and one integer ``&`` (plus the decorator's call when used);
``benchmarks`` (suite ``overhead``) measures it.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import inspect
import linecache
from collections.abc import Callable, Iterator
from typing import Any, Self, TypeVar

from _thread import get_ident as _get_ident

from nvmath._errors import InvalidPlannerState

__all__ = ["FreedOnExit", "Lifecycle", "PlannerState", "StateGuard", "freed_on_error", "requires"]

F = TypeVar("F", bound=Callable[..., Any])

_STATE_MASK = 0b0111
_RELEASED = 0b1000


class FreedOnExit:
    """Mixin of the planners: ``with Planner(...) as p:`` calls ``p.free()`` on leaving the block.

    Planners are not picklable (nor copyable): pickling raises a ``TypeError`` that says why.
    """

    def free(self) -> None:
        raise NotImplementedError

    def __reduce_ex__(self, protocol: Any) -> Any:
        name = type(self).__name__
        raise TypeError(
            f"{name} objects cannot be pickled or copied: a planner owns library handles, plans, device "
            f"memory and streams that exist only in this process (and references to its operands); "
            f"create a new {name} from the operands where it is needed"
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()


@contextlib.contextmanager
def freed_on_error(obj: Any) -> Iterator[Any]:
    """Release ``obj`` (its ``free()``, else ``close()``) if the ``with`` block raises; the error propagates.

    The one rollback of an object built in steps (a planner constructed then planned, a descriptor
    created then configured).
    """
    try:
        yield obj
    except BaseException:
        release = getattr(obj, "free", None) or obj.close
        release()
        raise


class PlannerState(enum.Enum):
    """The lifecycle state of a planner."""

    CREATED = 1
    """Constructed (operands checked, traits computed); ``plan()`` has not succeeded yet."""
    PLANNED = 2
    """``plan()`` succeeded: the object can execute."""
    FREED = 4
    """``free()`` was called: every library resource is released; the object cannot be used again."""


class StateGuard:
    """A precomputed check: the states a method may run in, and whether it needs operands.

    Args:
        *allowed: the states in which the method may run.
        operands: ``True`` if the method needs the operands (refused after ``release_operands()``).
    """

    __slots__ = ("allowed", "forbidden", "operands")

    def __init__(self, *allowed: PlannerState, operands: bool = False):
        if not allowed or not all(isinstance(s, PlannerState) for s in allowed):
            raise TypeError(f"StateGuard needs at least one PlannerState; got {allowed!r}")
        self.allowed: frozenset[PlannerState] = frozenset(allowed)
        self.operands = bool(operands)
        mask = sum(s.value for s in self.allowed)
        self.forbidden: int = (_STATE_MASK & ~mask) | (_RELEASED if operands else 0)

    def check(self, lifecycle: Lifecycle, method: str) -> None:
        """Raise the planner's state error unless ``lifecycle`` allows ``method`` now."""
        if lifecycle.bits & self.forbidden:
            raise lifecycle.error(method, self)

    def __repr__(self) -> str:
        names = ", ".join(sorted(s.name for s in self.allowed))
        return f"StateGuard({names}, operands={self.operands})"


class Lifecycle:
    """The state of one planner object.

    Args:
        planner: the planner's public name, used in messages (e.g. ``"Matmul"``).
        error_class: the exception raised by a refused call; a subclass of
            :class:`~nvmath._errors.InvalidPlannerState`.
        reset_method: the name of the method that supplies new operands (for messages).
        release_method: the name of the method that releases the operands (for messages).
    """

    __slots__ = ("bits", "error_class", "owner", "planner", "release_method", "reset_method")

    def __init__(
        self,
        planner: str,
        error_class: type[InvalidPlannerState] = InvalidPlannerState,
        *,
        reset_method: str = "reset_operands",
        release_method: str = "release_operands",
    ):
        if not (isinstance(error_class, type) and issubclass(error_class, InvalidPlannerState)):
            raise TypeError(f"error_class must subclass InvalidPlannerState; got {error_class!r}")
        self.bits: int = PlannerState.CREATED.value
        self.owner: int | None = None  # the thread inside a guarded method (see requires)
        self.planner = planner
        self.error_class = error_class
        self.reset_method = reset_method
        self.release_method = release_method

    @property
    def state(self) -> PlannerState:
        """The current :class:`PlannerState`."""
        return PlannerState(self.bits & _STATE_MASK)

    @property
    def operands_released(self) -> bool:
        """Whether ``release_operands()`` was called since the last ``reset_operands()``."""
        return bool(self.bits & _RELEASED)

    def mark_planned(self) -> None:
        """Record a successful ``plan()``; raises if the object was freed."""
        if self.bits & PlannerState.FREED.value:
            raise self.error("plan", StateGuard(PlannerState.CREATED, PlannerState.PLANNED))
        self.bits = PlannerState.PLANNED.value | (self.bits & _RELEASED)

    def mark_freed(self) -> None:
        """Record ``free()``; idempotent."""
        self.bits = PlannerState.FREED.value | (self.bits & _RELEASED)

    def mark_operands_released(self) -> None:
        """Record ``release_operands()``."""
        self.bits |= _RELEASED

    def mark_operands_reset(self) -> None:
        """Record that new operands were supplied."""
        self.bits &= ~_RELEASED

    def require(self, method: str, guard: StateGuard) -> None:
        """Raise the planner's state error unless ``guard`` allows ``method`` now."""
        if self.bits & guard.forbidden:
            raise self.error(method, guard)

    def error(self, method: str, guard: StateGuard) -> InvalidPlannerState:
        """Build (not raise) the error for ``method`` refused by ``guard`` in the current state."""
        state, call = self.state, f"{self.planner}.{method}()"
        allowed = guard.allowed
        if state is PlannerState.FREED and state not in allowed:
            msg = f"{call} called after free(): create a new {self.planner}"
        elif state is PlannerState.CREATED and state not in allowed and PlannerState.PLANNED in allowed:
            msg = f"{call} called before plan(): call plan() first"
        elif state in allowed and guard.operands and self.operands_released:
            fix = f"call {self.reset_method}() with new operands first"
            msg = f"{call} called after {self.release_method}(): {fix}"
        else:
            names = ", ".join(sorted(s.name for s in allowed))
            msg = f"{call} cannot be called in state {state.name} (allowed: {names})"
        return self.error_class(msg)

    def concurrent(self, method: str) -> InvalidPlannerState:
        """Build the error for ``method`` called while another thread is inside a guarded method."""
        return self.error_class(
            f"{self.planner}.{method}() called while another thread is running a method of the same "
            f"{self.planner}: a planner is used by one thread at a time (use one per thread, or hold "
            "a lock around each sequence of calls)"
        )

    def __repr__(self) -> str:
        released = self.operands_released
        return f"Lifecycle({self.planner!r}, state={self.state.name}, operands_released={released})"


def _forwarder_source(method: Callable[..., Any], attr: str) -> tuple[str, dict[str, Any]]:
    """Source of a wrapper with ``method``'s exact signature (no ``*args``/``**kwargs`` repacking)."""
    params = list(inspect.signature(method).parameters.values())
    P = inspect.Parameter
    decl: list[str] = []
    call: list[str] = []
    env: dict[str, Any] = {}
    star_done = False
    for i, p in enumerate(params):
        default = ""
        if p.default is not P.empty:
            env[f"_nvm_d{i}"] = p.default
            default = f"=_nvm_d{i}"
        if p.kind is P.VAR_POSITIONAL:
            decl.append(f"*{p.name}")
            call.append(f"*{p.name}")
            star_done = True
        elif p.kind is P.VAR_KEYWORD:
            decl.append(f"**{p.name}")
            call.append(f"**{p.name}")
        elif p.kind is P.KEYWORD_ONLY:
            if not star_done:
                decl.append("*")
                star_done = True
            decl.append(p.name + default)
            call.append(f"{p.name}={p.name}")
        else:
            decl.append(p.name + default)
            call.append(p.name)
            last_positional_only = p.kind is P.POSITIONAL_ONLY
            nxt = params[i + 1] if i + 1 < len(params) else None
            if last_positional_only and (nxt is None or nxt.kind is not P.POSITIONAL_ONLY):
                decl.append("/")
    self_name = params[0].name
    src = (
        f"def _nvm_guarded({', '.join(decl)}):\n"
        f"    _nvm_lc = {self_name}.{attr}\n"
        f"    if _nvm_lc.bits & _nvm_forbidden:\n"
        f"        raise _nvm_lc.error(_nvm_name, _nvm_guard)\n"
        f"    _nvm_owner = _nvm_lc.owner\n"
        f"    if _nvm_owner is not None:\n"
        f"        if _nvm_owner != _nvm_ident():\n"
        f"            raise _nvm_lc.concurrent(_nvm_name)\n"
        f"        return _nvm_method({', '.join(call)})\n"
        f"    _nvm_lc.owner = _nvm_ident()\n"
        f"    try:\n"
        f"        return _nvm_method({', '.join(call)})\n"
        f"    finally:\n"
        f"        _nvm_lc.owner = None\n"
    )
    return src, env


def _generic_forwarder(method: Callable[..., Any], attr: str, guard: StateGuard) -> Callable[..., Any]:
    name, forbidden = method.__name__, guard.forbidden

    def guarded(self, *args, **kwargs):
        lifecycle = getattr(self, attr)
        if lifecycle.bits & forbidden:
            raise lifecycle.error(name, guard)
        owner = lifecycle.owner
        if owner is not None:
            if owner != _get_ident():
                raise lifecycle.concurrent(name)
            return method(self, *args, **kwargs)  # a guarded method calling another
        lifecycle.owner = _get_ident()
        try:
            return method(self, *args, **kwargs)
        finally:
            lifecycle.owner = None

    return guarded


def requires(*allowed: PlannerState, operands: bool = False, attr: str = "_lifecycle") -> Callable[[F], F]:
    """Decorate a planner method so that it runs only in the ``allowed`` states, one thread at a time.

    **Threads.** A planner is used by one thread at a time. The wrapper records the calling thread in
    the lifecycle's ``owner`` for the duration of the call (a guarded method may call another on the
    same object in the same thread); a second thread entering any guarded method of the same object
    while the first is inside one gets the planner's state error (a ``RuntimeError``) at once instead
    of a result computed from the other thread's operands. The check is a flag, not a lock (a lock's
    non-blocking acquire and release cost ~5x more): two threads entering in the same few bytecodes
    may both pass, so it detects overlapping use, it does not make it safe. Calls that do not overlap
    are not detected: sequences such as ``reset_operands(); execute()`` interleaved by two threads
    must be serialized by the caller. Cost: one ``get_ident()`` and two attribute stores per call.

    The wrapper is generated with the method's exact signature, so it adds about one Python call
    (tens of nanoseconds) to the method, with no argument repacking. It is generated as source (and
    the source registered with :mod:`linecache`, so its frame reads in a traceback) rather than written
    as a plain ``*args, **kwargs`` decorator because that one is measurably slower on the hot path:
    ``execute()`` through it cost about 390-515 ns per call against 190-205 ns for the generated one
    (Python 3.11, ``timeit`` on the CPU, 2026-12; the plain decorator is kept as the fallback for
    methods without an introspectable signature).

    Args:
        *allowed: the states in which the method may run.
        operands: ``True`` if the method needs the operands (refused after ``release_operands()``).
        attr: the name of the instance attribute holding the :class:`Lifecycle`.

    Returns:
        A decorator; the wrapped method raises the planner's state error when refused.
    """
    guard = StateGuard(*allowed, operands=operands)
    if not attr.isidentifier():
        raise ValueError(f"attr must be an attribute name; got {attr!r}")

    def decorate(method: F) -> F:
        try:
            src, env = _forwarder_source(method, attr)
        except (TypeError, ValueError, IndexError):  # no introspectable signature
            guarded = _generic_forwarder(method, attr, guard)
        else:
            env.update(
                _nvm_method=method,
                _nvm_name=method.__name__,
                _nvm_guard=guard,
                _nvm_forbidden=guard.forbidden,
                _nvm_ident=_get_ident,
            )
            filename = f"<state guard of {method.__module__}.{method.__qualname__}>"
            linecache.cache[filename] = (len(src), None, src.splitlines(keepends=True), filename)
            exec(compile(src, filename, "exec"), env)  # noqa: S102
            guarded = env["_nvm_guarded"]
        functools.update_wrapper(guarded, method)
        guarded.__state_guard__ = guard  # type: ignore[attr-defined]
        return guarded  # type: ignore[return-value]

    return decorate
