"""The stateful generic matmul: :class:`Matmul` (``plan``, ``execute``, ``reset_operands``, ...).

It sequences the pieces and owns the resources: operand checks and traits live in
:mod:`~nvmath.linalg.generic._problem` / :mod:`~nvmath.linalg.generic._traits` (pure), the cuBLAS
programs in :mod:`~nvmath.linalg.generic._cublas` / :mod:`~nvmath.linalg.generic._grouped`, the CPU
kernels in :mod:`~nvmath.linalg.generic._cpu`. States go CREATED -> PLANNED -> FREED through one
:class:`~nvmath._internal.state.Lifecycle`; as in nvmath-python's generic matmul, executing after
``release_operands()`` raises a ``ValueError`` (here also an :class:`~nvmath.InvalidMatmulState`)
and ``plan()`` runs once (later calls do nothing).
"""

from __future__ import annotations

import logging
import numbers
from collections.abc import Callable
from typing import Any

from nvmath._errors import InvalidMatmulState, warn_at_caller
from nvmath._internal import devices, streams
from nvmath._internal.execution import ExecutionCPU, resolve_execution
from nvmath._internal.memory import Workspace
from nvmath._internal.options import check_or_create_options
from nvmath._internal.state import FreedOnExit, Lifecycle, PlannerState, requires
from nvmath._internal.tensors import TensorAdapter, check_consistent, wrap
from nvmath.linalg.generic._batching import is_sequence, zip_broadcast
from nvmath.linalg.generic._fast import GroupedRefused, fast_entry
from nvmath.linalg.generic._options import MatmulOptions, get_logger
from nvmath.linalg.generic._problem import Problem
from nvmath.linalg.generic._qualifiers import parse_qualifiers

__all__ = ["Matmul", "MatmulStateError"]

_NAMES = ("a", "b", "c")



def checked_beta(c: Any, beta: Any, inplace: bool = False) -> Any:
    """``beta`` as a :class:`Matmul` or a :func:`~._stateless.matmul` call keeps it: ignored (with a
    warning at the caller of the public function) without ``c``, required with it; ``inplace`` needs ``c``."""
    if c is None and beta is not None:
        warn_at_caller(f"beta={beta!r} is ignored because c is not given")
        return None
    if c is not None and beta is None:
        raise ValueError("beta must be given when c is (alpha * a @ b + beta * c)")
    if inplace and c is None:
        raise ValueError("MatmulOptions(inplace=True) needs c: the result is written into it")
    return beta


class MatmulStateError(InvalidMatmulState, ValueError):
    """A :class:`Matmul` method called in a state that does not allow it.

    An :class:`~nvmath.InvalidMatmulState` (as after ``free()`` in nvmath-python) that is also a
    ``ValueError`` (as nvmath-python's generic matmul raises after ``release_operands()``).
    """


def _scalar(name: str, value: Any, dtype: str, default: Any) -> Any:
    """A checked alpha / beta: a real number, or a complex one for complex dtypes."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        raise TypeError(f"{name} must be a number; got {type(value).__name__}: {value!r}")
    if isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real):
        if not dtype.startswith("complex"):
            raise ValueError(f"{name}={value!r} is complex but the operands are {dtype}")
        return complex(value)
    return value


def _same(old: TensorAdapter, new: TensorAdapter, name: str) -> None:
    for what, x, y in (
        ("package", old.package, new.package),
        ("device", old.device_id, new.device_id),
        ("dtype", old.dtype, new.dtype),
        ("shape", tuple(old.shape), tuple(new.shape)),
        ("strides", tuple(old.strides), tuple(new.strides)),
        ("conjugation bit", old.is_conjugate, new.is_conjugate),
    ):
        if x != y:
            error = TypeError if what == "package" else ValueError  # (nvmath-python's types)
            raise error(
                f"reset_operands: operand '{name}' has {what} {y!r} but the plan was made for {x!r}; "
                "create a new Matmul for operands of another kind"
            )


class Matmul(FreedOnExit):
    """``alpha * op(a) @ op(b) + beta * c`` with cuBLAS (GPU) or the CPU BLAS, planned once, run many times.

    Args:
        a, b: the operands: numpy / cupy / torch tensors (N-D batches broadcast as numpy.matmul), or
            Python sequences of them (an explicit batch of problems of different shapes).
        c: the addend, of the result's shape (or a sequence); requires ``beta``.
        alpha, beta: numbers (or sequences of them for explicit batches); ``alpha`` defaults to 1.
        qualifiers: a numpy array of :data:`~nvmath.linalg.matrix_qualifiers_dtype` (2 or 3 records),
            or a sequence of them for explicit batches.
        options: :class:`~nvmath.linalg.MatmulOptions` or a dict of its fields.
        execution: ``None`` (where the operands are), ``"cuda"`` / ``"cpu"``,
            :class:`~nvmath.linalg.ExecutionCUDA` / :class:`~nvmath.linalg.ExecutionCPU` or a dict.
        stream: the CUDA stream (GPU execution); ``None`` is the operands' package's current stream.

    Raises:
        TypeError / ValueError: bad operands, qualifiers, options or execution (before any GPU work).
    """

    def __init__(
        self,
        a: Any,
        b: Any,
        /,
        c: Any = None,
        *,
        alpha: Any = None,
        beta: Any = None,
        qualifiers: Any = None,
        options: Any = None,
        execution: Any = None,
        stream: Any = None,
    ):
        self._options = options = check_or_create_options(MatmulOptions, options, "matmul options")
        self._logger = get_logger(options)
        self._sequence = is_sequence(a) or is_sequence(b)
        beta = checked_beta(c, beta, options.inplace)
        self._has_c = c is not None
        ops = self._wrap_all(a, b, c)
        package, device_id = check_consistent(
            {f"{n}[{i}]": op for i, p in enumerate(ops) for n, op in p.items()}
        )
        self._execution = resolve_execution(execution, device_id)
        self._cpu = isinstance(self._execution, ExecutionCPU)
        if self._cpu and device_id != "cpu":
            raise ValueError(
                f"execution={execution!r} asks for the CPU but the operands are on GPU {device_id}: "
                "GPU operands run on their device (pass execution=None or 'cuda'), or move them to the host"
            )
        self._package, self._device_id = package, device_id
        self._device = None if self._cpu else self._execution.device_id
        quals = self._qualifiers(qualifiers, len(ops))
        self._problems = [Problem(p, q, self._cpu, options.inplace) for p, q in zip(ops, quals)]
        dtype = self._problems[0].traits.dtype
        mixed = sorted({p.traits.dtype for p in self._problems} - {dtype})
        if mixed:
            raise ValueError(
                f"the problems of a sequence must share one dtype; got {dtype} and {', '.join(mixed)}"
            )
        self._alphas = [_scalar("alpha", x, dtype, 1) for x in _fit(_listed(alpha), len(ops), "alpha")]
        self._betas = [_scalar("beta", x, dtype, 0) for x in _fit(_listed(beta), len(ops), "beta")]
        self._stream = stream
        self._init_plan_state()
        self._logger.info(
            "= SPECIFICATION PHASE = %d problem(s), %s, on the %s",
            len(ops),
            dtype,
            "CPU" if self._cpu else f"GPU {self._device}",
        )

    # ------------------------------------------------------------------ construction helpers
    def _init_plan_state(self) -> None:
        """What plan() fills in, empty; the lifecycle in its first state."""
        self._programs: list[Any] = []
        self._grouped: Any = None
        self._workspace: Workspace | None = None
        self._scratch: Workspace | None = None
        self._keep: list[Any] = []
        self._shared = False
        self._fast: Any = None
        self._lifecycle = Lifecycle("Matmul", MatmulStateError)

    def _wrap_all(self, a: Any, b: Any, c: Any) -> list[dict[str, TensorAdapter]]:
        named = {"a": a, "b": b} if c is None else {"a": a, "b": b, "c": c}
        if not self._sequence:
            if is_sequence(c):
                raise ValueError(
                    "c is a sequence but a and b are not: an explicit batch needs a and b sequences"
                )
            return [{n: wrap(x, f"operand '{n}'") for n, x in named.items()}]
        length, lists = zip_broadcast(named)
        return [{n: wrap(lists[n][i], f"operand '{n}[{i}]'") for n in named} for i in range(length)]

    def _qualifiers(self, qualifiers: Any, count: int) -> list[Any]:
        if self._sequence and is_sequence(qualifiers):
            return [parse_qualifiers(q, self._has_c) for q in _fit(list(qualifiers), count, "qualifiers")]
        return [parse_qualifiers(qualifiers, self._has_c)] * count

    # ------------------------------------------------------------------ lifecycle
    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def plan(self, *, stream: Any = None) -> None:
        """Choose the BLAS routines (no tuning); a second call does nothing."""
        if self._lifecycle.state is PlannerState.PLANNED:
            return
        self._logger.info("= PLANNING PHASE =")
        if not self._cpu:
            from nvmath.linalg.generic._cublas import make_program
            from nvmath.linalg.generic._grouped import make_grouped

            programs = [make_program(p.traits, self._has_c) for p in self._problems]
            grouped = make_grouped([p.traits for p in self._problems]) if self._sequence else None
            pkg = self._package if self._device_id != "cpu" else "cuda"
            self._workspace = Workspace(
                device_id=self._device,
                package=pkg,
                allocator=self._options.allocator,
                name="generic matmul workspace",
            )
            self._scratch = Workspace(
                device_id=self._device,
                package=pkg,
                allocator=self._options.allocator,
                name="generic matmul scratch",
            )
            self._programs, self._grouped = programs, grouped
        self._fast = fast_entry(
            self._problems,
            self._programs,
            self._grouped,
            sequence=self._sequence,
            cpu=self._cpu,
            inplace=self._options.inplace,
            device_id=self._device,
            num_threads=self._execution.num_threads if self._cpu else None,
            blocking=self._options.blocking is True,
            workspace=lambda: (self._workspace, self._scratch),
            check=self._check_scalars,
        )
        self._lifecycle.mark_planned()

    def _check_scalars(self, alpha: Any, beta: Any) -> tuple[Any, Any]:
        dtype = self._problems[0].traits.dtype
        return _scalar("alpha", alpha, dtype, 1), _scalar("beta", beta, dtype, 0)

    @requires(PlannerState.PLANNED, operands=True)
    def execute(self, *, stream: Any = None) -> Any:
        """Compute and return the result (a list for explicit batches) in the operands' package and space."""
        return self._run(stream)

    def execute_unchecked(self, *, stream: Any = None) -> Any:
        """:meth:`execute` without the state check (experimental, as in nvmath-python 1.0)."""
        return self._run(stream)

    def _run(self, stream: Any) -> Any:
        stream = stream if stream is not None else self._stream
        fast = self._fast
        if fast is not None:  # the planned operands through the fast entry
            try:
                if self._sequence:
                    ops = [p.ops for p in self._problems]
                    a, b = [o["a"].tensor for o in ops], [o["b"].tensor for o in ops]
                    c = [o["c"].tensor for o in ops] if self._has_c else None
                    return fast(a, b, c, self._alphas, self._betas, stream)
                o = self._problems[0].ops
                c = o["c"].tensor if self._has_c else None
                return fast(o["a"].tensor, o["b"].tensor, c, self._alphas[0], self._betas[0], stream)
            except GroupedRefused as exc:
                self._drop_grouped(exc)
        if self._logger.isEnabledFor(logging.INFO):
            self._logger.info("= EXECUTION PHASE = %s", "CPU" if self._cpu else f"GPU {self._device}")
        if self._cpu:
            threads = self._execution.num_threads
            results = [p.run_cpu(x, y, threads) for p, x, y in zip(self._problems, self._alphas, self._betas)]
        else:
            results = self._run_gpu(stream)
        return results if self._sequence else results[0]

    def _drop_grouped(self, exc: GroupedRefused) -> None:
        """cuBLAS refused the grouped form of the fast entry: drop both (the caller then runs the general
        path, a loop of launches)."""
        self._logger.warning("grouped GEMM refused (%s): running the sequence as a loop of launches", exc)
        self._fast = self._grouped = None

    def _run_gpu(self, stream: Any) -> list[Any]:
        from nvmath.linalg.generic._cublas import bind, get_handle

        dev = self._device
        pkg = self._package if self._device_id != "cpu" else "numpy"
        sh = streams.get_stream(stream, device_id=dev, package=pkg)
        with devices.device_ctx(dev):
            if any(p.prep for p in self._problems) and pkg in ("torch", "cupy"):
                streams.stream_wait(sh, streams.current_stream(dev, pkg))  # copies were made there
            staged = [p.stage(dev, sh) for p in self._problems]
            wsb = max(g.workspace_bytes for g in self._programs)
            ws = self._workspace.ensure(wsb, sh)
            need = (
                self._grouped.scratch_bytes if self._grouped else max(g.scratch_bytes for g in self._programs)
            )
            scratch = self._scratch.ensure(need, sh) if need else 0
            handle = get_handle(dev)
            bind(handle, sh, ws, wsb)
            if self._grouped is not None:
                self._launch_grouped(handle, sh, staged, scratch)
            else:
                for prog, s, x, y in zip(self._programs, staged, self._alphas, self._betas):
                    prog.launch(handle, sh, s[0], x, y, self._has_c, scratch)
            results = [p.deliver(s[1], sh) for p, s in zip(self._problems, staged)]
            if self._options.blocking is True:
                streams.synchronize(sh)
        self._keep = [s[2] for s in staged]
        return results

    def _launch_grouped(self, handle: int, sh: Any, staged: list[Any], scratch: int) -> None:
        from nvmath.bindings.cublas import Status, cuBLASError

        try:
            self._grouped.launch(
                handle, sh, [s[0] for s in staged], self._alphas, self._betas, self._has_c, scratch
            )
        except cuBLASError as exc:  # this cuBLAS refuses the grouped form for these types: loop instead
            if exc.status not in (Status.NOT_SUPPORTED, Status.INVALID_VALUE):
                raise
            self._logger.warning("grouped GEMM refused (%s): running the sequence as a loop of launches", exc)
            self._grouped = None
            for prog, s, x, y in zip(self._programs, staged, self._alphas, self._betas):
                prog.launch(handle, sh, s[0], x, y, self._has_c, scratch)

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def reset_operands(
        self,
        *,
        a: Any = None,
        b: Any = None,
        c: Any = None,
        alpha: Any = None,
        beta: Any = None,
        stream: Any = None,
    ) -> None:
        """Use new operands of the same kind (package, device, dtype, shape, strides) and/or new scalars.

        After :meth:`release_operands` every operand (``a``, ``b`` and ``c`` when planned with one) must
        be given.
        """
        self._reset(a, b, c, alpha, beta, check=True)

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def reset_operands_unchecked(
        self,
        *,
        a: Any = None,
        b: Any = None,
        c: Any = None,
        alpha: Any = None,
        beta: Any = None,
        stream: Any = None,
    ) -> None:
        """:meth:`reset_operands` without comparing the new operands with the planned ones (the caller
        guarantees they match)."""
        self._reset(a, b, c, alpha, beta, check=False)

    def _reset(self, a: Any, b: Any, c: Any, alpha: Any, beta: Any, check: bool) -> None:
        given = {n: x for n, x in (("a", a), ("b", b), ("c", c)) if x is not None}
        if "c" in given and not self._has_c:
            raise ValueError("reset_operands: c was not given when the Matmul was created")
        if self._lifecycle.operands_released:
            missing = [n for n in _NAMES[: 2 + self._has_c] if n not in given]
            if missing:
                raise ValueError(
                    f"reset_operands after release_operands() needs every operand; missing {missing}"
                )
        count = len(self._problems)
        new = [dict(p.ops or {}) for p in self._problems]
        for name, value in given.items():
            if not self._sequence and is_sequence(value):
                raise ValueError(
                    f"reset_operands: {name} is a sequence but the Matmul was planned for tensors"
                )
            values = _fit(_listed(value), count, name) if self._sequence else [value]
            for i, x in enumerate(values):
                op = wrap(x, f"operand '{name}'")
                if check and self._problems[i].ops is not None:
                    _same(self._problems[i].ops[name], op, name)
                new[i][name] = op
        if check and given:
            check_consistent({f"{n}[{i}]": op for i, p in enumerate(new) for n, op in p.items()})
        dtype = self._problems[0].traits.dtype
        if alpha is not None:
            self._alphas = [_scalar("alpha", x, dtype, 1) for x in _fit(_listed(alpha), count, "alpha")]
        if beta is not None:
            self._betas = [_scalar("beta", x, dtype, 0) for x in _fit(_listed(beta), count, "beta")]
        for p, ops in zip(self._problems, new):
            p.ops = ops
        if given:
            self._lifecycle.mark_operands_reset()

    def release_operands(self) -> None:
        """Drop the references to the operands (and the last results' staging buffers)."""
        for p in self._problems:
            p.ops = None
        self._keep = []
        self._lifecycle.mark_operands_released()

    def free(self) -> None:
        """Release the workspaces and everything planned; idempotent. The object cannot be used again."""
        for ws in (self._workspace, self._scratch):
            if ws is not None and not self._shared:
                ws.release()
        self._workspace = self._scratch = None
        self._programs, self._grouped, self._keep, self._fast = [], None, [], None
        for p in self._problems:  # the operands are not kept alive by a freed object
            p.ops = None
        self._lifecycle.mark_freed()

    # ------------------------------------------------------------------ the stateless path
    @property
    def is_planned(self) -> bool:
        """Planned and not freed (the plan cache's liveness check)."""
        return bool(self._lifecycle.bits & PlannerState.PLANNED.value)

    def share_workspaces(self, workspaces: Any, scratches: Any) -> None:
        """Use the plan cache's workspace and scratch for this device and package (two
        :class:`~nvmath._internal.memory.SharedWorkspaces`); the caller runs this plan under
        :attr:`workspace_lock`. No effect on the CPU or with a user allocator."""
        if self._cpu or self._options.allocator is not None:
            return
        package = self._workspace.package
        self._workspace.release()
        self._scratch.release()
        self._workspace = workspaces.get(self._device, package)
        self._scratch = scratches.get(self._device, package)
        self._shared = True

    @property
    def workspace_lock(self) -> Any:
        """The lock of the shared workspace this plan uses (``None`` when it owns its workspaces)."""
        return self._workspace.lock if self._shared else None

    def pair_entry(self) -> Callable[..., Any]:
        """The callable of :meth:`run_cached` for a call of two operands (not an explicit batch): the fast
        entry itself when there is one (no grouped launch to fall back from), else :meth:`run_cached`.
        The stateless path keeps it for repeated calls of the same key; the caller holds the entry's lock
        and checks it is live."""
        fast = self._fast
        return fast if fast is not None and not self._sequence else self.run_cached

    def run_cached(self, a: Any, b: Any, c: Any, alpha: Any, beta: Any, stream: Any) -> Any:
        """One stateless call on this planned object with the call's operands (same kind, by the key)."""
        fast = self._fast
        if fast is not None:
            try:
                return fast(a, b, c, alpha, beta, stream)
            except GroupedRefused as exc:
                self._drop_grouped(exc)
        self._reset(a, b, c, alpha if alpha is not None else 1, beta if beta is not None else 0, check=False)
        try:
            return self._run(stream)
        finally:
            for p in self._problems:
                p.ops = None
            self._keep = []

    def __repr__(self) -> str:
        state = self._lifecycle.state.name
        where = "CPU" if self._cpu else f"GPU {self._device}"
        return f"Matmul({len(self._problems)} problem(s), {self._problems[0].traits.kind}, {where}, {state})"


def _listed(value: Any) -> list[Any]:
    return list(value) if is_sequence(value) else [value]


def _fit(values: list[Any], count: int, name: str) -> list[Any]:
    """``values`` broadcast to ``count`` (length 1 repeats); ``ValueError`` for another length."""
    if len(values) == count:
        return values
    if len(values) == 1:
        return values * count
    raise ValueError(f"{name} has {len(values)} entries but there are {count} problems (give 1 or {count})")
