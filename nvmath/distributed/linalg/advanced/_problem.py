"""Pure checks of the distributed matmul's inputs (no GPU, no communication): local layouts, global
shapes from every rank's local shapes, types, and the cuBLASMp call's orientation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nvmath.distributed.distribution import BlockCyclic, Slab

from ._traits import MatrixDescriptorArgs, block_args, expected_local_shape, operation

__all__ = [
    "COMPUTE_TYPES",
    "MatmulCall",
    "agreed_order",
    "describe_call",
    "global_matrix_shape",
    "local_order",
    "local_orders",
    "matmul_call",
    "parse_qualifiers",
    "scalar",
]

COMPUTE_TYPES = {
    "float16": "COMPUTE_32F",
    "bfloat16": "COMPUTE_32F",
    "float32": "COMPUTE_32F",
    "float64": "COMPUTE_64F",
    "complex64": "COMPUTE_32F",
    "complex128": "COMPUTE_64F",
    "float8_e4m3fn": "COMPUTE_32F",
    "float8_e5m2": "COMPUTE_32F",
}
"""The default compute type of each operand type (cuBLAS's)."""

_SCALARS = {
    "float16": np.float32,
    "bfloat16": np.float32,
    "float32": np.float32,
    "float64": np.float64,
    "complex64": np.complex64,
    "complex128": np.complex128,
    "float8_e4m3fn": np.float32,
    "float8_e5m2": np.float32,
}


def local_order(shape: Sequence[int], strides: Sequence[int]) -> str | None:
    """``"F"`` or ``"C"`` when the local matrix is dense along its fast axis in that order, else None
    (an empty or single-row/column matrix is ``"F"``)."""
    rows, cols = shape
    if (
        rows == 0
        or cols == 0
        or ((strides[0] == 1 or rows <= 1) and (strides[1] >= max(rows, 1) or cols <= 1))
    ):
        return "F"
    if (strides[1] == 1 or cols <= 1) and (strides[0] >= max(cols, 1) or rows <= 1):
        return "C"
    return None


def local_orders(shape: Sequence[int], strides: Sequence[int]) -> tuple[str, ...]:
    """Every order (``"F"``, ``"C"``) the local matrix can be described in: one-row, one-column and
    empty blocks fit both."""
    rows, cols = shape
    empty = rows == 0 or cols == 0
    fits_f = (strides[0] == 1 or rows <= 1) and (strides[1] >= max(rows, 1) or cols <= 1)
    fits_c = (strides[1] == 1 or cols <= 1) and (strides[0] >= max(cols, 1) or rows <= 1)
    return tuple(o for o, ok in (("F", empty or fits_f), ("C", empty or fits_c)) if ok)


def agreed_order(name: str, orders: Mapping[int, Sequence[str]]) -> str:
    """The one order every rank describes ``name`` in (Fortran when all allow it).

    Raises:
        ValueError: the ranks' local blocks have no order in common (naming the ranks of each).
    """
    common = set.intersection(*(set(o) for o in orders.values()))
    if not common:
        f = sorted(r for r, o in orders.items() if "F" in o)
        c = sorted(r for r, o in orders.items() if "F" not in o)
        raise ValueError(
            f"{name}: the local blocks of rank(s) {f} are in Fortran order and those of rank(s) {c} in C order; "
            "cuBLASMp describes a matrix in one orientation on every rank: use one order"
        )
    return "F" if "F" in common else "C"


def global_matrix_shape(
    name: str, distribution: Any, local_shapes: Mapping[int, Sequence[int]], nranks: int
) -> tuple[int, int]:
    """The global shape of a distributed matrix from every rank's local shape (the same on every
    rank), checking that each rank holds what the distribution gives it.

    Raises:
        ValueError: a rank's local shape is not its part (the message names the ranks).
        TypeError: a distribution of another kind.
    """
    shapes = {r: tuple(int(n) for n in s) for r, s in local_shapes.items()}
    if any(len(s) != 2 for s in shapes.values()):
        raise ValueError(f"{name}: cuBLASMp multiplies matrices (2-D local tensors, no batch); got {shapes}")
    if isinstance(distribution, Slab) and distribution.partition_dim in (0, 1):
        axis = distribution.partition_dim
        total = sum(s[axis] for s in shapes.values())
        guess = [total, total]
        guess[1 - axis] = shapes[0][1 - axis]
    elif isinstance(distribution, BlockCyclic):
        grid = distribution.process_grid
        rows = sum(shapes[grid.rank((r, 0))][0] for r in range(grid.shape[0]))
        cols = sum(shapes[grid.rank((0, c))][1] for c in range(grid.shape[1]))
        guess = [rows, cols]
    else:
        raise TypeError(
            f"{name}: distribution must be a BlockCyclic, BlockNonCyclic, Slab.X or Slab.Y; got "
            f"{distribution!r}"
        )
    shape = (guess[0], guess[1])
    blocks, first, grid_args = block_args(shape, distribution, nranks)
    wrong = {r: s for r, s in shapes.items() if s != expected_local_shape(shape, blocks, first, grid_args, r)}
    if wrong:
        expected = {r: expected_local_shape(shape, blocks, first, grid_args, r) for r in wrong}
        raise ValueError(
            f"{name}: the local shapes of rank(s) {sorted(wrong)} ({wrong}) are not their parts of a {shape} "
            f"matrix distributed as {distribution!r} (expected {expected})"
        )
    return shape


def parse_qualifiers(qualifiers: Any) -> tuple[tuple[bool, bool], tuple[bool, bool]]:
    """``((a transposed, a conjugated), (b transposed, b conjugated))`` from a numpy structured array
    with fields ``is_transpose`` and/or ``is_conjugate`` (one entry per a, b[, c]); None: no qualifiers.

    Raises:
        TypeError, ValueError: another kind of value, or a qualified ``c``.
    """
    if qualifiers is None:
        return (False, False), (False, False)
    if not isinstance(qualifiers, np.ndarray) or qualifiers.dtype.names is None or qualifiers.ndim != 1:
        raise TypeError(
            "qualifiers must be a 1-D numpy structured array with fields is_transpose / is_conjugate"
        )
    names = set(qualifiers.dtype.names)
    if not names & {"is_transpose", "is_conjugate"} or len(qualifiers) not in (2, 3):
        raise ValueError(
            f"qualifiers {qualifiers!r}: one entry for a, b (and c), fields is_transpose / is_conjugate"
        )

    def flags(i: int) -> tuple[bool, bool]:
        return tuple(
            bool(qualifiers[i][f]) if f in names else False for f in ("is_transpose", "is_conjugate")
        )  # type: ignore[return-value]

    if len(qualifiers) == 3 and any(flags(2)):
        raise ValueError("qualifiers: c cannot be transposed or conjugated (cuBLASMp has no operation on c)")
    return flags(0), flags(1)


def scalar(value: Any, dtype: str, name: str) -> np.ndarray:
    """``value`` as a one-element host array of the scale type of ``dtype``."""
    kind = _SCALARS[dtype]
    try:
        if not np.iscomplexobj(kind(0)) and np.iscomplexobj(value):
            raise TypeError
        return np.array([value], dtype=kind)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name}={value!r}: expected a {np.dtype(kind).name} scalar for {dtype} operands"
        ) from None


@dataclass(frozen=True)
class MatmulCall:
    """The cuBLASMp call: which operand goes first, its ops, and ``(m, n, k)`` as cuBLASMp sees them."""

    swap: bool  # True: D^T = op(B)^T op(A)^T (the result is C-ordered)
    transa: str
    transb: str
    m: int
    n: int
    k: int


_FLIP = {"N": "T", "T": "N"}


def matmul_call(
    a: MatrixDescriptorArgs,
    b: MatrixDescriptorArgs,
    d: MatrixDescriptorArgs,
    qa: tuple[bool, bool],
    qb: tuple[bool, bool],
    is_complex: bool,
) -> MatmulCall:
    """The cuBLASMp call computing the user's ``op(a) @ op(b)`` into ``d``'s layout.

    Raises:
        ValueError: the shapes do not chain, or a conjugated operand would need a conjugate without a
            transpose (a C-ordered result with a conjugate-transposed operand).
    """
    opa, opb = operation(a.transposed, *qa, is_complex), operation(b.transposed, *qb, is_complex)
    m, k = (a.n, a.m) if opa != "N" else (a.m, a.n)
    k2, n = (b.n, b.m) if opb != "N" else (b.m, b.n)
    user = (n, m) if d.transposed else (m, n)
    if k != k2 or (d.m, d.n) != user:
        raise ValueError(
            f"the matrices do not chain: op(a) is {(m, k)}, op(b) is {(k2, n)}, the result "
            f"{(d.n, d.m) if d.transposed else (d.m, d.n)}"
        )
    if not d.transposed:
        return MatmulCall(False, opa, opb, m, n, k)
    if "C" in (opa, opb):
        raise ValueError(
            "a C-ordered result with a conjugated operand cannot be computed by cuBLASMp (it would need a "
            "conjugate without a transpose): give c (or the result) in Fortran order"
        )
    return MatmulCall(True, _FLIP[opb], _FLIP[opa], n, m, k)


def describe_call(call: MatmulCall, compute: int, algo: int | None, ngrids: int, types: Mapping[str, str],
                  descs: Mapping[str, MatrixDescriptorArgs], c: str, attributes: Sequence[tuple]) -> str:  # fmt: skip
    """One line saying everything a cuBLASMp matmul call is given (for the DEBUG log): the call, the
    compute type and algorithm, the grids, each matrix's type and descriptor, what C is (``"c"``,
    ``"d"``: D in place, or a scratch buffer) and the descriptor attributes (pointers in hex)."""
    shown = [(a[0], hex(a[1]) if a[0].endswith("POINTER") else a[1]) for a in attributes]
    matrices = "; ".join(f"{n}={types[n]} {descs[n]}" for n in ("a", "b", "d"))
    return (
        f"cuBLASMp matmul: {call} compute={compute} algo={algo}; {ngrids} grid(s); {matrices}; C is {c}; "
        f"descriptor attributes {shown}"
    )
