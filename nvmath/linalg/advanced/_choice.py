"""``Matmul``'s algorithm methods: :class:`AlgorithmChoice` (``autotune`` and
``applicable_algorithm_ids``).

``autotune`` times the planned algorithms (and, where it applies, another formulation's) through
:mod:`._autotune` with a runner of fixed buffers made here, and installs the winner: an algorithm of the
plan (:meth:`Matmul._select`) or the other formulation's plan (:meth:`Matmul._commit`).

:class:`AlgorithmChoice` is a mixin of :class:`~._planner.Matmul` (the one class it serves), as
:class:`~._reset.OperandResets` is: its methods work on the planner's own state, whose members the
planner's constructor and ``plan()`` set.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from nvmath._internal.options import check_int
from nvmath._internal.state import PlannerState, requires
from nvmath.bindings import cublasLt as lt
from nvmath.linalg.advanced import _autotune
from nvmath.linalg.advanced._launch import MatmulLaunch
from nvmath.linalg.advanced._results import ResultMaker

if TYPE_CHECKING:
    from nvmath._internal.streams import StreamHandle
    from nvmath.linalg.advanced._plan import Plan

__all__ = ["AlgorithmChoice"]


class AlgorithmChoice:
    """``Matmul``'s autotuning and algorithm queries (a mixin: see the module notes)."""

    # (set by Matmul: the members these methods read)
    _spec: Any
    _plan: Any
    _launcher: Any
    _workspace: Any

    @requires(PlannerState.PLANNED, operands=True)
    def autotune(
        self,
        iterations: int = 10,
        prune: int | None = None,
        release_workspace: bool = False,
        stream: Any = None,
    ) -> None:
        """Time the planned algorithms and reorder them fastest first (never slower than the first choice).

        For row-major operands without an epilog, the candidates of the ``ORDER_ROW`` formulation of the
        same product (another heuristic answer) are timed too; if one wins, that formulation is installed.
        With the default ``memory_limit``, the algorithms cuBLASLt offers with a workspace of up to
        1 GiB (not the plan's 32 MiB) are candidates too (split-K kernels of
        skinny products); one that wins keeps its larger workspace.

        Args:
            iterations: timed runs per algorithm (the median decides).
            prune: keep only this many algorithms (default: all).
            release_workspace: free the workspace afterwards.
            stream: the stream to time on.
        """
        check_int("iterations", iterations, minimum=1)
        if prune is not None:
            check_int("prune", prune, minimum=1)
        handle = self._get_stream(stream)
        current = self._plan
        assert current is not None
        tuning = _autotune.Tuning(
            self._spec, self._plan_prefs, self._handle(), self._log, self._slots, self._scales, self._runner
        )
        plan = _autotune.autotune(tuning, current, handle, iterations, prune)
        if plan is current:
            self._select(plan.algorithms[0])
        else:
            self._commit(plan, retire=True)  # the ORDER_ROW formulation won
        need = self._launcher.workspace_size  # type: ignore[union-attr]
        if release_workspace or self._workspace.size > need:
            self._workspace.release()  # (timing wide candidates may have grown it past the need)

    def _runner(self, plans: Sequence[Plan], handle: StreamHandle) -> tuple[Any, list]:
        """A callable running candidate ``i`` of ``plans``' algorithms, concatenated in order, with fixed
        buffers (one result, one workspace for the largest need; in place: a scratch copy of c); and the
        buffers to keep alive while it is used (see :class:`._autotune.Tuning`)."""
        maker = self._result
        if self._inplace:
            c = self._slots["c"].device
            maker = ResultMaker(c, tuple(c.shape), tuple(c.strides), self._spec.types.d_dtype)
        keep = [maker.new(handle)]  # type: ignore[union-attr]
        d_ptr = keep[0][1]
        if self._aux is not None:
            keep += [out for _, out in self._aux.new(handle)]
        ws_size = max(p.workspace_size for p in plans)
        ws_ptr = self._ws.ptr_for(ws_size, handle) if ws_size else 0
        installed = self._launcher
        slots = self._slots
        a, b, c = slots["a"].ptr, slots["b"].ptr, slots["c"].ptr if self._spec.has_c else 0
        lt_handle = self._handle()
        calls = []
        for p in plans:
            launch = installed
            if p is not self._plan:  # another formulation (no staged copy, no aux outputs)
                launch = MatmulLaunch(p, self._scalars, self._ws, self._device_id, "", keep=self._scalar_buf)
            calls += [(launch.enqueue, a.algo_ptr) for a in p.algorithms]
        installed.prepare(handle)  # type: ignore[union-attr]

        def run(i: int) -> None:
            enqueue, algo = calls[i]
            enqueue(lt_handle, a, b, c, d_ptr, algo, ws_ptr, ws_size, handle.ptr)

        return run, keep

    @requires(PlannerState.CREATED, PlannerState.PLANNED)
    def applicable_algorithm_ids(self, limit: int = 8) -> tuple[int, ...]:
        """The ids of the algorithms cuBLASLt has for these dtypes and compute type (``cublasLtMatmulAlgoGetIds``)."""
        check_int("limit", limit, minimum=1)
        t = self._spec.types
        ids = np.zeros(limit, dtype=np.int32)
        cuda = t.cuda_types
        count = lt.matmul_algo_get_ids(
            self._handle(), int(t.compute_type), int(t.scale_type), cuda["a"], cuda["b"], cuda["c"], cuda["d"],
            limit, ids.ctypes.data,
        )  # fmt: skip
        return tuple(int(i) for i in ids[:count])
