"""nvmath.linalg.advanced._streams: which calls on a destroyable stream record a done event."""

from __future__ import annotations

import pytest

from nvmath.linalg.advanced._streams import done_after_every_call


@pytest.mark.parametrize(
    "staged, package, always",
    [(False, "torch", False), (False, "cupy", False), (True, "torch", True), (False, "numpy", True), (False, "fake", True)],
)
def test_which_calls_record_done_events(staged, package, always):
    """torch / cupy outputs come from allocators that order their own frees: without a staging copy, only
    calls that use the workspace record a done event; anything else records one after every call."""
    assert done_after_every_call(staged, package) is always
