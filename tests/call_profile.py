"""What a call does, deterministically: the Python frames it enters and the C functions it calls.

The hot-path tests assert on these instead of wall-clock time (the team's "no timing asserts"): a
fast path is one whose profile is a short, fixed list; the time itself is measured by the
``benchmarks/`` overhead suite.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["c_calls", "profile_calls", "python_calls"]


def profile_calls(fn: Callable[[], Any]) -> list[tuple[str, str]]:
    """The ``(event, function name)`` pairs ``sys.setprofile`` sees while ``fn()`` runs: ``call`` /
    ``return`` for Python frames, ``c_call`` / ``c_return`` / ``c_exception`` for C functions. The
    first frame is ``fn`` itself; the last event is the profiler's own switch-off."""
    events: list[tuple[str, str]] = []

    def hook(frame: Any, event: str, arg: Any) -> None:
        name = frame.f_code.co_name if event in ("call", "return") else getattr(arg, "__name__", repr(arg))
        events.append((event, name))

    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(previous)
    return events


def python_calls(events: list[tuple[str, str]]) -> list[str]:
    """The Python frames entered, in order, without ``fn`` itself."""
    return [name for event, name in events if event == "call"][1:]


def c_calls(events: list[tuple[str, str]]) -> list[str]:
    """The C functions called, in order, without the profiler's own switch-off (``setprofile``)."""
    names = [name for event, name in events if event == "c_call"]
    return names[:-1] if names and names[-1] == "setprofile" else names
