"""Checks of a stateless :func:`~nvmath.linalg.advanced.matmul` call that need no library and no driver.

They run on a plan-cache miss before anything is wrapped, keyed or loaded, so a bad argument is
reported as such on any machine (not as a missing driver). The cached fast path does not need them:
no plan can be cached under an invalid epilog, and the stream is resolved there anyway.
"""

from __future__ import annotations

from typing import Any

from nvmath._internal import streams
from nvmath.linalg.advanced._epilogs import epilog_spec

__all__ = ["check_call"]


def check_call(*, epilog: Any, stream: Any) -> None:
    """Refuse a bad ``epilog`` or ``stream`` of a stateless matmul call.

    Raises:
        TypeError / ValueError: naming the value and what is allowed.
    """
    if epilog is not None:
        epilog_spec(epilog)
    streams.check_stream(stream)
