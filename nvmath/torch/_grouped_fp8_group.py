"""A product's per-group FP8 GEMMs in one compiled call: :class:`GroupCall` (``_fastcall.MatmulGroup``).

The FP8 :class:`~nvmath.torch.GroupedLinear` runs three products per step (forward ``y``, ``dx``,
``dw``), each one GEMM per group on its own planner (:mod:`._grouped_fp8_gemms`). Once a product's
planners have run on addresses (:class:`~nvmath.linalg.advanced._direct.AddressRun`) for a counts
signature, :func:`build` takes every member's fixed launch parts
(:meth:`~nvmath.linalg.advanced._direct.AddressRun.compiled_parts`: the compiled ``cublasLtMatmul``
caller with its descriptor, layouts and scalars, the algorithm, the workspace, the bias pointer
attributes) into one ``MatmulGroup``; a later call gives only the operands' and results' addresses (one
tuple each), the stream and the cuBLASLt handle, and the C loop launches every group's GEMM (see
``nvmath/_fastcall.d/matmul_group.c``). The launches, their order and their arguments are those
of the per-member runs: the results are the same bits.

A call returns ``False`` and launches nothing when anything differs from what the group was built for
(another current device or stream, a planner re-planned or freed, another algorithm, a workspace not
bound to the stream or too small); the caller then runs every member on its own (the Python path, with
its own checks), and may build the group again. On the pure-Python path (``NVMATH_PURE_PYTHON=1``, or
the extension not built) :func:`build` returns ``None`` and nothing here runs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from nvmath._internal import fastpath, streams
from nvmath.linalg.advanced import _handles

__all__ = ["GroupCall", "build"]

logger = logging.getLogger(__name__)


class GroupCall:
    """``call(a, b, d, bias)``: every member's GEMM on those addresses (tuples, one per member; ``bias``
    ``None`` without) in one compiled call; ``True`` when launched, ``False`` when nothing was (see the
    module notes).

    Args:
        group: the ``nvmath._fastcall.MatmulGroup``.
        device_id, lt_handle: the members' device and cuBLASLt handle option (0: the thread's handle).
        raw, device: torch's raw current-stream and current-device getters.
        after: ``None``, or the done-event recorder of the members' stream (a run that used a
            workspace on a mortal stream records it, once after the last launch).
    """

    __slots__ = ("_after", "_device", "_raw", "device_id", "group", "lt_handle")

    def __init__(self, group: Any, device_id: int, lt_handle: int, raw: Any, device: Any, after: Any):
        self.group, self.device_id, self.lt_handle = group, device_id, lt_handle
        self._raw, self._device, self._after = raw, device, after

    def __call__(self, a: tuple, b: tuple, d: tuple, bias: tuple | None) -> bool:
        device_id = self.device_id
        if self._device() != device_id:  # (another device current: the per-member runs switch context)
            return False
        lt = self.lt_handle or _handles.get_handle(device_id)
        if not self.group(lt, self._raw(device_id), a, b, d, bias):
            return False
        if self._after is not None:
            self._after()
        return True


def build(runs: Sequence[Any]) -> GroupCall | None:
    """The :class:`GroupCall` of ``runs`` (the members' :class:`~nvmath.linalg.advanced._direct.AddressRun`,
    in launch order, each just run on the stream the group will run on), or ``None`` where the members
    cannot be launched from C: the pure-Python path, a member needing more than the bare call
    (``compiled_parts`` is ``None``), members on several devices, streams or handle options, a bias
    pointer attribute not settable from C."""
    if not fastpath.available() or not runs:
        return None
    raw, device = streams.torch_raw_stream(), streams.torch_device_getter()
    if raw is None or device is None:
        return None
    parts = [r.compiled_parts() for r in runs]
    if any(p is None for p in parts):
        return None
    if len({(p["device_id"], p["lt_handle"], p["handle"].ptr) for p in parts}) != 1:
        return None
    set_attr = 0
    if any(p["attrs"] for p in parts):
        set_attr = fastpath.bound_address("cublasLt", "cublasLtMatmulDescSetAttribute")
        if set_attr is None:
            return None
    from nvmath import _fastcall

    first = parts[0]
    after = streams.done_recorder(first["handle"]) if any(p["done"] for p in parts) else None
    try:
        group = _fastcall.MatmulGroup(tuple(parts), set_attr)
    except (TypeError, ValueError, KeyError, OverflowError) as exc:  # (parts the C block cannot take)
        logger.debug("no compiled group for these GEMMs (%s): per-group launches", exc)
        return None
    return GroupCall(group, first["device_id"], first["lt_handle"], raw, device, after)
