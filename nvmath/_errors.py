"""The exception tree of nvmath, in one place.

Policy (see ``docs/errors.rst``):

* Misuse is reported before any GPU work starts: ``TypeError`` for a value of the wrong kind,
  ``ValueError`` for a value of the right kind that is not allowed. The message names the offending
  value and what is allowed.
* A planner used out of order raises :class:`InvalidPlannerState` (a ``RuntimeError``); the
  message names the method, the state the object is in and the call that fixes it.
* A CUDA math library that reports a failure raises a :class:`CudaLibraryError` subclass carrying
  ``.status`` and the status name.
* A call that fails creates nothing; cleanup failures warn (:class:`NvmathWarning`, through
  :func:`warn_cleanup_failure`), they never raise.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable

__all__ = [
    "NvmathError",
    "InvalidPlannerState",
    "InvalidMatmulState",
    "InvalidFFTState",
    "InvalidDirectSolverState",
    "InvalidSolverState",
    "LibraryNotFoundError",
    "FunctionNotFoundError",
    "NotSupportedError",
    "CudaLibraryError",
    "UnsupportedLayoutError",
    "LinAlgError",
    "NvmathWarning",
    "warn_cleanup_failure",
]


class NvmathError(Exception):
    """Base class of every exception raised by nvmath itself."""


class InvalidPlannerState(NvmathError, RuntimeError):
    """A stateful object was used in a state that does not allow the call (e.g. after ``free()``)."""


class InvalidMatmulState(InvalidPlannerState):
    """A ``Matmul`` object was used in a state that does not allow the call."""


class InvalidFFTState(InvalidPlannerState):
    """An ``FFT`` object was used in a state that does not allow the call."""


class InvalidDirectSolverState(InvalidPlannerState):
    """A ``DirectSolver`` object was used in a state that does not allow the call."""


class InvalidSolverState(InvalidPlannerState):
    """A dense-solver planner (Cholesky, QR, eigh, SVD, ...) was used out of order."""


class LibraryNotFoundError(NvmathError, RuntimeError):
    """A CUDA library (or the driver) could not be found or loaded."""


class FunctionNotFoundError(LibraryNotFoundError):
    """A symbol is missing from the loaded library (usually: the library is older than needed)."""


class NotSupportedError(NvmathError, RuntimeError):
    """The request is valid but not supported by the loaded libraries, driver or device."""


class CudaLibraryError(NvmathError):
    """A CUDA math library returned a failure status.

    Attributes:
        status: the integer status code returned by the library.
        status_name: its symbolic name (e.g. ``"CUBLAS_STATUS_NOT_SUPPORTED"``).
    """

    library = "CUDA library"

    def __init__(self, status: int, status_name: str | None = None, detail: str = ""):
        self.status = int(status)
        self.status_name = status_name or f"status {int(status)}"
        msg = f"{self.library} call failed: {self.status_name} ({self.status})"
        if detail:
            msg += f"; {detail}"
        if self.status_name.endswith(_NO_DEVICE_STATUSES):
            msg += _no_device_hint()
        super().__init__(msg)

    def __reduce__(self):
        return (type(self), (self.status, self.status_name))


# Statuses the libraries report when no GPU or driver is there (handle and plan creation).
_NO_DEVICE_STATUSES = ("NOT_INITIALIZED", "INTERNAL_ERROR", "SETUP_FAILED", "INVALID_DEVICE")


# The "is there a usable GPU" probe, registered by ``nvmath._internal.devices`` when it is imported
# (which ``import nvmath`` always does). This module stays the bottom of the package: it imports
# nothing of ours, so the probe is handed in rather than imported. ``None``: no probe, so the hint
# is given (as when the probe cannot be run).
gpu_probe: Callable[[], bool] | None = None


def _no_device_hint() -> str:
    """A hint to add to an error when no usable NVIDIA GPU or driver was found ('' when there is one)."""
    probe = gpu_probe
    try:
        if probe is not None and probe():
            return ""
    except Exception:  # noqa: BLE001 - a hint never raises
        pass
    return "; no NVIDIA GPU or CUDA driver was found on this machine (the library needs one)"


class UnsupportedLayoutError(NvmathError, ValueError):
    """The operand layout cannot be expressed for the library.

    Attributes:
        permutation: an axis permutation that, applied to the operand (and followed by a copy),
            gives a supported layout.
        axes: the transform axes to use on the permuted operand.
    """

    def __init__(self, message: str, permutation=None, axes=None):
        super().__init__(message)
        self.permutation = permutation
        self.axes = axes


class LinAlgError(NvmathError, ValueError):
    """A factorization or solve failed for some matrices of a batch.

    Attributes:
        indices: the batch indices of the failing matrices.
        info: the library's ``info`` value for each of them.
    """

    def __init__(self, message: str, indices=(), info=()):
        super().__init__(message)
        self.indices = tuple(indices)
        self.info = tuple(info)


class NvmathWarning(RuntimeWarning):
    """A problem nvmath recovered from, such as a failure while releasing a resource (cleanup never
    raises). A ``RuntimeWarning``, so filters for those keep working."""


def warn_at_caller(message: str, category: type[Warning] = UserWarning) -> None:
    """Warn (``category``) at the first frame outside the ``nvmath`` package: the user's line that called
    the public function, however many of nvmath's own layers (a compiled hit's entry, a plan cache, a
    planner) lie between it and the check that warns."""
    frame = sys._getframe(1)
    level = 2  # (1 is this function, 2 its caller)
    while frame.f_back is not None and _inside(frame.f_globals.get("__name__", "")):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)


def _inside(module: str) -> bool:
    return module == "nvmath" or module.startswith("nvmath.")


def warn_cleanup_failure(what: str, exc: BaseException, *, stacklevel: int = 3) -> None:
    """Warn (:class:`NvmathWarning`) that releasing ``what`` failed with ``exc``; silent while the
    interpreter shuts down (the driver reclaims everything, and modules may be gone)."""
    if sys.is_finalizing():
        return
    warnings.warn(f"{what} failed: {type(exc).__name__}: {exc}", NvmathWarning, stacklevel=stacklevel)
