"""The distributed matmul, :class:`Matmul` and :func:`matmul`, on cuBLASMp (collective).

Construction checks everything once: each rank checks its operands locally (same package, dtype,
GPU device; a local layout cuBLASMp can describe), then *one* collective gathers every rank's facts
and verdict, so bad input raises on every rank naming the ranks. :meth:`Matmul.plan` makes the
cuBLASMp handle, grids, descriptors and workspace (collective); :meth:`Matmul.execute` runs
``D = alpha * op(A) @ op(B) + beta * C`` on the caller's stream.

Scope today: no epilogs, no quantization scales, no ``result_amax`` / ``block_scaling`` (these
raise :class:`NotImplementedError`); the workspace is ordinary device memory, not registered with
``cublasMpBufferRegister``, so cuBLASMp may not overlap communication with the GEMM.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from nvmath._errors import InvalidPlannerState
from nvmath._internal import dtypes, memory, streams
from nvmath._internal.logging import get_logger
from nvmath._internal.options import check_or_create_options
from nvmath._internal.state import FreedOnExit, Lifecycle, PlannerState, requires
from nvmath._internal.tensors import TensorAdapter, wrap_operands
from nvmath.distributed import _runtime
from nvmath.distributed._agreement import compare_facts, gather_by_rank
from nvmath.linalg.advanced import MatmulComputeType

from . import _mpobjects
from ._options import LOGGER_NAME, MatmulOptions
from ._problem import COMPUTE_TYPES, global_matrix_shape, local_order, matmul_call, parse_qualifiers, scalar
from ._traits import local_shape, matrix_descriptor

__all__ = ["InvalidMatmulState", "Matmul", "matmul"]

_WHAT = "nvmath.distributed.linalg.advanced.Matmul"


class InvalidMatmulState(InvalidPlannerState):
    """A distributed Matmul method was called in a state that does not allow it."""


def _not_yet(**given: Any) -> None:
    for name, value in given.items():
        if value not in (None, False):
            raise NotImplementedError(f"{_WHAT}: {name} is not implemented yet in the distributed matmul")


def _local_check(ops: dict[str, TensorAdapter], device: int) -> None:
    """This rank's operands: GPU tensors of the runtime's device, one dtype, describable layouts."""
    for name, op in ops.items():
        if op.device_id != device:
            raise ValueError(
                f"operand {name} is on device {op.device_id}; nvmath.distributed runs on {device}"
            )
        if len(op.shape) != 2 or local_order(tuple(op.shape), tuple(op.strides)) is None:
            raise ValueError(
                f"operand {name}: shape {tuple(op.shape)} strides {tuple(op.strides)}: cuBLASMp "
                "needs a 2-D local matrix in Fortran or C order"
            )
    kinds = {op.dtype for op in ops.values()}
    if len(kinds) != 1 or next(iter(kinds)) not in COMPUTE_TYPES:
        raise ValueError(
            f"operand dtypes {sorted(kinds)}: the distributed matmul takes one of "
            f"{', '.join(COMPUTE_TYPES)} for every operand"
        )


def _gather_checked(
    group: Any,
    device: int,
    operands: dict[str, Any],
    distributions: Any,
    qualifiers: Any,
    options: MatmulOptions,
) -> tuple[dict[str, TensorAdapter], tuple, dict[int, Any]]:
    """Check this rank's operands locally, then gather every rank's facts and verdict in one
    collective; raise on every rank if any rank's operands are unusable. Returns the wrapped
    operands, the qualifiers and ``{rank: facts}``."""
    problem: BaseException | None = None
    try:
        ops = wrap_operands(**operands)
        _local_check(ops, device)
        quals = parse_qualifiers(qualifiers)
        agreed = {
            "dtype": ops["a"].dtype,
            "distributions": tuple(repr(d) for d in distributions),
            "qualifiers": quals,
            "c": "c" in ops,
            "options": (options.inplace, options.compute_type, options.algo_type,
                        options.sm_count_communication, options.result_type),
        }  # fmt: skip
        shapes = {name: tuple(op.shape) for name, op in ops.items()}
    except (TypeError, ValueError) as exc:
        problem, agreed, shapes = exc, {}, {}
    facts = {"agreed": agreed, "shapes": shapes, "problem": None if problem is None else repr(problem)}
    everyone = gather_by_rank(group, facts)
    if problem is not None:
        raise problem
    bad = {r: f["problem"] for r, f in everyone.items() if f["problem"]}
    if bad:
        raise ValueError(f"{_WHAT}: the operands of rank(s) {sorted(bad)} are not usable: {bad}")
    return ops, quals, everyone


class Matmul(FreedOnExit):
    """``D = alpha * op(a) @ op(b) + beta * c`` over distributed matrices (collective).

    Args:
        a, b, c: this rank's parts (cupy / torch GPU tensors, Fortran or C order locally); ``c`` optional.
        distributions: ``[dist_a, dist_b, dist_c]`` (the third also gives the result's distribution).
        alpha, beta: scalars (``beta`` required with ``c``).
        qualifiers: a numpy structured array with ``is_transpose`` / ``is_conjugate`` per a, b.
        quantization_scales: not implemented yet.
        options: :class:`MatmulOptions` or a dict of its fields.
        stream: the stream of the first operations.
    """

    def __init__(
        self,
        a: Any,
        b: Any,
        /,
        c: Any = None,
        *,
        distributions: Any,
        alpha: Any = None,
        beta: Any = None,
        qualifiers: Any = None,
        quantization_scales: Any = None,
        options: Any = None,
        stream: Any = None,
    ):
        options = check_or_create_options(MatmulOptions, options, "Matmul options")
        _not_yet(
            quantization_scales=quantization_scales,
            result_amax=options.result_amax,
            block_scaling=options.block_scaling,
        )
        self._logger = get_logger(LOGGER_NAME, options.logger)
        context = _runtime.context()
        _runtime.engine("nccl")
        self._lib = _mpobjects.bindings()
        if not isinstance(distributions, (list, tuple)) or len(distributions) != 3:
            raise TypeError(
                "distributions must be a sequence [dist_a, dist_b, dist_c] (dist_c: the result's)"
            )
        if options.inplace and c is None:
            raise ValueError(
                "MatmulOptions.inplace=True writes the result into c: give c, or set inplace=False"
            )
        if c is not None and beta is None:
            raise ValueError("beta is required when c is given")
        group, device = context.process_group, context.device_id
        ops, (qa, qb), everyone = _gather_checked(group, device, {"a": a, "b": b, "c": c}, distributions,
                                                  qualifiers, options)  # fmt: skip
        compare_facts({r: f["agreed"] for r, f in everyone.items()}, _WHAT, group.rank)
        self._setup(ops, distributions, everyone, group, device, qa, qb, options, alpha, beta, stream)

    def _setup(
        self, ops, distributions, everyone, group, device, qa, qb, options, alpha, beta, stream
    ) -> None:
        nranks, rank = group.nranks, group.rank
        names = [n for n in ("a", "b", "c") if n in ops]
        global_shapes = {
            n: global_matrix_shape(
                n, distributions["abc".index(n)], {r: f["shapes"][n] for r, f in everyone.items()}, nranks
            )
            for n in names
        }
        descs = {
            n: matrix_descriptor(
                global_shapes[n], distributions["abc".index(n)], rank, nranks, ops[n].shape, ops[n].strides
            )
            for n in names
        }
        dtype = ops["a"].dtype
        if "c" not in ops:  # the result: distributions[2], Fortran order, shape (m, n)
            m = descs["a"].n if qa[0] != descs["a"].transposed else descs["a"].m
            n = descs["b"].m if qb[0] != descs["b"].transposed else descs["b"].n
            shape = local_shape((m, n), distributions[2], rank, nranks)
            descs["d"] = matrix_descriptor(
                (m, n), distributions[2], rank, nranks, shape, (1, max(shape[0], 1))
            )
        else:
            descs["d"] = descs["c"]
        call = matmul_call(descs["a"], descs["b"], descs["d"], qa, qb, dtypes.is_complex(dtype))
        if options.result_type is not None and int(options.result_type) != dtypes.cuda_data_type(dtype):
            raise NotImplementedError(
                f"{_WHAT}: a result_type other than the operands' is not implemented yet"
            )
        compute = (
            options.compute_type
            if options.compute_type is not None
            else MatmulComputeType[COMPUTE_TYPES[dtype]]
        )
        self._ops, self._descs, self._call, self._dtype, self._options = ops, descs, call, dtype, options
        self._distributions, self._device, self._compute = tuple(distributions), device, int(compute)
        self._alpha = scalar(1 if alpha is None else alpha, dtype, "alpha")
        self._beta = scalar(0 if beta is None else beta, dtype, "beta")
        self._package = ops["a"].package
        self._stream = streams.get_stream(stream, device_id=device, package=self._package)
        self._nccl = _runtime.context().nccl_comm
        self._result: TensorAdapter | None = None
        self._objects: list[Any] = []
        self._matrices: dict[str, Any] = {}
        self._workspace: Any = None
        self._host_workspace = np.empty(0, np.uint8)
        self._sizes = (0, 0)
        self._blocking = options.blocking is True
        self._lifecycle = Lifecycle("Matmul", InvalidMatmulState)

    # ------------------------------------------------------------------------------------ planning
    def _result_tensor(self) -> TensorAdapter:
        if "c" in self._ops and self._options.inplace:
            return self._ops["c"]
        like = self._ops.get("c") or self._ops["a"]
        d = self._descs["d"]
        shape = d.local_shape[::-1] if d.transposed else d.local_shape
        strides = (max(shape[1], 1), 1) if d.transposed else (1, max(shape[0], 1))
        return like.empty(
            tuple(shape), self._dtype, strides=strides, device_id=self._device, stream=self._stream
        )

    def _args(self, d_ptr: int) -> tuple:
        call, m = self._call, self._matrices
        first, second = ("b", "a") if call.swap else ("a", "b")
        ptr = {n: op.data_ptr for n, op in self._ops.items()}
        c_ptr = ptr.get("c", d_ptr)
        return (
            call.m,
            call.n,
            call.k,
            self._alpha.ctypes.data,
            ptr[first],
            1,
            1,
            m[first].value,
            ptr[second],
            1,
            1,
            m[second].value,
            self._beta.ctypes.data,
            c_ptr,
            1,
            1,
            m["c"].value,
            d_ptr,
            1,
            1,
            m["d"].value,
        )

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def plan(
        self, *, preferences: Any = None, epilog: Any = None, epilog_inputs: Any = None, stream: Any = None
    ) -> None:
        """Make the cuBLASMp handle, grids, descriptors and workspace (collective)."""
        _not_yet(preferences=preferences, epilog=epilog, epilog_inputs=epilog_inputs)
        if self._lifecycle.state is PlannerState.PLANNED:
            return
        lib, cuda_type = self._lib, dtypes.cuda_data_type(self._dtype)
        with contextlib.ExitStack() as undo:
            objects, grids, matrices = [], {}, {}

            def keep(obj: Any) -> Any:
                objects.append(obj)
                undo.callback(obj.close)
                return obj

            keep(handle := _mpobjects.MpHandle(lib, self._stream.ptr))
            for name in ("a", "b", "d"):  # c has d's layout: they share a descriptor
                desc = self._descs[name]
                if desc.grid not in grids:
                    grids[desc.grid] = keep(_mpobjects.MpGrid(lib, desc.grid, self._nccl))
                matrices[name] = keep(_mpobjects.MpMatrix(lib, desc, cuda_type, grids[desc.grid]))
            matrices["c"] = matrices["d"]
            call, opts = self._call, self._options
            algo = None if opts.algo_type is None else int(opts.algo_type)
            keep(
                mm := _mpobjects.MpMatmulDesc(
                    lib, self._compute, call.transa, call.transb, algo, opts.sm_count_communication
                )
            )
            self._matrices = matrices
            result = self._result_tensor()
            sizes = lib.matmul_buffer_size(handle.value, mm.value, *self._args(result.data_ptr))
            undo.pop_all()
        self._handle, self._mm, self._objects, self._result, self._sizes = (
            handle,
            mm,
            objects,
            result,
            tuple(sizes),
        )
        _runtime.register_plan(self)
        self._lifecycle.mark_planned()
        self._logger.info("planned %s (workspace %d device + %d host bytes)", call, *self._sizes)

    # ----------------------------------------------------------------------------------- execution
    @requires(PlannerState.PLANNED, operands=True)
    def execute(self, *, release_workspace: bool = False, stream: Any = None) -> Any:
        """Run the multiplication (collective) and return the result (``c`` itself when in place)."""
        handle = (
            self._stream
            if stream is None
            else streams.get_stream(stream, device_id=self._device, package=self._package)
        )
        if self._workspace is None and self._sizes[0]:
            self._workspace = memory.allocate(
                self._sizes[0], device_id=self._device, stream=handle, package=self._package
            )
        if self._host_workspace.size < self._sizes[1]:
            self._host_workspace = np.empty(self._sizes[1], np.uint8)
        lib, result = self._lib, self._result
        lib.set_stream(self._handle.value, handle.ptr)
        lib.matmul(
            self._handle.value,
            self._mm.value,
            *self._args(result.data_ptr),  # type: ignore[union-attr]
            0 if self._workspace is None else self._workspace.ptr,
            self._sizes[0],
            self._host_workspace.ctypes.data,
            self._sizes[1],
        )
        if release_workspace and self._workspace is not None:
            self._workspace.free(handle)
            self._workspace = None
        if self._blocking:
            streams.synchronize(handle)
        return result.tensor  # type: ignore[union-attr]

    # ------------------------------------------------------------------------------------ operands
    def reset_operands(
        self,
        a: Any = None,
        b: Any = None,
        c: Any = None,
        *,
        alpha: Any = None,
        beta: Any = None,
        stream: Any = None,
    ) -> None:
        """New operands of the same local layouts (local checks only; ``None`` keeps one)."""
        given = {n: v for n, v in (("a", a), ("b", b), ("c", c)) if v is not None}
        if self._lifecycle.operands_released and set(given) != set(self._ops):
            raise InvalidMatmulState("Matmul.reset_operands() after release_operands() needs every operand")
        new = wrap_operands(**given)
        for name, op in new.items():
            old = self._ops.get(name)
            if old is None or (op.package, tuple(op.shape), tuple(op.strides), op.dtype, op.device_id) != (
                old.package,
                tuple(old.shape),
                tuple(old.strides),
                old.dtype,
                old.device_id,
            ):
                raise ValueError(
                    f"the new operand {name} must have the planned package, shape, strides, dtype and device"
                )
        self._ops.update(new)
        if alpha is not None:
            self._alpha = scalar(alpha, self._dtype, "alpha")
        if beta is not None:
            self._beta = scalar(beta, self._dtype, "beta")
        if stream is not None:
            self._stream = streams.get_stream(stream, device_id=self._device, package=self._package)
        if "c" in new and self._options.inplace:
            self._result = new["c"]
        self._lifecycle.mark_operands_reset()

    def reset_operands_unchecked(self, a: Any = None, b: Any = None, c: Any = None, *, alpha: Any = None,
                                 beta: Any = None, stream: Any = None) -> None:  # fmt: skip
        """:meth:`reset_operands` without the layout checks (the caller guarantees them)."""
        new = wrap_operands(**{n: v for n, v in (("a", a), ("b", b), ("c", c)) if v is not None})
        self._ops.update(new)
        if alpha is not None:
            self._alpha = scalar(alpha, self._dtype, "alpha")
        if beta is not None:
            self._beta = scalar(beta, self._dtype, "beta")
        if stream is not None:
            self._stream = streams.get_stream(stream, device_id=self._device, package=self._package)
        if "c" in new and self._options.inplace:
            self._result = new["c"]
        self._lifecycle.mark_operands_reset()

    def release_operands(self) -> None:
        """Drop the references to the operands (until :meth:`reset_operands`)."""
        self._lifecycle.mark_operands_released()

    def free(self) -> None:
        """Destroy the cuBLASMp objects and release the workspace (collective; idempotent)."""
        if self._lifecycle.state is PlannerState.FREED:
            return
        try:
            for obj in reversed(self._objects):
                obj.close()
            if self._workspace is not None:
                self._workspace.free(self._stream)
        finally:
            self._objects, self._workspace = [], None
            _runtime.unregister_plan(self)
            self._lifecycle.mark_freed()


def matmul(
    a: Any,
    b: Any,
    /,
    c: Any = None,
    *,
    distributions: Any,
    alpha: Any = None,
    beta: Any = None,
    epilog: Any = None,
    epilog_inputs: Any = None,
    qualifiers: Any = None,
    quantization_scales: Any = None,
    options: Any = None,
    preferences: Any = None,
    stream: Any = None,
) -> Any:
    """``alpha * op(a) @ op(b) + beta * c`` over distributed matrices (collective; plans, runs, frees).

    Arguments as :class:`Matmul` and :meth:`Matmul.plan`.
    """
    with Matmul(
        a,
        b,
        c,
        distributions=distributions,
        alpha=alpha,
        beta=beta,
        qualifiers=qualifiers,
        quantization_scales=quantization_scales,
        options=options,
        stream=stream,
    ) as mm:
        mm.plan(preferences=preferences, epilog=epilog, epilog_inputs=epilog_inputs)
        return mm.execute()
