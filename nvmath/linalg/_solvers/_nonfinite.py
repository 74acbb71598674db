"""The solvers' non-finite policy: a matrix operand holding NaN or Inf gets NaN results and a
:class:`nvmath.LinAlgError` through the ``info`` check, never a hang and never a finite wrong answer.

One :class:`NonFiniteGuard` per planner remembers which matrices of the last scanned input held a
NaN or an Inf:

* CPU: :meth:`NonFiniteGuard.scan_host` computes ``isfinite(a).all()`` per matrix and, where it is
  false, hands LAPACK an identity stand-in instead (LAPACK's SVD loops forever on a NaN); the results
  of those matrices are set to NaN afterwards (:meth:`NonFiniteGuard.poison_host`).
* GPU: :meth:`NonFiniteGuard.scan_device` runs two grid-stride kernels on the working copy of the
  input (flag, then replace flagged matrices by the identity stand-in), on the caller's stream, no
  synchronization; :meth:`NonFiniteGuard.poison_device` sets the flagged matrices of each result to NaN.
  The flags live on the device and are read only when ``info`` is (:meth:`NonFiniteGuard.merge`).

A flagged matrix reports ``info`` :data:`NONFINITE_INFO` (never a LAPACK value), which wins over the
library's own ``info`` for that matrix.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nvmath._internal.tensors import TensorAdapter, is_dense
from nvmath.linalg._solvers._common import NONFINITE_INFO  # defined there (lowest module); re-exported

__all__ = ["NONFINITE_INFO", "NonFiniteGuard", "block_layout"]


def block_layout(shape: tuple[int, ...], strides: tuple[int, ...], nb: int) -> bool:
    """Whether each of the C-ordered leading ``nb`` batch entries is one dense block, blocks consecutive."""
    per = math.prod(shape[nb:])
    if not is_dense(shape[nb:], strides[nb:]) or (per and min(strides[nb:], default=0) < 0):
        return False
    step = per
    for n, s in zip(reversed(shape[:nb]), reversed(strides[:nb])):
        if n != 1 and s != step:
            return False
        step *= n
    return True


class NonFiniteGuard:
    """Which matrices of the last scanned input held NaN or Inf (see the module documentation)."""

    __slots__ = ("_batch", "_ctx", "_flags", "_mask", "_on_device", "explicit")

    def __init__(self) -> None:
        self._mask: np.ndarray | None = None  # host: True where non-finite; None when all finite
        self._flags: Any = None  # device: an InfoArray of 0/1 flags
        self._ctx: Any = None  # the GpuContext owning _flags
        self._batch: tuple[int, ...] = ()
        self._on_device = False
        self.explicit = False  # results are split per system (DirectSolver lists): poison only with force

    # ------------------------------------------------------------------ CPU
    def scan_host(self, a: np.ndarray) -> np.ndarray:
        """``a`` (``(*batch, m, n)``), with identity stand-ins for the matrices holding NaN or Inf."""
        self._on_device, self._batch = False, tuple(a.shape[:-2])
        finite = np.isfinite(a).all(axis=(-2, -1))
        if finite.all():
            self._mask = None
            return a
        self._mask = ~finite
        clean = np.array(a, copy=True)
        clean[self._mask] = np.eye(a.shape[-2], a.shape[-1], dtype=a.dtype)
        return clean

    def host_mask(self) -> np.ndarray | None:
        """The flags as a host boolean array of the batch shape (a host synchronization on the GPU)."""
        if self._on_device:
            values = self._flags.read()[: math.prod(self._batch)].reshape(self._batch) != 0
            return values if values.any() else None
        return self._mask

    def poison_host(self, result: Any, *, force: bool = False) -> Any:
        """``result`` (a host array whose leading axes are the batch) with flagged entries set to NaN."""
        if self.explicit and not force:
            return result
        mask = self.host_mask() if (self._on_device or self._mask is not None) else None
        if mask is None or not isinstance(result, np.ndarray) or result.dtype.kind not in "fc":
            return result
        if result.shape[: mask.ndim] != mask.shape:
            return result
        out = np.array(result, copy=True)
        out[mask] = np.nan
        return out

    # ------------------------------------------------------------------ GPU
    def allocate(self, ctx: Any, count: int) -> None:
        """The flags of ``count`` matrices in ``ctx``'s memory (at plan time: execution allocates nothing)."""
        from nvmath.linalg._solvers._gpu import InfoArray

        if self._flags is None or self._ctx is not ctx or self._flags.count < max(count, 1):
            self._flags, self._ctx = InfoArray(ctx, max(count, 1)), ctx

    def release(self) -> None:
        """Forget the device flags and the last scan (at ``free()`` and re-planning: the flags' memory
        belongs to the context being closed, and must neither be read nor kept alive from here)."""
        self._flags = self._ctx = self._mask = None
        self._on_device, self._batch = False, ()

    def scan_device(
        self, ctx: Any, work: Any, cols: int | None = None, batch: tuple[int, ...] | None = None
    ) -> None:
        """Flag and replace (identity) the matrices of the working buffer ``work`` holding NaN or Inf
        (in their first ``cols`` columns: all by default)."""
        from nvmath.linalg._solvers import _kernels

        self.allocate(ctx, work.count)  # a no-op after plan() allocated it
        self._on_device, self._mask = True, None
        self._batch = tuple(work.adapter.shape[:-2]) if batch is None else batch
        self._flags.zero()
        common = {
            "per": work.rows * (work.cols if cols is None else cols),
            "stride": work.stride,
            "count": work.count,
            "dtype": work.dtype,
            "device_id": ctx.device_id,
            "stream": ctx.stream,
        }
        _kernels.scan_nonfinite(work.ptr, self._flags.ptr, **common)
        _kernels.fill_flagged(work.ptr, self._flags.ptr, rows=work.rows, identity=True, **common)

    def poison_device(self, ctx: Any, result: TensorAdapter, *, force: bool = False) -> None:
        """Set the flagged batch entries of the new device tensor ``result`` to NaN (queued, no sync)."""
        if (self.explicit and not force) or not self._on_device:
            return
        if result.dtype.startswith(("int", "uint", "bool")):
            return
        from nvmath.linalg._solvers import _kernels

        nb = len(self._batch)
        shape, strides = tuple(result.shape), tuple(result.strides)
        if shape[:nb] != self._batch:
            return
        per = math.prod(shape[nb:])
        fill = {"rows": per, "per": per, "stride": per, "dtype": result.dtype, "identity": False}
        where = {"device_id": ctx.device_id, "stream": ctx.stream}
        ptr, isz = int(result.data_ptr), result.itemsize
        if block_layout(shape, strides, nb):
            _kernels.fill_flagged(ptr, self._flags.ptr, count=math.prod(self._batch), **fill, **where)
            return
        if not is_dense(shape[nb:], strides[nb:]):  # pragma: no cover - results are dense per matrix
            raise RuntimeError(f"internal: a result of shape {shape}, strides {strides} cannot be poisoned")
        for b, index in enumerate(np.ndindex(*self._batch)):  # pragma: no cover - an unusual batch layout
            offset = sum(i * st for i, st in zip(index, strides[:nb])) * isz
            _kernels.fill_flagged(ptr + offset, self._flags.at(b), count=1, **fill, **where)

    # ------------------------------------------------------------------ info
    def merge(self, info: np.ndarray) -> np.ndarray:
        """``info`` (host values, C order of the batch) with :data:`NONFINITE_INFO` where flagged."""
        mask = self.host_mask()
        if mask is None:
            return info
        return np.where(mask.reshape(-1), NONFINITE_INFO, np.asarray(info).reshape(-1)).astype(np.int32)
