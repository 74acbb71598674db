"""The distributed matmul, :class:`Matmul` and :func:`matmul`, on cuBLASMp (collective).

Construction checks everything once: each rank checks its operands locally (same package, dtype,
GPU device; a local layout cuBLASMp can describe), then *one* collective gathers every rank's facts
and verdict, so bad input raises on every rank naming the ranks. :meth:`Matmul.plan` makes the
cuBLASMp handle, grids, descriptors and workspace (collective); :meth:`Matmul.execute` runs
``D = alpha * op(A) @ op(B) + beta * C`` on the caller's stream.

Epilogs (:mod:`._epilogs`), FP8 quantization scales and ``result_amax`` (:mod:`._quantize`) go
through the matmul descriptor (:mod:`._extras`); with aux outputs or an amax, ``execute`` returns
``(result, aux)`` as nvmath-python does. The device workspace is registered with cuBLASMp
(``cublasMpMalloc``, see :mod:`._mpobjects`), so the overlapped algorithms apply; it is
deregistered and freed by ``execute(release_workspace=True)`` and :meth:`Matmul.free`. Not
implemented (raise :class:`NotImplementedError`): ``preferences``, ``block_scaling``, a
``result_type`` other than the operands' for non-FP8 operands.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Any

import numpy as np

from nvmath._errors import InvalidPlannerState
from nvmath._internal import dtypes, streams
from nvmath._internal.logging import get_logger
from nvmath._internal.options import check_or_create_options
from nvmath._internal.state import FreedOnExit, Lifecycle, PlannerState, requires
from nvmath._internal.tensors import TensorAdapter, wrap_operands
from nvmath.distributed import _runtime
from nvmath.distributed._agreement import compare_facts, gather_by_rank
from nvmath.linalg.advanced import MatmulComputeType

from . import _mpobjects
from ._epilogs import check_epilog_inputs, epilog_layout
from ._checks import gather_checked, not_yet, wrap_inputs
from ._extras import DescriptorTensors, check_scale
from ._options import LOGGER_NAME, MatmulOptions, effective_algorithm
from ._problem import (
    COMPUTE_TYPES,
    agreed_order,
    describe_call,
    global_matrix_shape,
    matmul_call,
    scalar,
)
from ._quantize import FP8, scales_given
from ._traits import local_shape, matrix_descriptor

__all__ = ["InvalidMatmulState", "Matmul", "matmul"]

_WHAT = "nvmath.distributed.linalg.advanced.Matmul"
_MIN_WORKSPACE = 1 << 16
"""The smallest device workspace allocated (cuBLASMp may report 0 bytes at one rank)."""


class InvalidMatmulState(InvalidPlannerState):
    """A distributed Matmul method was called in a state that does not allow it."""


class Matmul(FreedOnExit):
    """``D = alpha * op(a) @ op(b) + beta * c`` over distributed matrices (collective).

    Args:
        a, b, c: this rank's parts (cupy / torch GPU tensors, Fortran or C order locally); ``c`` optional.
        distributions: ``[dist_a, dist_b, dist_c]`` (the third also gives the result's distribution).
        alpha, beta: scalars (``beta`` required with ``c``).
        qualifiers: a numpy structured array with ``is_transpose`` / ``is_conjugate`` per a, b.
        quantization_scales: FP8 scales (``MatmulQuantizationScales`` or a dict; numbers or float32
            device tensors of one element): ``a`` and ``b`` for FP8 operands, ``d`` for an FP8 result.
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
        self._logger = get_logger(LOGGER_NAME, options.logger)
        context = _runtime.context()
        _runtime.engine("nccl")
        self._algo, why = effective_algorithm(options.algo_type, os.environ, context.process_group.nranks)
        if why:
            self._logger.log(
                logging.DEBUG if context.process_group.nranks == 1 else logging.WARNING, "%s", why
            )
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
        ops, (qa, qb), everyone, types, scales = gather_checked(
            group, device, {"a": a, "b": b, "c": c}, distributions, qualifiers, options, quantization_scales
        )
        compare_facts({r: f["agreed"] for r, f in everyone.items()}, _WHAT, group.rank)
        self._types = types
        self._setup(ops, distributions, everyone, group, device, qa, qb, options, alpha, beta, stream)
        self._tensors = DescriptorTensors(types, ops["a"], device, self._stream)
        self._tensors.set_scales(scales)

    def _setup(
        self, ops, distributions, everyone, group, device, qa, qb, options, alpha, beta, stream
    ) -> None:
        descs = matrix_descriptors(ops, distributions, everyone, group.rank, group.nranks, qa, qb)
        dtype = ops["a"].dtype
        call = matmul_call(descs["a"], descs["b"], descs["d"], qa, qb, dtypes.is_complex(dtype))
        if dtype in FP8 and (call.transa, call.transb) != ("T", "N"):
            raise ValueError(
                f"FP8 operands: cuBLASMp (through cuBLASLt) multiplies them as op(A) = A^T, op(B) = B only "
                f"(this layout gives {call.transa}{call.transb}): give a in C order (row-major) and b in "
                "Fortran order, or transpose through qualifiers"
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
        self._init_plan_state()

    def _init_plan_state(self) -> None:
        """The fields :meth:`plan` fills (nothing planned yet)."""
        self._result: TensorAdapter | None = None
        self._objects: list[Any] = []
        self._matrices: dict[str, Any] = {}
        self._workspace: Any = None
        self._workspace_grid: Any = None
        self._c_scratch: TensorAdapter | None = None
        self._last_stream = self._stream
        self._host_workspace = np.empty(0, np.uint8)
        self._sizes = (0, 0)
        self._workspace_bytes = _MIN_WORKSPACE
        self._blocking = self._options.blocking is True
        self._lifecycle = Lifecycle("Matmul", InvalidMatmulState)

    # ------------------------------------------------------------------------------------ planning
    def _result_tensor(self, dtype: str | None = None) -> TensorAdapter:
        """The result (``c`` in place, else a new tensor of D's local layout), or a new tensor of
        D's layout and ``dtype``."""
        if dtype is None and "c" in self._ops and self._options.inplace:
            return self._ops["c"]
        like = self._ops.get("c") or self._ops["a"]
        d = self._descs["d"]
        shape = d.local_shape[::-1] if d.transposed else d.local_shape
        strides = (max(shape[1], 1), 1) if d.transposed else (1, max(shape[0], 1))
        return like.empty(
            tuple(shape),
            dtype or self._types.result,
            strides=strides,
            device_id=self._device,
            stream=self._stream,
        )

    def _args(self, d_ptr: int) -> tuple:
        call, m = self._call, self._matrices
        first, second = ("b", "a") if call.swap else ("a", "b")
        ptr = {n: op.data_ptr for n, op in self._ops.items()}
        # no c: C is D (in place, one descriptor), or an FP8 D's 16-bit scratch C (out of place)
        c_ptr = ptr.get("c", d_ptr if self._c_scratch is None else self._c_scratch.data_ptr)
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

    def _plan_epilog(self, epilog: Any, epilog_inputs: Any) -> None:
        """Check the epilog and its inputs on this rank, then agree in one collective (bad input
        raises on every rank) and allocate the epilog's outputs."""
        group = _runtime.context().process_group
        problem: BaseException | None = None
        layout = None
        try:
            d = self._descs["d"]
            shape = d.local_shape[::-1] if d.transposed else d.local_shape
            layout = epilog_layout(epilog, tuple(shape), self._types.result,
                                   is_complex=dtypes.is_complex(self._dtype), swapped=self._call.swap)  # fmt: skip
            if self._types.result in FP8 and (layout.inputs or layout.outputs):
                raise ValueError(f"epilog {layout.spec.epilog.name} with an FP8 result is not supported")
            inputs = wrap_inputs(epilog_inputs)
            for name, op in inputs.items():
                if op.device_id != self._device or op.package != self._package:
                    raise ValueError(
                        f"epilog input {name!r} must be a {self._package} tensor on device {self._device}"
                    )
            check_epilog_inputs(layout, inputs)
        except (TypeError, ValueError) as exc:
            problem = exc
        everyone = gather_by_rank(group, {"epilog": None if layout is None else int(layout.spec.epilog),
                                          "problem": None if problem is None else repr(problem)})  # fmt: skip
        if problem is not None:
            raise problem
        bad = {r: f["problem"] for r, f in everyone.items() if f["problem"]}
        if bad:
            raise ValueError(
                f"{_WHAT}.plan: the epilog inputs of rank(s) {sorted(bad)} are not usable: {bad}"
            )
        compare_facts({r: {"epilog": f["epilog"]} for r, f in everyone.items()}, _WHAT, group.rank)
        if layout.spec.epilog != 0:  # type: ignore[union-attr]
            self._tensors.set_epilog(layout, inputs)  # type: ignore[arg-type]

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def plan(
        self, *, preferences: Any = None, epilog: Any = None, epilog_inputs: Any = None, stream: Any = None
    ) -> None:
        """Make the cuBLASMp handle, grids, descriptors and workspace size (collective).

        Args:
            preferences: not implemented (must be None).
            epilog: a :class:`MatmulEpilog` (None: DEFAULT).
            epilog_inputs: ``{name: tensor}``, this rank's parts (see :mod:`._epilogs`).
            stream: unused (the plan is made on the constructor's stream).
        """
        not_yet(preferences=preferences)
        if self._lifecycle.state is PlannerState.PLANNED:
            return
        self._plan_epilog(epilog, epilog_inputs)
        types = {"a": self._ops["a"].dtype, "b": self._ops["b"].dtype, "d": self._types.result}
        with contextlib.ExitStack() as undo:
            objects: list[Any] = []

            def keep(obj: Any) -> Any:
                objects.append(obj)
                undo.callback(obj.close)
                return obj

            handle, grids, matrices = self._make_matrices(keep, types)
            mm, attributes = self._make_matmul_desc(keep)
            self._matrices = matrices
            self._workspace_grid = grids[self._descs["a"].grid]
            result = self._result_tensor()
            self._log_call(types, self._algo, attributes, len(grids))
            sizes = self._workspace_sizes(handle, mm, result)
            undo.pop_all()
        self._handle, self._mm, self._objects, self._result, self._sizes = handle, mm, objects, result, sizes
        _runtime.register_plan(self)
        self._lifecycle.mark_planned()
        self._logger.info("planned %s (workspace %d device + %d host bytes)", self._call, *self._sizes)

    def _make_matrices(self, keep: Any, types: dict[str, str]) -> tuple[Any, dict, dict]:
        """The cuBLASMp handle, grids and matrix descriptors (``keep`` closes them on failure)."""
        lib, grids, matrices = self._lib, {}, {}
        handle = keep(_mpobjects.MpHandle(lib, self._stream.ptr))
        for name in ("a", "b", "d"):  # c has d's layout: they share a descriptor
            desc = self._descs[name]
            if desc.grid not in grids:
                grids[desc.grid] = keep(_mpobjects.MpGrid(lib, desc.grid, self._nccl))
            cuda_type = dtypes.cuda_data_type(types[name])
            matrices[name] = keep(_mpobjects.MpMatrix(lib, desc, cuda_type, grids[desc.grid]))
        matrices["c"] = matrices["d"]
        if self._types.result in FP8:
            # cuBLASLt pairs an FP8 D with a 16-bit C, and takes C == D only with one descriptor
            # (in place): C gets its own bfloat16 buffer of D's layout (never read: beta is 0).
            desc = self._descs["d"]
            matrices["c"] = keep(
                _mpobjects.MpMatrix(lib, desc, dtypes.cuda_data_type("bfloat16"), grids[desc.grid])
            )
            self._c_scratch = self._result_tensor("bfloat16")
        return handle, grids, matrices

    def _make_matmul_desc(self, keep: Any) -> tuple[Any, list]:
        """The matmul descriptor with the epilog / scale attributes set; ``(desc, attributes)``."""
        call, opts = self._call, self._options
        mm = keep(_mpobjects.MpMatmulDesc(self._lib, self._compute, call.transa, call.transb, self._algo,
                                          opts.sm_count_communication))  # fmt: skip
        attributes = self._tensors.attributes()
        for attribute in attributes:
            mm.set(*attribute)
        return mm, attributes

    def _workspace_sizes(self, handle: Any, mm: Any, result: TensorAdapter) -> tuple[int, int]:
        """``(device, host)`` workspace bytes cuBLASMp asks for; the device workspace every rank
        allocates is the largest any rank needs (collective)."""
        sizes = self._lib.matmul_buffer_size(handle.value, mm.value, *self._args(result.data_ptr))
        # cublasMpMalloc registers symmetric memory (collective): every rank allocates the same
        # size, the largest any rank needs, and never 0 bytes (no null d_work)
        needs = gather_by_rank(_runtime.context().process_group, int(sizes[0])).values()
        self._workspace_bytes = max(*needs, _MIN_WORKSPACE)
        return tuple(sizes)  # type: ignore[return-value]

    def _log_call(self, types: dict[str, str], algo: int | None, attributes: list, ngrids: int) -> None:
        """Everything the cuBLASMp call is given (DEBUG): a failing call is diagnosed from the log."""
        if self._logger.isEnabledFor(logging.DEBUG):
            c = "bfloat16 scratch" if self._c_scratch is not None else ("c" if "c" in self._ops else "d")
            self._logger.debug("%s", describe_call(self._call, self._compute, algo, ngrids, types, self._descs,
                                                   c, attributes))  # fmt: skip

    # ----------------------------------------------------------------------------------- execution
    @requires(PlannerState.PLANNED, operands=True)
    def execute(self, *, release_workspace: bool = False, stream: Any = None) -> Any:
        """Run the multiplication (collective) and return the result (``c`` itself when in place),
        or ``(result, aux)`` when the epilog has an aux output or ``result_amax`` is set.

        The first call (and the first after ``release_workspace=True``) allocates and registers the
        workspace with cuBLASMp (collective); releasing it waits for the stream first (the
        registered memory is not stream-ordered)."""
        handle = (
            self._stream
            if stream is None
            else streams.get_stream(stream, device_id=self._device, package=self._package)
        )
        if self._workspace is None:  # collective: the size every rank agreed at plan time
            self._workspace = _mpobjects.MpWorkspace(self._lib, self._workspace_grid, self._workspace_bytes)
            self._logger.debug(
                "workspace: %d bytes registered at %#x", self._workspace.size, self._workspace.ptr
            )
        self._last_stream = handle
        if self._host_workspace.size < self._sizes[1]:
            self._host_workspace = np.empty(self._sizes[1], np.uint8)
        lib, result = self._lib, self._result
        lib.set_stream(self._handle.value, handle.ptr)
        lib.matmul(
            self._handle.value,
            self._mm.value,
            *self._args(result.data_ptr),  # type: ignore[union-attr]
            self._workspace.ptr,  # type: ignore[union-attr]
            self._sizes[0],
            self._host_workspace.ctypes.data,
            self._sizes[1],
        )
        if release_workspace and self._workspace is not None:
            streams.synchronize(handle)
            self._workspace.close()
            self._workspace = None
        elif self._blocking:
            streams.synchronize(handle)
        aux = self._tensors.aux()
        return (result.tensor, aux) if aux else result.tensor  # type: ignore[union-attr]

    # ------------------------------------------------------------------------------------ operands
    def reset_operands(
        self,
        a: Any = None,
        b: Any = None,
        c: Any = None,
        *,
        alpha: Any = None,
        beta: Any = None,
        quantization_scales: Any = None,
        epilog_inputs: Any = None,
        stream: Any = None,
    ) -> None:
        """New operands, scales or epilog inputs of the planned local layouts (local checks only;
        ``None`` keeps one)."""
        given = {n: v for n, v in (("a", a), ("b", b), ("c", c)) if v is not None}
        if self._lifecycle.operands_released and set(given) != set(self._ops):
            raise InvalidMatmulState("Matmul.reset_operands() after release_operands() needs every operand")
        new = wrap_operands(**given) if given else {}
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
        scales = scales_given(quantization_scales)
        unknown = set(scales) - set(self._types.scales)
        if unknown:
            raise ValueError(
                f"quantization_scales {sorted(unknown)}: this Matmul uses {list(self._types.scales)}"
            )
        checked = {n: check_scale(n, v, self._package, self._device) for n, v in scales.items()}
        inputs = wrap_inputs(epilog_inputs)
        self._tensors.reset_inputs(inputs)
        self._apply(new, alpha, beta, stream, checked)

    def reset_operands_unchecked(self, a: Any = None, b: Any = None, c: Any = None, *, alpha: Any = None,
                                 beta: Any = None, quantization_scales: Any = None, epilog_inputs: Any = None,
                                 stream: Any = None) -> None:  # fmt: skip
        """:meth:`reset_operands` without the layout checks (the caller guarantees them)."""
        given = {n: v for n, v in (("a", a), ("b", b), ("c", c)) if v is not None}
        new = wrap_operands(**given) if given else {}
        checked = {n: check_scale(n, v, self._package, self._device)
                   for n, v in scales_given(quantization_scales).items()}  # fmt: skip
        if epilog_inputs:
            self._tensors.inputs.update(wrap_inputs(epilog_inputs))
        self._apply(new, alpha, beta, stream, checked)

    def _apply(self, new: dict[str, TensorAdapter], alpha: Any, beta: Any, stream: Any,
               scales: dict[str, Any]) -> None:  # fmt: skip
        self._ops.update(new)
        if alpha is not None:
            self._alpha = scalar(alpha, self._dtype, "alpha")
        if beta is not None:
            self._beta = scalar(beta, self._dtype, "beta")
        if stream is not None:
            self._stream = streams.get_stream(stream, device_id=self._device, package=self._package)
        if "c" in new and self._options.inplace:
            self._result = new["c"]
        if scales:
            self._tensors.set_scales(scales)
        if self._lifecycle.state is PlannerState.PLANNED and (scales or self._tensors.inputs):
            for attribute in self._tensors.attributes():
                if attribute[0].endswith("_POINTER"):
                    self._mm.set(*attribute)
        self._lifecycle.mark_operands_reset()

    def release_operands(self) -> None:
        """Drop the references to the operands (until :meth:`reset_operands`)."""
        self._lifecycle.mark_operands_released()

    def free(self) -> None:
        """Destroy the cuBLASMp objects and release the workspace (collective; idempotent)."""
        if self._lifecycle.state is PlannerState.FREED:
            return
        try:
            if self._workspace is not None:  # before its grid; the registered memory is not stream-ordered
                streams.synchronize(self._last_stream)
                self._workspace.close()
            for obj in reversed(self._objects):
                obj.close()
        finally:
            self._objects, self._workspace, self._c_scratch = [], None, None
            _runtime.unregister_plan(self)
            self._lifecycle.mark_freed()


def matrix_descriptors(ops: dict[str, TensorAdapter], distributions: Any, everyone: dict[int, Any], rank: int,
                       nranks: int, qa: Any, qb: Any) -> dict[str, Any]:  # fmt: skip
    """This rank's matrix descriptors of a, b (and c) and of the result d (c's when given, else
    ``distributions[2]`` in Fortran order), from every rank's gathered facts."""
    names = [n for n in ("a", "b", "c") if n in ops]
    descs = {}
    for n in names:
        dist = distributions["abc".index(n)]
        global_shape = global_matrix_shape(n, dist, {r: f["shapes"][n] for r, f in everyone.items()}, nranks)
        order = agreed_order(n, {r: f["orders"][n] for r, f in everyone.items()})
        descs[n] = matrix_descriptor(global_shape, dist, rank, nranks, ops[n].shape, ops[n].strides, order)
    if "c" in ops:
        descs["d"] = descs["c"]
        return descs
    m = descs["a"].n if qa[0] != descs["a"].transposed else descs["a"].m
    n = descs["b"].m if qb[0] != descs["b"].transposed else descs["b"].n
    shape = local_shape((m, n), distributions[2], rank, nranks)
    descs["d"] = matrix_descriptor((m, n), distributions[2], rank, nranks, shape, (1, max(shape[0], 1)))
    return descs


def matmul(
    a: Any,
    b: Any,
    /,
    c: Any = None,
    *,
    distributions: Any = None,
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
    """``alpha * op(a) @ op(b) + beta * c`` over distributed matrices given as local blocks
    (collective; plans, runs, frees). Arguments as :class:`Matmul` and :meth:`Matmul.plan`; the public
    ``matmul`` (:mod:`._stateless`) also takes DTensors."""
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
