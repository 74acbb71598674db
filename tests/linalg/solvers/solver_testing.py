"""Helpers of the dense-solver tests: execution spaces, random matrices, residual norms.

Every correctness test runs in each *space*: numpy and torch-CPU operands on the CPU (here), and --
marked ``gpu``, skipped without one -- numpy operands with ``execution="cuda"``, cupy and torch-CUDA
operands on the GPU. Matrices are random normal **without a diagonal boost** (nvmath-python's
DirectSolver was wrong exactly there); references are numpy/scipy in float64.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

DTYPES = ("float32", "float64", "complex64", "complex128")
EPS = {
    "float32": np.finfo(np.float32).eps,
    "complex64": np.finfo(np.float32).eps,
    "float64": np.finfo(np.float64).eps,
    "complex128": np.finfo(np.float64).eps,
}


@dataclasses.dataclass(frozen=True)
class Space:
    """Where operands live and where the solver runs."""

    name: str
    package: str  # "numpy", "torch", "cupy"
    device: str  # "cpu" or "cuda" (where the operands are)
    execution: Any  # the execution= argument to pass

    @property
    def gpu(self) -> bool:
        """Whether the solver runs on the GPU."""
        return self.execution == "cuda" or self.device == "cuda"

    def module(self) -> Any:
        """The operand package's module (skips when not installed)."""
        return pytest.importorskip(self.package)

    def put(self, array: np.ndarray) -> Any:
        """A tensor of this space holding ``array``."""
        array = np.ascontiguousarray(array)
        if self.package == "numpy":
            return array
        mod = self.module()
        if self.package == "torch":
            t = mod.from_numpy(array)
            return t.cuda() if self.device == "cuda" else t
        return mod.asarray(array)

    def get(self, tensor: Any) -> np.ndarray:
        """A numpy copy of a result (checking it is of this space's package and device)."""
        if self.package == "numpy":
            assert isinstance(tensor, np.ndarray), type(tensor)
            return tensor
        mod = self.module()
        if self.package == "torch":
            assert isinstance(tensor, mod.Tensor), type(tensor)
            assert tensor.device.type == self.device, tensor.device
            return tensor.detach().cpu().resolve_conj().numpy()
        assert isinstance(tensor, mod.ndarray), type(tensor)
        return mod.asnumpy(tensor)

    def kwargs(self, **extra: Any) -> dict[str, Any]:
        """The ``execution=`` keyword (plus ``extra``)."""
        return {"execution": self.execution, **extra}


SPACES = [
    pytest.param(Space("numpy-cpu", "numpy", "cpu", None), id="numpy-cpu"),
    pytest.param(Space("torch-cpu", "torch", "cpu", None), id="torch-cpu"),
    pytest.param(Space("numpy-cuda", "numpy", "cpu", "cuda"), id="numpy-cuda", marks=pytest.mark.gpu),
    pytest.param(Space("cupy-cuda", "cupy", "cuda", None), id="cupy-cuda", marks=pytest.mark.gpu),
    pytest.param(Space("torch-cuda", "torch", "cuda", None), id="torch-cuda", marks=pytest.mark.gpu),
]
CPU_SPACES = [p for p in SPACES if "cpu" in p.id and "cuda" not in p.id]
GPU_SPACES = [p for p in SPACES if "cuda" in p.id]


def random_matrix(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Standard normal entries (complex: both parts), no diagonal boost."""
    a = rng.standard_normal(shape)
    if dtype.startswith("complex"):
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def random_hpd(rng: np.random.Generator, batch: tuple[int, ...], n: int, dtype: str) -> np.ndarray:
    """Hermitian positive definite: ``G G^H + n I`` for a random ``G`` (well conditioned)."""
    g = random_matrix(rng, (*batch, n, n), dtype).astype(
        np.complex128 if dtype.startswith("complex") else np.float64
    )
    a = g @ np.conj(np.swapaxes(g, -1, -2)) + n * np.eye(n)
    return a.astype(dtype)


def random_hermitian(rng: np.random.Generator, batch: tuple[int, ...], n: int, dtype: str) -> np.ndarray:
    """A random Hermitian (indefinite) matrix."""
    g = random_matrix(rng, (*batch, n, n), dtype).astype(
        np.complex128 if dtype.startswith("complex") else np.float64
    )
    return ((g + np.conj(np.swapaxes(g, -1, -2))) / 2).astype(dtype)


def rel(x: np.ndarray, ref: np.ndarray) -> float:
    """``||x - ref|| / ||ref||`` in float64 (Frobenius over everything)."""
    x, ref = np.asarray(x, dtype=np.complex128), np.asarray(ref, dtype=np.complex128)
    return float(np.linalg.norm(x - ref) / max(np.linalg.norm(ref), 1e-300))


def backward_error(a: np.ndarray, x: np.ndarray, b: np.ndarray) -> float:
    """Normwise backward error of a solve, ``max ||a x - b|| / (||a|| ||x|| + ||b||)`` over the batch."""
    a, x, b = (np.asarray(v, dtype=np.complex128) for v in (a, x, b))
    if b.ndim == a.ndim - 1:
        x, b = x[..., None], b[..., None]
    r = np.linalg.norm(a @ x - b, axis=(-2, -1))
    scale = np.linalg.norm(a, axis=(-2, -1)) * np.linalg.norm(x, axis=(-2, -1)) + np.linalg.norm(
        b, axis=(-2, -1)
    )
    return float(np.max(r / scale))


def orthogonality(q: np.ndarray) -> float:
    """``max ||Q^H Q - I||_F`` over the batch (columns orthonormal)."""
    q = np.asarray(q, dtype=np.complex128)
    k = q.shape[-1]
    g = np.conj(np.swapaxes(q, -1, -2)) @ q
    return float(np.max(np.linalg.norm(g - np.eye(k), axis=(-2, -1))))


def tol(dtype: str, n: int, factor: float = 10.0) -> float:
    """A residual tolerance ``factor * n * eps`` for ``dtype``."""
    return factor * max(n, 1) * float(EPS[dtype])
