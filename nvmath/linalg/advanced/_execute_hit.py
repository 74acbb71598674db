"""``Matmul.execute()``'s compiled hit: the common call in one C call (``nvmath._fastcall.MatmulExecuteHit``).

The common call is ``execute()`` without arguments on torch operands whose result torch makes on its
current stream (no aux outputs, not in place, not blocking). On the Python path it resolves the stream,
allocates the result with ``torch.empty_strided`` and runs :meth:`~._launch.MatmulLaunch.run`. The hit
does the same in C: torch's raw current stream and current device compared with the ones it was made
for, the grad-mode rule (an operand that requires grad while grad mode is on goes to ``nvmath.torch``),
the thread's cuBLASLt handle, the operands' addresses read from the planner's slots, the result made by
``new_empty_strided`` of an empty template (bound at build), then ``cublasLtMatmul`` through the launch's own
compiled caller (:meth:`~._launch.MatmulLaunch.compiled_parts`), and the done event where the launch
records one.

It caches nothing that can go stale: every call re-reads the slots' addresses, the launch's ``closed``
flag and selected ``algo``, and the workspace binding, so a reset, a re-plan, an algorithm selection,
a re-bound workspace or ``free()`` makes the next call a miss (``None``): the planner then takes its
Python path, which raises or re-binds as before, and makes a new hit once the launch, its algorithm or
the stream changed (:class:`ExecuteHits`). The planner calls it inside its state guard, so every state
and thread check of ``execute()`` still runs first. On the pure-Python path the planner has no
:class:`ExecuteHits` (nothing is made or compared per call).
"""

from __future__ import annotations

import sys
from typing import Any

from nvmath._internal import fastpath, streams
from nvmath._internal.streams import StreamHandle
from nvmath.linalg.advanced._launch import twin_arguments

__all__ = ["ExecuteHits", "build"]


def build(
    launch: Any, handle: StreamHandle, direct: tuple, slots: tuple, grad_slots: tuple, grad_enabled: Any
) -> Any:  # fmt: skip
    """The ``MatmulExecuteHit`` of ``launch`` on ``handle`` (torch's current stream), or ``None`` where
    its calls cannot be made in C: the compiled path is off or predates the type, torch has no CUDA
    getters, or the launch needs more than the bare call (see
    :meth:`~._launch.MatmulLaunch.compiled_parts`).

    Args:
        launch: the planner's installed :class:`~._launch.MatmulLaunch`.
        handle: the stream of the call that just ran on the Python path.
        direct: the result maker's ``direct`` tuple (``(empty, shape, strides, torch dtype, device)``).
        slots: the operand slots ``(a, b)``, or ``(a, b, c)`` with ``c`` (their ``ptr`` read per call).
        grad_slots: the slots whose tensors may require grad (``user.tensor.requires_grad`` read per
            call while ``grad_enabled()``); ``grad_enabled``: ``torch.is_grad_enabled`` or ``None``.
    """
    if not fastpath.available():
        return None
    from nvmath import _fastcall

    maker = getattr(_fastcall, "MatmulExecuteHit", None)
    raw, device = streams.torch_raw_stream(), streams.torch_device_getter()
    if maker is None or raw is None or device is None:
        return None
    parts = launch.compiled_parts(handle)
    if parts is None:
        return None
    _, shape, strides, tdtype, tdevice = direct
    template = sys.modules["torch"].empty(0, dtype=tdtype, device=tdevice)
    return maker(
        **twin_arguments(launch, parts, handle), raw=raw, get_device=device, grad_enabled=grad_enabled,
        alloc=template.new_empty_strided, shape=shape, strides=strides, slots=slots, grad_slots=grad_slots,
    )  # fmt: skip


class ExecuteHits:
    """The planner's current hit (:attr:`hit`, ``None`` when there is none; :attr:`run`: its ``run``, the
    call the planner makes, which profilers see) and what it was made for: a new one is made
    (:meth:`refresh`) only when the launch, its selected algorithm or the stream differ from the last
    attempt's, so a call that keeps missing (another device current, a workspace bound elsewhere) does
    not rebuild it every time."""

    __slots__ = ("hit", "made_for", "run")

    def __init__(self) -> None:
        self.hit: Any = None
        self.run: Any = None
        self.made_for: tuple = ()

    def refresh(
        self, launch: Any, handle: StreamHandle, direct: tuple, slots: tuple, grad_slots: tuple,
        grad_enabled: Any,
    ) -> Any:  # fmt: skip
        """After a common call ran on the Python path on ``handle``: make the hit for it unless the
        last attempt was for the same launch, algorithm and stream (arguments as :func:`build`); return
        :attr:`run`."""
        key = (launch, launch.algo, handle)
        made = self.made_for
        if len(made) == 3 and made[0] is key[0] and made[1] is key[1] and made[2] is key[2]:
            return self.run
        self.hit = self.run = None
        self.made_for = key
        hit = build(launch, handle, direct, slots, grad_slots, grad_enabled)
        if hit is not None:
            self.hit, self.run = hit, hit.run
        return self.run

    def drop(self) -> None:
        """Forget the hit (a new plan, ``free()``)."""
        if self.hit is not None:
            self.hit.disarm()
        self.hit = self.run = None
        self.made_for = ()
