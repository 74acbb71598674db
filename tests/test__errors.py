"""``nvmath._errors.warn_at_caller``: a warning raised deep inside nvmath points at the first line
outside the package (the user's call), however many nvmath layers lie between."""

from __future__ import annotations

import inspect
import types
import warnings

from nvmath._errors import warn_at_caller


def _deep():
    warn_at_caller("deep", UserWarning)


def _relay():
    return NEXT()  # noqa: F821  (a global of the layer's own namespace)


def _nvmath_layers(depth: int):
    """A chain of ``depth`` functions whose globals say they are module ``nvmath.fake_layers``; the
    innermost one warns through :func:`warn_at_caller`."""
    space = {"__name__": "nvmath.fake_layers", "warn_at_caller": warn_at_caller, "UserWarning": UserWarning}
    fn = types.FunctionType(_deep.__code__, space)
    for _ in range(1, depth):
        fn = types.FunctionType(_relay.__code__, {"__name__": "nvmath.fake_layers", "NEXT": fn})
    return fn


def test_the_warning_points_at_the_first_frame_outside_nvmath():
    """One, two or five nvmath frames: the warning's file and line are this test's call."""
    for depth in (1, 2, 5):
        outer = _nvmath_layers(depth)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            outer(); line = inspect.currentframe().f_lineno  # fmt: skip
        (w,) = seen
        assert (w.filename, w.lineno) == (__file__, line)
        assert w.category is UserWarning and str(w.message) == "deep"


def test_the_public_matmuls_warn_at_the_callers_line():
    """``beta`` without ``c`` warns at the user's line for the stateless generic matmul (its public entry,
    its plan cache and the planner's check lie between; the CPU BLAS runs it)."""
    import numpy as np

    import nvmath

    a, b = np.ones((2, 3), dtype=np.float32), np.ones((3, 2), dtype=np.float32)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        nvmath.linalg.matmul(a, b, beta=2.0)
    assert [w.filename for w in seen if "beta" in str(w.message)] == [__file__]
