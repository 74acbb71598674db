"""Epilogs of the distributed matmul (pure: no GPU, no communication).

:class:`MatmulEpilog` holds cuBLASMp's ``cublasMpMatmulEpilogue_t`` values (as in the header of the
``nvidia-cublasmp-cu13`` 0.10 wheel). :data:`EPILOG_SPECS` says per epilog which ``epilog_inputs``
it needs and which aux output it returns; :func:`epilog_layout` gives, for this rank, the shapes of
those inputs and outputs and the descriptor attributes to set.

Every epilog tensor is *this rank's part*, in cuBLASMp's column-major view of the local block of
D (``rows`` x ``cols`` = D's local shape; the result must be Fortran-ordered locally, which is what
the planner makes when ``c`` is not given):

* ``bias`` (input) and the bias gradients ``drelu_bgrad`` / ``dgelu_bgrad`` / ``bgrada`` (outputs):
  ``(rows,)`` -- the entries of the global bias along D's rows that this rank's block covers;
  ``bgradb``: ``(cols,)``.
* ``relu_aux``: a uint8 bit-mask of shape ``(round_up(ceil(rows / 8), 16), cols)`` in Fortran order
  (bit ``i % 8`` of byte ``i // 8`` of column j is row i; cuBLASMp counts its leading dimension in
  bits, a multiple of 128).
* ``gelu_aux``: the pre-activation, D's dtype, ``(round_up(rows, 8), cols)`` in Fortran order.

``ALLREDUCE`` (a communication epilog of cuBLASMp's GEMM+AllReduce) is accepted and needs nothing.
Complex operands take no epilog but ``DEFAULT`` (cuBLASLt, under cuBLASMp, has none for them).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

from nvmath.bindings import cublasMp as _cublasMp

__all__ = [
    "EPILOG_SPECS",
    "EpilogLayout",
    "EpilogSpec",
    "MatmulEpilog",
    "Tensor",
    "check_epilog_inputs",
    "epilog_layout",
    "epilog_spec",
]


MatmulEpilog = enum.IntEnum(  # type: ignore[misc]
    "MatmulEpilog", [(m.name, m.value) for m in _cublasMp.MatmulEpilogue], module=__name__
)
MatmulEpilog.__doc__ = """cuBLASMp's epilogues (``cublasMpMatmulEpilogue_t``): the members of the generated
binding's enum (one source of truth with the header), under nvmath-python's name."""


@dataclasses.dataclass(frozen=True)
class EpilogSpec:
    """What one epilog needs and makes.

    Attributes:
        epilog: the epilog.
        inputs: the ``epilog_inputs`` it needs.
        aux_output: the name of the aux output it returns, or None.
        aux: ``"relu"`` / ``"gelu"`` when it reads or writes an aux matrix.
        bias: ``"in"`` (reads a bias), ``"rows"`` / ``"cols"`` (writes a bias gradient along D's
            rows / columns), or None.
    """

    epilog: MatmulEpilog
    inputs: tuple[str, ...] = ()
    aux_output: str | None = None
    aux: str | None = None
    bias: str | None = None

    @property
    def is_default(self) -> bool:
        return self.epilog in (MatmulEpilog.DEFAULT, MatmulEpilog.ALLREDUCE)


E = MatmulEpilog
EPILOG_SPECS: dict[MatmulEpilog, EpilogSpec] = {
    s.epilog: s
    for s in (
        EpilogSpec(E.DEFAULT),
        EpilogSpec(E.ALLREDUCE),
        EpilogSpec(E.RELU),
        EpilogSpec(E.GELU),
        EpilogSpec(E.BIAS, ("bias",), bias="in"),
        EpilogSpec(E.RELU_BIAS, ("bias",), bias="in"),
        EpilogSpec(E.GELU_BIAS, ("bias",), bias="in"),
        EpilogSpec(E.RELU_AUX, (), "relu_aux", "relu"),
        EpilogSpec(E.RELU_AUX_BIAS, ("bias",), "relu_aux", "relu", "in"),
        EpilogSpec(E.GELU_AUX, (), "gelu_aux", "gelu"),
        EpilogSpec(E.GELU_AUX_BIAS, ("bias",), "gelu_aux", "gelu", "in"),
        EpilogSpec(E.DRELU, ("relu_aux",), None, "relu"),
        EpilogSpec(E.DRELU_BGRAD, ("relu_aux",), "drelu_bgrad", "relu", "rows"),
        EpilogSpec(E.DGELU, ("gelu_aux",), None, "gelu"),
        EpilogSpec(E.DGELU_BGRAD, ("gelu_aux",), "dgelu_bgrad", "gelu", "rows"),
        EpilogSpec(E.BGRADA, (), "bgrada", None, "rows"),
        EpilogSpec(E.BGRADB, (), "bgradb", None, "cols"),
    )
}
"""Every epilog's :class:`EpilogSpec`."""


def epilog_spec(epilog: Any) -> EpilogSpec:
    """The spec of ``epilog`` (a :class:`MatmulEpilog` or its int value; None is DEFAULT).

    Raises:
        TypeError: not an int. ValueError: not one of cuBLASMp's epilogs (the message lists them).
    """
    if epilog is None:
        return EPILOG_SPECS[E.DEFAULT]
    if isinstance(epilog, bool) or not isinstance(epilog, int):
        raise TypeError(f"epilog must be a MatmulEpilog; got {type(epilog).__name__}: {epilog!r}")
    try:
        return EPILOG_SPECS[E(int(epilog))]
    except ValueError:
        allowed = ", ".join(f"{e.name}={e.value}" for e in E)
        raise ValueError(f"epilog={epilog!r} is not a cuBLASMp epilog; allowed: {allowed}") from None


def _round_up(x: int, q: int) -> int:
    return -(-x // q) * q


@dataclasses.dataclass(frozen=True)
class Tensor:
    """Shape, element strides and dtype of one epilog tensor."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str


@dataclasses.dataclass(frozen=True)
class EpilogLayout:
    """This rank's epilog tensors and the descriptor attributes that describe them.

    Attributes:
        spec: the epilog.
        inputs: ``{name: Tensor}`` of the inputs it reads.
        outputs: ``{name: Tensor}`` of the outputs the planner allocates (returned in the aux dict).
        aux_ld: the aux matrix's leading dimension as cuBLASMp counts it (bits for ReLU), or None.
    """

    spec: EpilogSpec
    inputs: Mapping[str, Tensor]
    outputs: Mapping[str, Tensor]
    aux_ld: int | None

    @property
    def bias_name(self) -> str | None:
        """The tensor at ``BIAS_POINTER``: the bias input or the bias-gradient output."""
        if self.spec.bias == "in":
            return "bias"
        return self.spec.aux_output if self.spec.bias else None

    @property
    def aux_name(self) -> str | None:
        """The tensor at ``EPILOGUE_AUX_POINTER``."""
        if self.spec.aux is None:
            return None
        return f"{self.spec.aux}_aux"


def epilog_layout(epilog: Any, local_shape: tuple[int, int], dtype: str, *, is_complex: bool,
                  swapped: bool) -> EpilogLayout:  # fmt: skip
    """The epilog tensors of this rank for a D block of ``local_shape`` (rows, cols) and ``dtype``.

    Args:
        epilog: the epilog (see :func:`epilog_spec`).
        local_shape: D's local shape (user orientation).
        dtype: D's dtype (the GELU aux and bias take it).
        is_complex: complex operands (no epilog but DEFAULT).
        swapped: cuBLASMp computes D^T (the result is C-ordered locally), which epilogs do not allow.

    Raises:
        TypeError, ValueError: see :func:`epilog_spec`; an epilog with complex operands or a
            C-ordered result.
    """
    spec = epilog_spec(epilog)
    if not spec.is_default and spec.epilog != E.RELU and spec.epilog != E.GELU and swapped:
        raise ValueError(
            f"epilog {spec.epilog.name} needs the result in Fortran order locally (its bias and aux run "
            "along D's rows): give c in Fortran order, or no c"
        )
    if not spec.is_default and is_complex:
        raise ValueError(
            f"epilog {spec.epilog.name}: cuBLASMp has no epilog but DEFAULT for complex operands"
        )
    rows, cols = local_shape
    tensors: dict[str, Tensor] = {}
    aux_ld = None
    if spec.aux == "relu":
        nbytes = _round_up(-(-rows // 8), 16)
        tensors["relu_aux"], aux_ld = Tensor((nbytes, cols), (1, nbytes), "uint8"), nbytes * 8
    elif spec.aux == "gelu":
        ld = _round_up(rows, 8)
        tensors["gelu_aux"], aux_ld = Tensor((ld, cols), (1, ld), dtype), ld
    if spec.bias == "in":
        tensors["bias"] = Tensor((rows,), (1,), dtype)
    elif spec.bias:
        tensors[spec.aux_output] = Tensor((cols if spec.bias == "cols" else rows,), (1,), dtype)  # type: ignore[index]
    inputs = {n: t for n, t in tensors.items() if n in spec.inputs}
    outputs = {n: t for n, t in tensors.items() if n not in spec.inputs}
    return EpilogLayout(spec, inputs, outputs, aux_ld)


def check_epilog_inputs(layout: EpilogLayout, given: Mapping[str, Any]) -> None:
    """Check the names, shapes and dtypes of ``given`` (name -> TensorAdapter) against ``layout``.

    Raises:
        ValueError: a missing or unexpected input, or one of another shape or dtype (named, with
            what is expected).
    """
    need, got = set(layout.inputs), set(given)
    if need != got:
        raise ValueError(
            f"epilog {layout.spec.epilog.name} takes epilog_inputs {sorted(need) or 'none'}; got {sorted(got)}"
        )
    for name, want in layout.inputs.items():
        op = given[name]
        shape, strides = tuple(op.shape), tuple(op.strides)
        dense = all(s == w for s, w, n in zip(strides, want.strides, shape, strict=False) if n > 1)
        if shape != want.shape or op.dtype != want.dtype or len(strides) != len(want.strides) or not dense:
            raise ValueError(
                f"epilog input {name!r}: this rank's part must be {want.dtype} of shape {want.shape} "
                f"(Fortran order); got {op.dtype} of shape {shape}, strides {strides}"
            )
