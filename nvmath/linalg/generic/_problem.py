"""One matmul problem of the planner: its operands, traits, and the moves between memory spaces.

A :class:`Problem` is what :class:`~nvmath.linalg.generic.Matmul` holds per product (one for tensor
operands, one per element of an explicit sequence). It

* checks the operands and computes the :class:`~nvmath.linalg.generic._traits.Traits` (pure);
* materialises, on every execution, the few operands BLAS cannot read as they are (a conjugated
  operand in a layout read without transpose, a conjugated symmetric matrix, an unusual layout):
  ``prep`` lists them, and :func:`materialize` copies them in the package of the operands;
* gives the pointers for the GPU (copying host operands to the device) and the numpy arrays for
  the CPU, allocates the result in the caller's package and brings it back to the caller's space.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import numpy as np

from nvmath._internal.tensors import TensorAdapter, is_dense, wrap
from nvmath._internal.tensors.copy import copy_into
from nvmath._internal.tensors.numpy_adapter import NumpyAdapter, host_empty
from nvmath.linalg._solvers._cpu import host_array, to_caller
from nvmath.linalg.generic._qualifiers import Qualifier
from nvmath.linalg.generic._traits import CPU_DTYPES, GPU_DTYPES, OperandInfo, Traits, problem_traits

__all__ = ["BROADCASTERS", "Problem", "broadcast_c", "materialize"]


def _torch_copy(tensor: Any, conjugate: bool, layout: str) -> Any:
    y = (tensor.conj() if conjugate else tensor).resolve_conj()
    if layout == "col" and y.ndim >= 2:
        return y.transpose(-1, -2).contiguous().transpose(-1, -2)
    return y.contiguous().clone() if y is tensor else y.contiguous()


def _array_copy(xp: Any, tensor: Any, conjugate: bool, layout: str) -> Any:
    y = xp.conj(tensor) if conjugate else tensor
    if layout == "col" and y.ndim >= 2:
        return xp.ascontiguousarray(y.swapaxes(-1, -2)).swapaxes(-1, -2)
    return xp.array(y, order="C", copy=True)


MATERIALIZERS: dict[str, Any] = {
    "torch": _torch_copy,
    "numpy": lambda t, conj, layout: _array_copy(np, t, conj, layout),
    "cupy": lambda t, conj, layout: _array_copy(sys.modules["cupy"], t, conj, layout),
}
"""Package -> ``copy(tensor, conjugate, layout)`` making a BLAS-readable copy (see :func:`materialize`)."""


BROADCASTERS: dict[str, Any] = {
    "torch": lambda t, shape: t.expand(shape),
    "numpy": np.broadcast_to,
    "cupy": lambda t, shape: sys.modules["cupy"].broadcast_to(t, shape),
}
"""Package -> ``broadcast(tensor, shape)``: a read-only view of ``c`` with the result's batch shape."""


def broadcast_c(op: TensorAdapter, shape: tuple[int, ...]) -> TensorAdapter:
    """A view of ``c`` broadcast over the result's batch dimensions (stride 0 along them)."""
    broadcast = BROADCASTERS.get(op.package)
    if broadcast is None:
        raise ValueError(f"c cannot be broadcast over the batch dimensions for {op.package} operands")
    return wrap(broadcast(op.tensor, shape), "operand 'c'")


def materialize(tensor: Any, package: str, conjugate: bool, layout: str) -> Any:
    """A copy of ``tensor`` (its logical values, conjugated if asked) in ``layout`` ("row" or "col")."""
    copy = MATERIALIZERS.get(package)
    if copy is None:
        raise ValueError(
            f"{package} operands in this layout / conjugation need a copy that nvmath cannot make for "
            "that package; pass a row- or column-major operand without conjugation"
        )
    return copy(tensor, conjugate, layout)


def _info(op: TensorAdapter, q: Qualifier) -> OperandInfo:
    """The traits' view of an operand: read conjugated when the qualifier and torch's lazy bit differ."""
    return OperandInfo(tuple(op.shape), tuple(op.strides), op.dtype, q.conjugate != op.is_conjugate)


class Problem:
    """One product ``alpha * op(a) @ op(b) + beta * c`` (see the module docstring).

    Args:
        ops: the wrapped operands ``a``, ``b`` and maybe ``c`` (one package, one device).
        quals: the parsed qualifiers of ``a``, ``b``, ``c``.
        cpu: run on the CPU (numpy / scipy) instead of cuBLAS.
        inplace: write into ``c``.
    """

    def __init__(
        self,
        ops: dict[str, TensorAdapter],
        quals: tuple[Qualifier, Qualifier, Qualifier],
        cpu: bool,
        inplace: bool,
    ):
        self.quals = quals
        self.cpu = cpu
        self.inplace = inplace
        self.has_c = "c" in ops
        self.package = ops["a"].package
        self.narrow: str | None = None  # float16 / bfloat16 on the CPU: computed in float32, rounded once
        if cpu and any(op.dtype in NARROW_DTYPES for op in ops.values()):
            # validate the caller's operands as they are (one dtype, shapes), then compute in float32
            problem_traits(*(_info(ops[n], quals[_INDEX[n]]) if n in ops else None for n in "abc"),
                           quals, inplace=inplace, dtypes=GPU_DTYPES)  # fmt: skip
            self.narrow = ops["a"].dtype
        blas = self._blas_side(ops)
        infos = {n: _info(op, quals[_INDEX[n]]) for n, op in blas.items()}
        dtypes = CPU_DTYPES if cpu else GPU_DTYPES
        traits = problem_traits(infos["a"], infos["b"], infos.get("c"), quals, inplace=inplace, dtypes=dtypes)
        self.prep: tuple[tuple[str, bool, str], ...] = ()
        if traits.copies:
            self.prep = tuple(
                (name, quals[_INDEX[name]].conjugate, traits.order) for name, _ in traits.copies
            )
            for name, conjugate, layout in self.prep:
                op = self._materialized(blas[name], name, conjugate, layout)
                infos[name] = OperandInfo(tuple(op.shape), tuple(op.strides), op.dtype, False)
            traits = problem_traits(
                infos["a"], infos["b"], infos.get("c"), quals, inplace=inplace, dtypes=dtypes
            )
            if traits.copies:  # pragma: no cover - materialised operands are always readable
                raise ValueError(f"operands {', '.join(n for n, _ in traits.copies)} cannot be read by BLAS")
        self.traits: Traits = traits
        # c broadcast over the batch dimensions: viewed with the result's shape at every execution
        self.c_broadcast = self.has_c and tuple(ops["c"].shape) != traits.result_shape
        self.kernel_quals = tuple(
            dataclasses.replace(q, conjugate=False) if any(p[0] == n for p in self.prep) else q
            for n, q in zip(("a", "b"), quals[:2])
        )
        self.ops = ops

    # ------------------------------------------------------------------ operands
    def _blas_side(self, ops: dict[str, TensorAdapter]) -> dict[str, TensorAdapter]:
        """The operands as the executing side sees them: numpy arrays for the CPU; for the GPU, host
        operands that are not dense are made dense first (the copy to the device would make them dense
        anyway, and the traits must describe the layout BLAS reads)."""
        if not self.cpu:
            if all(op.device != "cpu" or is_dense(tuple(op.shape), tuple(op.strides)) for op in ops.values()):
                return ops
            return {
                n: op if op.device != "cpu" or is_dense(tuple(op.shape), tuple(op.strides))
                else self._materialized(op, n, False, "row")
                for n, op in ops.items()
            }  # fmt: skip
        if self.narrow:
            return {n: NumpyAdapter(_host_float32(op)) for n, op in ops.items()}
        return {n: op if type(op) is NumpyAdapter else NumpyAdapter(host_array(op)) for n, op in ops.items()}

    def _materialized(self, op: TensorAdapter, name: str, conjugate: bool, layout: str) -> TensorAdapter:
        return wrap(materialize(op.tensor, op.package, conjugate, layout), f"operand '{name}'")

    def prepared(self) -> dict[str, TensorAdapter]:
        """The operands as BLAS reads them (materialised copies where ``prep`` says)."""
        ops = self.ops
        if self.c_broadcast:
            ops = {**ops, "c": broadcast_c(ops["c"], self.traits.result_shape)}
        ops = self._blas_side(ops)
        if self.prep:
            ops = dict(ops)
            for name, conjugate, layout in self.prep:
                ops[name] = self._materialized(ops[name], name, conjugate, layout)
        return ops

    # ------------------------------------------------------------------ CPU
    def run_cpu(self, alpha: Any, beta: Any, num_threads: int | None) -> Any:
        """Compute on the CPU; return the result in the caller's package."""
        from nvmath.linalg.generic._cpu import run_cpu

        t = self.traits
        ops = self.prepared()
        c = ops["c"].tensor if self.has_c else None
        out = c if self.inplace else host_empty(t.result_shape, t.result_strides, t.dtype)
        result = run_cpu(
            t, ops["a"].tensor, ops["b"].tensor, self.kernel_quals, alpha, beta, c, out, num_threads
        )
        if self.narrow:
            return self._rounded(result)
        if self.inplace:
            return self.ops["c"].tensor
        return result if self.package == "numpy" else to_caller(result, self.ops["a"])

    def _rounded(self, result: np.ndarray) -> Any:
        """A float32 CPU result rounded once to the operands' float16 / bfloat16, in their package
        (written into ``c`` when in place)."""
        user = self.ops["c"] if self.inplace else self.ops["a"]
        if self.package == "torch":
            rounded = sys.modules["torch"].from_numpy(np.ascontiguousarray(result)).to(user.tensor.dtype)
        else:
            rounded = np.asarray(result).astype(np.asarray(user.tensor).dtype)
        if not self.inplace:
            return rounded if self.package in ("numpy", "torch") else to_caller(rounded, user)
        if self.package == "torch":
            user.tensor.copy_(rounded)
        else:
            np.copyto(user.tensor, rounded)
        return user.tensor

    # ------------------------------------------------------------------ GPU
    def stage(self, device_id: int, stream: Any) -> tuple[dict[str, int], TensorAdapter, list[Any]]:
        """Device pointers of ``a``, ``b`` and the result ``d`` (holding ``c``), the result, and what to keep.

        Host operands are copied to ``device_id`` on ``stream``; the result is new (in the operands'
        package, or a device array for numpy) unless ``inplace``.
        """
        t = self.traits
        ops = self.prepared()
        a, b = ops["a"], ops["b"]
        if a.device == "cpu":
            a = a.to(device_id, stream)
        if b.device == "cpu":
            b = b.to(device_id, stream)
        if self.inplace:
            d = ops["c"]
            if d.device == "cpu":
                d = d.to(device_id, stream)
        else:
            d = a.empty(t.result_shape, t.dtype, strides=t.result_strides, device_id=device_id, stream=stream)
            if self.has_c:
                _copy(d, ops["c"], stream)
        return {"a": a.data_ptr, "b": b.data_ptr, "d": d.data_ptr}, d, [a, b, d]

    def deliver(self, d: TensorAdapter, stream: Any) -> Any:
        """The result for the caller: ``d`` itself, or copied back to host memory (blocking)."""
        user = self.ops["c"] if self.inplace else self.ops["a"]
        if user.device != "cpu":
            return d.tensor if not self.inplace else user.tensor
        if self.inplace:
            _copy(user, d, stream)
            return user.tensor
        t = self.traits
        host = user.empty(t.result_shape, t.dtype, strides=t.result_strides, device_id="cpu")
        _copy(host, d, stream)
        return host.tensor


_INDEX = {"a": 0, "b": 1, "c": 2}

#: dtypes the CPU has no BLAS for: their products are computed in float32 (accumulated in float32, as
#: cuBLAS does on the GPU) and rounded once to the operands' dtype.
NARROW_DTYPES = ("float16", "bfloat16")


def _host_float32(op: TensorAdapter) -> np.ndarray:
    """A float32 numpy copy of a float16 / bfloat16 host operand (numpy has no bfloat16 BLAS)."""
    if op.package == "torch":
        return op.tensor.detach().resolve_conj().float().numpy()
    return host_array(op).astype(np.float32)


def _copy(dst: TensorAdapter, src: TensorAdapter, stream: Any) -> None:
    """``dst[...] = src`` across packages and memory spaces (an adapter's own ``copy_`` where it has one)."""
    own = getattr(dst, "copy_", None)
    if own is not None:
        own(src, stream)
    else:
        copy_into(dst, src, stream)
