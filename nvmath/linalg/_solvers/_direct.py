"""``DirectSolver`` / ``direct_solver``: dense LU solve of ``a @ x = b``, call-compatible with
nvmath-python 1.0, plus the :func:`solve` convenience.

Operands (every check runs in the constructor, before any GPU work):

* implicit batching: ``a`` is ``(*batch, n, n)``; ``b`` is ``(n,)`` (unbatched ``a`` only),
  ``(n, nrhs)`` or ``(*batch, n, nrhs)`` with ``a``'s batch shape;
* explicit batching: ``a`` and ``b`` are sequences (lists or tuples) of the same length of single
  systems (``(n, n)`` and ``(n,)`` / ``(n, nrhs)``, all of one shape and dtype); ``solve()`` returns a
  list.

Lifecycle: ``plan()`` -> ``factorize()`` -> ``solve()`` (as often as wanted, with new ``b`` from
``reset_operands(b=...)``); a new ``a`` needs ``factorize()`` again. ``free()`` (or the context
manager) releases everything; calls after it raise :class:`~nvmath.InvalidDirectSolverState`.

Execution: the operands' memory space by default (nvmath-python 1.0 always runs on the GPU; pass
``execution="cuda"`` for that); host operands give host results and always block. On the GPU:
cuSOLVER ``Xgetrf``/``Xgetrs`` per system (fanned out over several streams, ``options.streams``),
or cuBLAS ``getrfBatched``/``getrsBatched`` for batches of small systems
(:mod:`~nvmath.linalg._solvers._dispatch`; ``options.algorithm`` overrides). The
factors and pivots stay on the device; ``info`` is read only by ``check()`` or ``options.check``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nvmath._errors import InvalidDirectSolverState
from nvmath._internal import devices
from nvmath._internal.state import PlannerState, requires
from nvmath._internal.tensors import TensorAdapter
from nvmath._internal.tensors.copy import copy_into
from nvmath._internal.tensors.numpy_adapter import NumpyAdapter
from nvmath.linalg._solvers import _cpu
from nvmath.linalg._solvers._base import SolverBase, device_view
from nvmath.linalg._solvers._cache import run_cached
from nvmath.linalg._solvers._common import (
    MatrixSpec,
    RhsSpec,
    as_matrix_rhs,
    colmajor_strides,
    matrix_spec,
    rhs_spec,
)
from nvmath.linalg._solvers._gpu import GpuContext
from nvmath.linalg._solvers._lu import gpu_getrf, gpu_getrs, plan_lu
from nvmath.linalg._solvers._options import DirectSolverOptions

__all__ = ["DirectSolver", "direct_solver", "solve"]


def _flatten(a: Any, b: Any) -> tuple[dict[str, Any], int | None]:
    """``({name: operand}, count)``: explicit sequences become ``a0..``, ``b0..``; ``count`` is None if implicit."""
    a_seq, b_seq = isinstance(a, (list, tuple)), isinstance(b, (list, tuple))
    if a_seq != b_seq:
        raise TypeError(
            "for explicit batching both 'a' and 'b' must be sequences (lists or tuples) of tensors; "
            f"got a {type(a).__name__} and a {type(b).__name__}"
        )
    if not a_seq:
        return {"a": a, "b": b}, None
    if len(a) == 0:
        raise ValueError("explicit batching needs at least one system; 'a' is an empty sequence")
    if len(a) != len(b):
        raise ValueError(f"'a' has {len(a)} matrices but 'b' has {len(b)} right-hand sides: they must match")
    operands = {f"a{i}": x for i, x in enumerate(a)}
    operands.update({f"b{i}": x for i, x in enumerate(b)})
    return operands, len(a)


class DirectSolver(SolverBase):
    """Stateful dense solver of ``a @ x = b`` by LU factorization with partial pivoting.

    Args:
        a: ``(*batch, n, n)`` tensor, or a sequence of ``(n, n)`` tensors (explicit batching).
        b: ``(n,)``, ``(n, nrhs)`` or ``(*batch, n, nrhs)``, or a sequence matching ``a``.
        options: :class:`DirectSolverOptions` or a dict of its fields.
        execution: ``"cuda"``, ``"cpu"``, :class:`ExecutionCUDA`, :class:`ExecutionCPU`, a dict with a
            ``"name"`` key, or ``None`` (the operands' memory space).
        stream: the CUDA stream for planning (``None``: the operands' package's current stream).

    Example:
        >>> with DirectSolver(a, b) as solver:       # doctest: +SKIP
        ...     solver.plan()
        ...     solver.factorize()
        ...     x = solver.solve()
        ...     solver.reset_operands(b=b2)
        ...     x2 = solver.solve()
    """

    _NAME = "DirectSolver"
    _ERROR = InvalidDirectSolverState
    _OPTIONS = DirectSolverOptions
    _OP = "factorize"

    def __init__(self, a: Any, b: Any, options: Any = None, execution: Any = None, stream: Any = None):
        operands, self._count = _flatten(a, b)
        self._factored = False
        self._cpu_factors: tuple[np.ndarray, np.ndarray] | None = None
        super().__init__(operands, options=options, execution=execution, stream=stream)

    # ------------------------------------------------------------------ specs
    def _check_operand(self, name: str, adapter: TensorAdapter) -> Any:
        if name == "a":
            return matrix_spec(adapter, "a", square=True, what="DirectSolver")
        if name == "b":
            return rhs_spec(adapter, self._specs["a"], "b")
        i = int(name[1:])
        label = f"{name[0]}[{i}]"
        if name[0] == "a":
            spec = matrix_spec(adapter, label, square=True, what="DirectSolver")
            if spec.batch_shape:
                raise ValueError(
                    f"operand '{label}' has shape {spec.shape}: explicit batching takes single (n, n) matrices"
                )
        else:
            spec = rhs_spec(adapter, self._specs[f"a{i}"], label)
        first = self._specs.get(f"{name[0]}0")
        if first is not None and (first.shape != spec.shape or first.dtype != spec.dtype):
            raise ValueError(
                f"operand '{label}' has shape {spec.shape} and dtype {spec.dtype} but '{name[0]}[0]' has shape "
                f"{first.shape} and dtype {first.dtype}: every system of an explicit batch must be alike"
            )
        return spec

    def _invalidate(self) -> None:
        self._factored = False
        self._cpu_factors = None

    @property
    def _a(self) -> MatrixSpec:
        if self._count is None:
            return self._specs["a"]
        s = self._specs["a0"]
        return MatrixSpec("a", (self._count,), s.rows, s.cols, s.dtype)

    @property
    def _b(self) -> RhsSpec:
        if self._count is None:
            return self._specs["b"]
        s = self._specs["b0"]
        return RhsSpec("b", (self._count,), s.rows, s.nrhs, False, s.dtype)

    def _names(self, which: str) -> list[str]:
        return [which] if self._count is None else [f"{which}{i}" for i in range(self._count)]

    @property
    def algorithm(self) -> str | None:
        """The kernel family chosen at ``plan()`` on the GPU (``None`` before, or on the CPU)."""
        return None if self._gpu is None else self._gpu.choice.algorithm

    # ------------------------------------------------------------------ GPU plan and slots
    def _plan_gpu(self, ctx: GpuContext) -> Any:
        a, b = self._a, self._b
        choice = self._choose("direct", a)
        g = plan_lu(ctx, self._like, a, choice, x64=True, lanes=self._lanes("direct", a, choice))
        bshape = b.shape if self._count is None else (self._count, b.rows, b.nrhs)
        g.bwork = ctx.matrix(self._like, b.batch_shape, b.rows, b.nrhs, shape=bshape)
        batched = choice.algorithm == "batched"
        g.bptrs = (
            ctx.pointer_array(g.bwork.ptr, g.bwork.stride * g.bwork.itemsize, b.batch_count) if batched else 0
        )
        return g

    def _slot(self, work: Any, i: int, spec: Any) -> TensorAdapter:
        """A view of system ``i`` of a working buffer, shaped like the explicit operand ``spec``."""
        shape = tuple(spec.shape)
        return device_view(work.adapter, shape, colmajor_strides(shape), i * work.stride)

    def _load_all(self, which: str, work: Any) -> None:
        if self._count is None:
            self._load(work.adapter, which)
            return
        for i, name in enumerate(self._names(which)):
            self._load(self._slot(work, i, self._specs[name]), name)

    def _copy_back(self, which: str, work: Any) -> None:
        """Write a working buffer back into the user's operand(s) (``inplace_a`` / ``inplace_b``)."""
        stream = self._ctx.stream  # type: ignore[union-attr]
        if self._count is None:
            copy_into(self._operand(which), work.adapter, stream)
            return
        for i, name in enumerate(self._names(which)):
            copy_into(self._operand(name), self._slot(work, i, self._specs[name]), stream)

    # ------------------------------------------------------------------ CPU helpers
    def _host_stack(self, which: str, stream: Any) -> np.ndarray:
        arrays = [self._host(name, stream) for name in self._names(which)]
        if which == "b":
            arrays = [as_matrix_rhs(x) for x in arrays]
        return arrays[0] if self._count is None else np.stack(arrays)

    def _host_back(self, which: str, values: np.ndarray, stream: Any) -> None:
        names = self._names(which)
        parts = [values] if self._count is None else list(values)
        for name, part in zip(names, parts):
            dst = self._operand(name)
            copy_into(
                dst,
                NumpyAdapter(np.ascontiguousarray(part.reshape(tuple(dst.shape)))),
                self._operand_stream(stream),
            )

    # ------------------------------------------------------------------ public API
    @requires(PlannerState.PLANNED, operands=True)
    def factorize(self, *, stream: Any = None) -> None:
        """LU-factorize ``a`` (kept on the object; written into ``a`` with ``inplace_a``)."""
        a = self._a
        with self._lock, self._phase("factorization"):
            if not self.on_gpu:
                self._nonfinite.explicit = self._count is not None
                lu, piv, info = _cpu.lu_factor(self._scan(self._host_stack("a", stream)))
                self._cpu_factors = (lu, piv)
                if self.options.inplace_a:
                    self._host_back("a", self._nonfinite.poison_host(lu, force=True), stream)
                self._factored = True
                self._record_info("getrf", info, a.batch_shape)
                return
            with devices.device_ctx(self._device_id):
                ctx = self._gpu_call(stream)
                g = self._gpu
                self._load_all("a", g.work)
                self._nonfinite.explicit = self._count is not None
                self._nonfinite.scan_device(ctx, g.work, batch=a.batch_shape)
                gpu_getrf(ctx, g)
                if self.options.inplace_a:
                    self._nonfinite.poison_device(ctx, g.work.adapter, force=True)
                    self._copy_back("a", g.work)
                self._factored = True
                self._finish_gpu()
            self._record_info("getrf", g.info, a.batch_shape)

    @requires(PlannerState.PLANNED, operands=True)
    def solve(self, *, stream: Any = None) -> Any:
        """Solve ``a @ x = b`` with the current factors; return ``x`` (``b`` itself with ``inplace_b``)."""
        if not self._factored:
            raise InvalidDirectSolverState(
                "DirectSolver.solve() called before factorize(): call factorize() first"
            )
        with self._lock, self._phase("solution"):
            return self._solve_cpu(stream) if not self.on_gpu else self._solve_gpu(stream)

    def _solve_cpu(self, stream: Any) -> Any:
        assert self._cpu_factors is not None
        x = _cpu.lu_solve(*self._cpu_factors, self._host_stack("b", stream))
        x = self._nonfinite.poison_host(x, force=True)
        if self.options.inplace_b:
            self._host_back("b", x, stream)
            return self._user("b")
        if self._count is None:
            return self._out(x.reshape(self._b.shape), stream)
        return [
            self._out(x[i].reshape(self._specs[name].shape), stream)
            for i, name in enumerate(self._names("b"))
        ]

    def _solve_gpu(self, stream: Any) -> Any:
        with devices.device_ctx(self._device_id):
            ctx = self._gpu_call(stream)
            g = self._gpu
            self._load_all("b", g.bwork)
            gpu_getrs(ctx, g, g.bwork, 0, g.bptrs)
            self._nonfinite.poison_device(ctx, g.bwork.adapter, force=True)
            if self.options.inplace_b:
                self._copy_back("b", g.bwork)
                result = self._user("b")
            elif self._count is None:
                result = self._emit(g.bwork.adapter)
            else:
                names = self._names("b")
                result = [self._emit(self._slot(g.bwork, i, self._specs[n])) for i, n in enumerate(names)]
            self._finish_gpu()
        return result

    def _user(self, which: str) -> Any:
        objs = [self._operand(name).tensor for name in self._names(which)]
        return objs[0] if self._count is None else objs

    def _run(self, *, stream: Any = None) -> Any:
        """Factorize and solve (the stateless path)."""
        self.factorize(stream=stream)
        return self.solve(stream=stream)

    def _reset_any(self, a: Any, b: Any, stream: Any, checked: bool) -> None:
        new: dict[str, Any] = {}
        for which, value in (("a", a), ("b", b)):
            if value is None:
                continue
            if self._count is None:
                if isinstance(value, (list, tuple)):
                    raise TypeError(
                        f"'{which}' was a tensor at construction; give a tensor, not a {type(value).__name__}"
                    )
                new[which] = value
            else:
                if not isinstance(value, (list, tuple)) or len(value) != self._count:
                    raise ValueError(
                        f"'{which}' must be a sequence of {self._count} tensors (explicit batching)"
                    )
                new.update({f"{which}{i}": x for i, x in enumerate(value)})
        self._reset(new, stream, checked=checked)
        if a is not None:
            self._factored = False

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def reset_operands(self, *, a: Any = None, b: Any = None, stream: Any = None) -> None:
        """Supply new ``a`` and/or ``b`` (same shapes, dtype, package and device); a new ``a`` needs ``factorize()``."""
        self._reset_any(a, b, stream, checked=True)

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def reset_operands_unchecked(self, *, a: Any = None, b: Any = None, stream: Any = None) -> None:
        """Like :meth:`reset_operands` without the shape/dtype/package checks."""
        self._reset_any(a, b, stream, checked=False)


def direct_solver(a: Any, b: Any, *, options: Any = None, execution: Any = None, stream: Any = None) -> Any:
    """Solve ``a @ x = b`` (see :class:`DirectSolver`); plans are cached (``solver_plan_cache``)."""
    return run_cached(
        DirectSolver, {"a": a, "b": b}, {}, options=options, execution=execution, stream=stream, method="_run"
    )


def solve(a: Any, b: Any, *, options: Any = None, execution: Any = None, stream: Any = None) -> Any:
    """Solve ``a @ x = b`` by LU with partial pivoting: the same as :func:`direct_solver`.

    ``options`` is a :class:`DirectSolverOptions` (or dict): with ``check=True`` a singular matrix
    raises :class:`nvmath.LinAlgError`; otherwise its solution holds Inf or NaN.
    """
    return direct_solver(a, b, options=options, execution=execution, stream=stream)
