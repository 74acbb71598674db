"""The one place that calls ``cublasLtMatmul``: :class:`MatmulLaunch`, built when a plan is committed.

A launch holds every argument of one plan's call that does not change between calls: the descriptor,
layouts and host scalars, the algorithm and its workspace size, the cuBLASLt handle option, the
operand swap (a product formed as ``(B^T A^T)^T``), a staged operand copy, the aux outputs (and the
library's FP8 aux step) and the rules for the stream's context and the done event. A call gives only
what changes: the stream and the operand and result addresses. :meth:`MatmulLaunch.run` is the
sequence every execute path shares (``Matmul.execute``, the stateless ``matmul``, an
:class:`~._direct.AddressRun`, an algorithm of a retired formulation); :meth:`MatmulLaunch.enqueue`
is the bare call autotuning times.

The library call itself goes through one *caller* made by :data:`make_caller` from the fixed
arguments: :func:`compiled_caller`, an ``nvmath._fastcall.FastCall`` holding the descriptor, scalars
and layouts with the handle, operands, algorithm, workspace and stream as its per-call slots, when the
compiled path is active; else :func:`python_caller`, the reference, over the unchecked binding. Both
take the same arguments and make the same call (the handle, algorithm and workspace stay per-call
values: the thread's handle, ``select()`` and a regrown workspace change them between calls).

A launch belongs to the plan it was built from: re-planning builds a new one, so a launch never
runs a stale layout; :meth:`MatmulLaunch.close` (the planner's ``free()``, or a replaced plan) makes
every later run raise :class:`~nvmath._errors.InvalidMatmulState` before touching anything (one flag
test per run).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nvmath._errors import InvalidMatmulState
from nvmath._internal import fastpath, streams
from nvmath._internal.memory import Workspace
from nvmath._internal.streams import StreamHandle
from nvmath.bindings._unchecked import cublasLt as lt_unchecked
from nvmath.bindings.cublasLt import cuBLASLtError
from nvmath.linalg.advanced import _handles
from nvmath.linalg.advanced._handles import POOL_GET as _POOL_GET
from nvmath.linalg.advanced._handles import handles_here as _HERE

__all__ = [
    "BoundWorkspace", "Caller", "MatmulLaunch", "compiled_caller", "make_caller", "python_caller", "twin_arguments",
]

Caller = Callable[[int, int, int, int, int, int, int, int, int], None]
"""``call(lt_handle, a, b, c, d, algo, workspace, workspace_size, stream)``: one ``cublasLtMatmul``."""


def python_caller(desc: int, alpha: int, la: int, lb: int, beta: int, lc: int, ld: int) -> Caller:
    """The pure-Python caller of ``cublasLtMatmul`` with these fixed arguments (the reference path).

    It calls the unchecked binding: every argument is an int validated once, not per call -- the
    handle (options or ours), descriptor, layouts and scalars (created at plan time), the addresses
    (from tensor adapters or the caller's tensors), the workspace (our allocation) and the stream
    (resolved by :mod:`nvmath._internal.streams`). A failure status still raises.
    """
    matmul = lt_unchecked.matmul

    def call(
        handle: int, a: int, b: int, c: int, d: int, algo: int, ws: int, ws_size: int, stream: int
    ) -> None:
        matmul(handle, desc, alpha, a, la, b, lb, beta, c, lc, d, ld, algo, ws, ws_size, stream)

    return call


# cublasLtMatmul(handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, ws, ws_size,
# stream):
# the positions a call fills, in Caller's order (handle, a, b, c, d, algo, ws, ws_size, stream)
_SLOTS = (0, 3, 5, 8, 10, 12, 13, 14, 15)


def compiled_caller(desc: int, alpha: int, la: int, lb: int, beta: int, lc: int, ld: int) -> Caller:
    """The compiled caller of ``cublasLtMatmul`` with these fixed arguments, or :func:`python_caller`'s
    when the compiled path is off or the binding calls a Python function (a fake GPU, a profiler).

    The ``FastCall`` holds raw addresses: the launch keeps their owners (the plan, the scalars' buffer)
    alive as long as the caller. A nonzero status raises :class:`~nvmath.bindings.cublasLt.cuBLASLtError`
    as the binding does.
    """
    fixed = (0, desc, alpha, 0, la, 0, lb, beta, 0, lc, 0, ld, 0, 0, 0, 0)
    return fastpath.bound_caller(  # type: ignore[no-any-return]
        "cublasLt", "cublasLtMatmul", fixed, _SLOTS, error=cuBLASLtError,
        pure=lambda: python_caller(desc, alpha, la, lb, beta, lc, ld),
    )  # fmt: skip


make_caller: Callable[..., Caller] = compiled_caller
"""The factory of launch callers (the seam a compiled twin replaces; see the module notes)."""


class BoundWorkspace:
    """A planner's workspace and the stream it was last bound to (re-bound, stream-ordered, on another).

    Args:
        workspace: the planner's own workspace or one shared with other cached plans.
    """

    __slots__ = ("stream", "workspace")

    def __init__(self, workspace: Workspace):
        self.workspace = workspace
        self.stream: StreamHandle | None = None

    def ptr_for(self, nbytes: int, handle: StreamHandle) -> int:
        """The address of at least ``nbytes`` of workspace usable on ``handle``."""
        ws = self.workspace
        if handle is self.stream and ws.size >= nbytes:
            return ws.ptr
        if self.stream is not None and ws.size >= nbytes and streams.is_capturing(handle.ptr):
            # inside a CUDA graph capture: no cross-stream event wait (illegal there); capture starts
            # after a device synchronisation (torch.cuda.graph does one)
            return ws.ptr
        ptr = ws.ensure(nbytes, handle)
        self.stream = handle
        return ptr


def _refuse(*args: Any, **kwargs: Any) -> Any:
    """A closed launch's ``run``."""
    raise InvalidMatmulState("this launch's plan was replaced or freed; plan() again (or use a live Matmul)")


class MatmulLaunch:
    """The fixed arguments of one plan's ``cublasLtMatmul`` and the sequence around it.

    Args:
        plan: the committed :class:`~._plan.Plan` (its descriptor, layouts and orientation).
        scalars: the host addresses of ``alpha`` and ``beta``.
        workspace: the planner's :class:`BoundWorkspace`.
        device_id, package: the execution device and the operands' package.
        lt_handle: ``MatmulOptions.handle`` (``None``: the thread's own handle per device).
        staged: the plan's staged operand copy (refreshed before each run), or ``None``.
        aux: the plan's :class:`~._aux.AuxOutputs`, or ``None``.
        done_always: record the done event on a mortal stream after every run, not only after runs
            that used the workspace (:func:`~nvmath._internal.streams.done_after_every_call`).
        keep: the owner of the ``scalars`` memory, held as long as the launch (its caller may be a
            compiled one holding the raw addresses).
    """

    __slots__ = (
        "_aux", "_broadcast", "_c_is_d", "_call", "_device", "_done_always", "_extras", "_keep", "_lt_handle",
        "_scalars", "_staged", "_staged_a", "_workspace", "algo", "closed", "device_id", "plan", "swap",
    )  # fmt: skip

    algo: tuple[int, int]
    """``(algo_ptr, workspace size)`` of the selected algorithm (see :meth:`select`)."""

    def __init__(
        self, plan: Any, scalars: tuple[int, int], workspace: BoundWorkspace, device_id: int, package: str, *,
        lt_handle: int | None = None, staged: Any = None, aux: Any = None, done_always: bool = False,
        keep: Any = None,
    ):  # fmt: skip
        lay = plan.layouts
        self.plan, self._keep, self._scalars = plan, keep, scalars  # (keep: the owner of the addresses)
        self._call = make_caller(
            plan.desc.ptr, scalars[0], lay.a.ptr, lay.b.ptr, scalars[1], lay.c.ptr, lay.d.ptr
        )
        self.swap = plan.problem.a_operand == "b"  # formed as (B^T A^T)^T: A and B trade places
        self._c_is_d = lay.c is lay.d
        self._staged = staged
        self._staged_a = staged is not None and staged.name == "a"
        self._broadcast = plan.broadcast  # an aux input copied into every batch slot before each run
        self._aux, self._done_always = aux, done_always
        self._extras = staged is not None or plan.broadcast is not None or aux is not None
        self._workspace, self.device_id, self._lt_handle = workspace, device_id, lt_handle
        # torch keeps its current device's primary context current: a run on a stream of that context
        # needs no context switch (nor the driver query that checks for one)
        self._device = streams.torch_device_getter() if package == "torch" else None
        self.closed = False
        """Whether :meth:`close` was called (every run then raises)."""
        self.algo = (plan.algorithms[0].algo_ptr, plan.workspace_size)  # select(the first), one read less

    def select(self, algorithm: Any) -> None:
        """Run ``algorithm`` (one of the plan's) from now on, with the workspace it and the plan need."""
        self.algo = (algorithm.algo_ptr, max(self.plan.workspace_size, algorithm.workspace_size))

    @property
    def workspace_size(self) -> int:
        """The workspace bytes a run uses (0: it references no memory of the planner's)."""
        return self.algo[1]

    def close(self) -> None:
        """Refuse every later run (the plan was replaced or freed).

        (A launch holds no reference to itself: a launch, its plan and its caller are freed when
        dropped, not left to the garbage collector, also when a planner is dropped without ``free()``.)
        """
        self.closed = True

    def compiled_parts(self, handle: StreamHandle, aux: bool = False) -> dict[str, Any] | None:
        """The fixed pieces of this launch's bare call on ``handle``, for a compiled twin that makes the
        call itself (``nvmath._fastcall.LinearHit``), or ``None`` when a run needs more than the bare
        call: a closed launch, a staged copy, a broadcast aux input or aux outputs, a context switch (a
        stream of another context, operands of a package other than torch) or the pure-Python caller.

        Keys: ``call`` (the compiled caller), ``swap``, ``c_is_d``, ``algo`` (the tuple a twin compares
        by identity: :meth:`select` replaces it), ``bound`` and ``space`` (the :class:`BoundWorkspace` and
        its workspace, ``None`` without one), ``lt_handle`` (0: the thread's handle), ``device_id`` and
        ``done`` (a run on ``handle`` must record the done event after the call); ``alpha`` (the host
        address of alpha) and ``scalar_dtype`` (its numpy dtype; ``None`` when ``keep`` is no array).

        With ``aux``, a plan whose only extra is one aux output written through a descriptor pointer
        (:meth:`~._aux.AuxOutputs.pointer_output`: BGRADB's bias gradient) is also given, with key
        ``aux``: ``(its ResultMaker, its PointerAttribute)`` (the twin allocates it and points the
        attribute at it on every call, as :meth:`run` does).
        """
        out = None
        if self._extras:
            if not aux or self._staged is not None or self._broadcast is not None or self._aux is None:
                return None
            out = self._aux.pointer_output()
            if out is None:
                return None
        if self.closed or self._device is None or handle.ctx is not None:
            return None
        if not fastpath.is_compiled(self._call):
            return None
        ws_size = self.algo[1]
        bound = self._workspace if ws_size else None
        return {
            "call": self._call, "swap": self.swap, "c_is_d": self._c_is_d, "algo": self.algo,
            "bound": bound, "space": bound.workspace if bound is not None else None,
            "lt_handle": self._lt_handle or 0, "device_id": self.device_id,
            "done": bool(handle.mortal and (ws_size or self._done_always)),
            "alpha": self._scalars[0], "scalar_dtype": getattr(self._keep, "dtype", None),
            **({"aux": out} if out is not None else {}),
        }  # fmt: skip

    def prepare(self, handle: StreamHandle) -> None:
        """Refresh the planner-owned copies the call reads (a staged operand, a broadcast aux input)
        on ``handle``: what a run does first, and what autotuning does once before its timed runs."""
        if self._staged is not None:
            self._staged.refresh(handle)
        if self._broadcast is not None:
            self._broadcast.refresh(handle)


    def run(
        self, handle: StreamHandle, a: int, b: int, c: int, d: int, algo: tuple[int, int] | None = None
    ) -> Any:
        """Enqueue the product on ``handle``: ``a``, ``b`` (the user's operands), ``c`` (0: none), ``d``
        (the result); ``algo``: ``(algo_ptr, workspace_size)`` other than the selected one.

        Returns:
            The aux outputs as :meth:`~._aux.AuxOutputs.finish` gives them, or ``None`` without.

        Raises:
            InvalidMatmulState: the launch was closed (its plan replaced or freed), before anything runs.
        """
        if self.closed:
            _refuse()
        made = None
        if self._extras:  # a staged copy, a broadcast aux input or aux outputs (else none of this)
            a, b, made = self._prepare_extras(handle, a, b)
        if self.swap:
            a, b = b, a
        if not c and self._c_is_d:
            c = d
        algo_ptr, ws_size = self.algo if algo is None else algo
        ws = 0
        if ws_size:
            bound = self._workspace  # BoundWorkspace.ptr_for's first test, inlined (hot)
            space = bound.workspace
            ws = space.ptr if handle is bound.stream and space.size >= ws_size else bound.ptr_for(ws_size, handle)
        lt_handle = self._lt_handle
        if not lt_handle:  # the thread's handle, read inline from the pool (get_handle on a miss)
            get = _handles.get_handle
            if get is _POOL_GET:  # (not a test's replacement)
                try:
                    lt_handle = _HERE.handles[self.device_id]
                except (AttributeError, KeyError):
                    lt_handle = get(self.device_id)
            else:
                lt_handle = get(self.device_id)
        # the stream may be gone when the workspace (or another buffer of ours) is next used or freed
        done = handle.mortal and (ws_size or self._done_always)
        device = self._device
        if device is not None and handle.ctx is None and device() == self.device_id:
            self._call(lt_handle, a, b, c, d, algo_ptr, ws, ws_size, handle.ptr)
            return self._after(handle, made, done) if made is not None or done else None
        with streams.stream_ctx(handle):  # the caller's thread may have another device current
            self._call(lt_handle, a, b, c, d, algo_ptr, ws, ws_size, handle.ptr)
            return self._after(handle, made, done) if made is not None or done else None

    def _prepare_extras(self, handle: StreamHandle, a: int, b: int) -> tuple[int, int, Any]:
        """:meth:`run`'s steps for a staged copy (cuBLASLt reads the copy, refreshed before every
        launch), a broadcast aux input and aux outputs: ``(a, b, made)``."""
        staged = self._staged
        if staged is not None:
            staged.refresh(handle)
            if self._staged_a:
                a = staged.ptr
            else:
                b = staged.ptr
        if self._broadcast is not None:
            self._broadcast.refresh(handle)
        aux = self._aux
        made = aux.new(handle) if aux is not None else None  # (also points the descriptor at them)
        return a, b, made

    def _after(self, handle: StreamHandle, made: Any, done: Any) -> Any:
        """The library's own aux step (if the plan has one) and the done event, after the call."""
        if made is not None:
            made = self._aux.finish(made, handle)  # type: ignore[union-attr]
        if done:
            streams.record_done(handle)
        return made

    def enqueue(
        self, lt_handle: int, a: int, b: int, c: int, d: int, algo_ptr: int, ws: int, ws_size: int,
        stream: int,
    ) -> None:  # fmt: skip
        """The bare call (autotuning's timed runs: the caller holds the context, refreshed the staged
        copy and broadcast aux (:meth:`prepare`) and owns the buffers); ``a``, ``b`` are the user's
        operands, ``c`` 0 for none."""
        if self.closed:
            _refuse()
        staged = self._staged
        if staged is not None:
            if self._staged_a:
                a = staged.ptr
            else:
                b = staged.ptr
        if self.swap:
            a, b = b, a
        if not c and self._c_is_d:
            c = d
        self._call(lt_handle, a, b, c, d, algo_ptr, ws, ws_size, stream)


def twin_arguments(launch: MatmulLaunch, parts: dict[str, Any], handle: StreamHandle) -> dict[str, Any]:
    """The keyword arguments that tell a compiled twin (``nvmath._fastcall.LinearHit`` or
    ``MatmulExecuteHit``) how to make ``launch``'s bare call on ``handle``, from the launch's
    :meth:`~MatmulLaunch.compiled_parts` on that handle: the compiled caller and its fixed arguments,
    the objects whose state the twin re-reads per call (the launch, its algorithm tuple, the workspace
    binding, the thread's handle pool) and the done event to record after the call, where one is due."""
    return {
        "launch": launch, "device_id": parts["device_id"], "stream": handle.ptr, "handle": handle,
        "algo": parts["algo"], "call": parts["call"], "swap": parts["swap"], "c_is_d": parts["c_is_d"],
        "bound": parts["bound"], "space": parts["space"], "lt_handle": parts["lt_handle"],
        "handles_local": _HERE, "handles_module": _handles, "pool_get": _POOL_GET,
        "after": streams.done_recorder(handle) if parts["done"] else None,
    }  # fmt: skip
