"""The stateless distributed ``matmul``: DTensors to :mod:`._dtensor`, local blocks to the planner.

Kept apart from :mod:`._planner` so that the planner and the DTensor glue (which runs the planner's
``matmul`` on the local blocks) do not import each other.
"""

from __future__ import annotations

from typing import Any

from . import _dtensor, _planner

__all__ = ["matmul"]


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
    """``alpha * op(a) @ op(b) + beta * c`` over distributed matrices (collective; plans, runs, frees).

    Arguments as :class:`~._planner.Matmul` and :meth:`~._planner.Matmul.plan`. torch DTensors ``a``
    and ``b`` (and ``c``) on a 1-D mesh take their distributions from their placements and give a
    DTensor, with autograd (see :mod:`._dtensor`); ``distributions`` is then not given.
    """
    run = _dtensor.matmul if _dtensor.is_dtensor(a) or _dtensor.is_dtensor(b) else _planner.matmul
    return run(a, b, c, distributions=distributions, alpha=alpha, beta=beta, epilog=epilog,
               epilog_inputs=epilog_inputs, qualifiers=qualifiers, quantization_scales=quantization_scales,
               options=options, preferences=preferences, stream=stream)  # fmt: skip
