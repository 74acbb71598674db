"""Epilogs of the cuBLASLt matmul: one table row per epilog, input validation, aux-output specs.

:data:`EPILOG_SPECS` says, per :class:`~._options.MatmulEpilog`, which ``epilog_inputs`` are needed
(``bias``, ``relu_aux``, ``gelu_aux``), which aux outputs are returned (``relu_aux``, ``gelu_aux``,
``drelu_bgrad``, ``dgelu_bgrad``, ``bgrada``, ``bgradb``), whether D must be column-major (in
cuBLASLt's orientation) and the first cuBLASLt version with it. :func:`epilog_traits` validates the
inputs of one problem and returns the matmul-descriptor attributes to set, named as the members of
the bindings' ``cublasLt.MatmulDescAttribute`` (``cublasLtMatmulDescAttributes_t`` without the
``CUBLASLT_MATMUL_DESC_`` prefix).

Aux layouts (column-major, cuBLASLt orientation, M rows and N columns of D):

* ``relu_aux``: uint8 bitmask of shape ``(*batch, round_up(ceil(M / 8), 16), N)``; bit ``i % 8``
  (little-endian) of byte ``i // 8`` of column j is row i; cuBLASLt counts its leading dimension and
  batch stride in bits (multiples of 128).
* ``gelu_aux``: shape ``(*batch, round_up(M, 8), N)``, D's dtype (C's when D is FP8) or
  ``preferences.aux_type``; leading dimension and batch stride multiples of 8. An FP8 ``aux_type``
  is the library's work (:mod:`._aux_quantize`): cuBLASLt writes the aux in its default wide type
  into an internal output (:class:`AuxQuantization`), which a kernel quantizes into ``gelu_aux``.
* bias gradients: ``(M,)`` (``(N,)`` for ``bgradb``), or ``(*batch, M, 1)`` when batched.
* a backward epilog's aux input is the forward pass's aux: batched like the problem, or one matrix
  (unbatched, or batch strides 0) for every batch entry, which the planner copies into a batched
  buffer before each launch (:class:`BroadcastInput`; cuBLASLt does not honour an aux batch stride
  of 0).

Beyond nvmath-python: a bias along N (shape ``(N,)`` when ``N != M``, ``(1, N)`` or
``(*batch, 1, N)`` -- the row vector of ``torch.nn.Linear``) is fused by computing the transposed
product ``D^T = B^T A^T``, whose rows run along N (``transpose_problem=True``); the result is then
row-major and any aux output is that of ``D^T`` (shape ``(*batch, round_up(ceil(N/8),16), M)`` for
ReLU), i.e. what ``matmul(b.mT, a.mT, ...)`` would produce. A 1-D bias of length ``M == N`` is a bias
along M, as in nvmath-python.

Measured on H200 with cuBLASLt 13.1 (and encoded here): every epilog but DEFAULT is NOT_SUPPORTED for
complex dtypes; a bias dtype other than D's is INVALID_VALUE for regular GEMMs (FP8 GEMMs follow
their own table, :func:`._typemaps.bias_dtypes`); BGRADA needs ``transa = transb = N`` and BGRADB
``transa = transb = T``. The GPU runs (test ids read as ``[epilog-b_order-a_order]``) show cuBLASLt
running the other operand as ``ORDER_ROW`` with that op, but refusing (NOT_SUPPORTED) the reduced
operand (``a`` for BGRADA, ``b`` for BGRADB) as ``ORDER_ROW``: a reduced operand in the other memory
order is read from a planner-owned dense copy in the order that gives the op (``a`` column-major,
``b`` row-major), refreshed on every execute, so the caller never reorders. DRELU/DGELU work with
K = 1 (nvmath-python rejects K = 1; we do not).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from nvmath._internal import dtypes as _dt
from nvmath.bindings.cublasLt import cuBLASLtError
from nvmath.linalg.advanced._layout import (
    BatchTraits,
    Op,
    OperandSpec,
    check_operand_spec,
    dense_batch_strides,
    tile_stride,
)
from nvmath.linalg.advanced._options import MatmulEpilog as E
from nvmath.linalg.advanced._options import MatmulEpilogPreferences
from nvmath.linalg.advanced._typemaps import TypeTraits, bias_dtypes, is_narrow

__all__ = [
    "AUX_QUANTIZATION_SCALE",
    "EPILOG_SPECS",
    "AuxOutputSpec",
    "EpilogNotSupported",
    "AuxQuantization",
    "BroadcastInput",
    "EpilogSpec",
    "EpilogTraits",
    "epilog_spec",
    "epilog_traits",
    "gelu_aux_rows",
    "relu_aux_rows",
]

AUX_QUANTIZATION_SCALE = "aux_quantization_scale"
"""The epilog input holding the scale of an FP8 GELU aux output."""


@dataclasses.dataclass(frozen=True)
class EpilogSpec:
    """What one epilog needs and produces.

    Attributes:
        epilog: the epilog.
        inputs: required ``epilog_inputs`` names.
        aux_output: the aux output's name, or ``None``.
        bias: ``"in"`` (a bias input), ``"out"`` (a bias gradient output) or ``None``.
        aux: ``"relu"``/``"gelu"`` aux matrix, or ``None``; ``aux_is_input`` says its direction.
        forces_col: D must be column-major in cuBLASLt's orientation.
        required_ops: the ops cuBLASLt accepts on A and B with this epilog (``None``: any); measured
            on H200 / cuBLASLt 13.1: BGRADA needs ``transa = transb = N``, BGRADB ``transa = transb = T``.
        staged_operand: the reduced operand (``"a"`` for BGRADA, ``"b"`` for BGRADB), which cuBLASLt
            does not run as ``ORDER_ROW``: in the other memory order it is read from a dense copy.
        min_version: the first cuBLASLt version with it, ``(major, minor, patch)``.
    """

    epilog: E
    inputs: tuple[str, ...] = ()
    aux_output: str | None = None
    bias: str | None = None
    aux: str | None = None
    aux_is_input: bool = False
    forces_col: bool = True
    required_ops: tuple[Op | None, Op | None] = (None, None)
    staged_operand: str | None = None
    min_version: tuple[int, int, int] = (11, 5, 1)


def _spec(epilog: E, **kw: Any) -> tuple[E, EpilogSpec]:
    return epilog, EpilogSpec(epilog, **kw)


_BWD = (11, 11, 3)
EPILOG_SPECS: dict[E, EpilogSpec] = dict(
    [
        _spec(E.DEFAULT, forces_col=False, min_version=(11, 0, 0)),
        _spec(E.RELU, forces_col=False, min_version=(11, 0, 0)),
        _spec(E.GELU, forces_col=False),
        _spec(E.BIAS, inputs=("bias",), bias="in"),
        _spec(E.RELU_BIAS, inputs=("bias",), bias="in"),
        _spec(E.GELU_BIAS, inputs=("bias",), bias="in"),
        _spec(E.RELU_AUX, aux_output="relu_aux", aux="relu"),
        _spec(E.RELU_AUX_BIAS, inputs=("bias",), aux_output="relu_aux", bias="in", aux="relu"),
        _spec(E.GELU_AUX, aux_output="gelu_aux", aux="gelu"),
        _spec(E.GELU_AUX_BIAS, inputs=("bias",), aux_output="gelu_aux", bias="in", aux="gelu"),
        _spec(E.DRELU, inputs=("relu_aux",), aux="relu", aux_is_input=True, min_version=_BWD),
        _spec(E.DRELU_BGRAD, inputs=("relu_aux",), aux_output="drelu_bgrad", bias="out", aux="relu",
              aux_is_input=True, min_version=_BWD),
        _spec(E.DGELU, inputs=("gelu_aux",), aux="gelu", aux_is_input=True, min_version=_BWD),
        _spec(E.DGELU_BGRAD, inputs=("gelu_aux",), aux_output="dgelu_bgrad", bias="out", aux="gelu",
              aux_is_input=True, min_version=_BWD),
        _spec(E.BGRADA, aux_output="bgrada", bias="out", required_ops=(Op.N, Op.N), staged_operand="a",
              min_version=_BWD),
        _spec(E.BGRADB, aux_output="bgradb", bias="out", required_ops=(Op.T, Op.T), staged_operand="b",
              min_version=_BWD),
    ]
)  # fmt: skip
"""Every epilog's :class:`EpilogSpec`."""

BATCHED_AUX_MIN_VERSION = (11, 7, 3)
"""Batched ``*_AUX`` epilogs need cuBLASLt 11.7.3 or newer."""


def _round_up(x: int, q: int) -> int:
    return -(-x // q) * q


def relu_aux_rows(m: int) -> int:
    """Rows (bytes) of the ReLU bitmask for ``m`` rows of D: ``round_up(ceil(m / 8), 16)``."""
    return _round_up(-(-m // 8), 16)


def gelu_aux_rows(m: int) -> int:
    """Rows of the GELU aux matrix for ``m`` rows of D: ``round_up(m, 8)``."""
    return _round_up(m, 8)


def epilog_spec(epilog: Any) -> EpilogSpec:
    """Return the spec of ``epilog`` (an int or :class:`MatmulEpilog`; ``None`` means DEFAULT).

    Raises:
        TypeError: not an int. ValueError: not an epilog value (the message lists them).
    """
    if epilog is None:
        return EPILOG_SPECS[E.DEFAULT]
    if isinstance(epilog, bool) or not isinstance(epilog, int):
        raise TypeError(
            f"epilog must be a MatmulEpilog (or its int value); got {type(epilog).__name__}: {epilog!r}"
        )
    try:
        return EPILOG_SPECS[E(int(epilog))]
    except ValueError:
        allowed = ", ".join(f"{e.name}={e.value}" for e in E)
        raise ValueError(f"epilog={epilog!r} is not a MatmulEpilog; allowed: {allowed}") from None


@dataclasses.dataclass(frozen=True)
class AuxOutputSpec:
    """A tensor the planner allocates and returns in the aux dict (shape/strides in elements)."""

    name: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str


@dataclasses.dataclass(frozen=True)
class BroadcastInput:
    """An aux input of one matrix read by every batch entry of a batched backward epilog.

    cuBLASLt does not honour an ``EPILOGUE_AUX_BATCH_STRIDE`` of 0 for an aux *input*: on the H200
    (cuBLASLt 13.1) a batched DRELU read past the one bit-mask given (relative error 0.16, no error
    status), and cuBLASLt documents no broadcast meaning for it (unlike ``BIAS_BATCH_STRIDE``). So the
    planner copies the matrix into every slot of a batched buffer (:mod:`._aux_broadcast`) before each
    launch, and the descriptor describes that buffer. (GELU's wide aux did give right numbers with a
    0 stride in the one FP8 GPU test; it is materialised too, as nothing documents it.)

    Attributes:
        name: the epilog input (``"relu_aux"`` / ``"gelu_aux"``).
        count: the batch count (slots of the buffer).
        block: bytes between slots (the batch stride: the matrix's leading dimension times N).
        span: bytes of the one matrix the user gave (what is copied into slot 0).
    """

    name: str
    count: int
    block: int
    span: int


@dataclasses.dataclass(frozen=True)
class AuxQuantization:
    """An FP8 GELU aux the library quantizes from cuBLASLt's wide aux (see :mod:`._aux_quantize`).

    Attributes:
        source: the internal aux output cuBLASLt writes (``EPILOGUE_AUX_POINTER``), never returned.
        target: the FP8 aux output returned to the caller (``"gelu_aux"``).
        amax: the float32 ``(1,)`` amax output (``"gelu_aux_amax"``), or ``None``.
        scale: the epilog input holding the scale (``"aux_quantization_scale"``).
        rows: real rows per column (M of D in cuBLASLt's orientation).
        ld: rows per column (``round_up(rows, 8)``).
        total: elements of the aux, batch included.
        source_dtype, target_dtype: the wide and the FP8 dtype.
    """

    source: str
    target: str
    amax: str | None
    scale: str
    rows: int
    ld: int
    total: int
    source_dtype: str
    target_dtype: str


@dataclasses.dataclass(frozen=True)
class EpilogTraits:
    """The validated epilog of one problem.

    Attributes:
        epilog: the epilog (``EPILOGUE`` attribute value).
        transpose_problem: compute ``D^T = B^T A^T`` (a bias along N).
        forces_col: D must be column-major in cuBLASLt's orientation.
        attributes: ``(attribute name, int value)`` descriptor settings (``EPILOGUE``,
            ``BIAS_DATA_TYPE``, ``BIAS_BATCH_STRIDE``, ``EPILOGUE_AUX_LD``, ...).
        pointer_attributes: ``(attribute name, tensor name)``: set the attribute to the device
            pointer of that epilog input or aux output (``BIAS_POINTER`` -> ``"bias"``, ...).
        inputs: the validated ``epilog_inputs`` names.
        aux_outputs: the tensors to allocate, in order; all are returned but the internal wide aux of
            an FP8 aux (``aux_quantization.source``).
        required_ops: ops cuBLASLt needs on A / B with this epilog (``None``: any).
        staged_operand: the operand read from a dense copy when its memory order does not give its
            required op (see :func:`._traits.get_problem`).
        aux_quantization: the library's quantization of an FP8 GELU aux, or ``None``.
        broadcast_input: an aux input shared by every batch entry, which the planner materialises
            into a batched buffer, or ``None`` (see :class:`BroadcastInput`).
    """

    epilog: E
    transpose_problem: bool
    forces_col: bool
    attributes: tuple[tuple[str, int], ...]
    pointer_attributes: tuple[tuple[str, str], ...]
    inputs: tuple[str, ...]
    aux_outputs: tuple[AuxOutputSpec, ...]
    required_ops: tuple[Op | None, Op | None] = (None, None)
    staged_operand: str | None = None
    aux_quantization: AuxQuantization | None = None
    broadcast_input: BroadcastInput | None = None

    @property
    def aux_names(self) -> tuple[str, ...]:
        """Names of the aux outputs the caller gets (not the internal wide aux of an FP8 aux)."""
        q = self.aux_quantization
        return tuple(a.name for a in self.aux_outputs if q is None or a.name != q.source)

    @property
    def problem_options(self) -> dict[str, Any]:
        """Keyword arguments of :func:`._traits.get_problem` that this epilog decides."""
        return {
            "forces_col": self.forces_col,
            "transpose_problem": self.transpose_problem,
            "required_ops": self.required_ops,
            "staged_operand": self.staged_operand,
        }


@dataclasses.dataclass(frozen=True)
class _Problem:
    """The extents an epilog sees (cuBLASLt orientation once the orientation is known)."""

    m: int
    n: int
    k: int
    batch: BatchTraits


def _check_names(spec: EpilogSpec, given: Mapping[str, Any], extra_required: tuple[str, ...]) -> None:
    required = set(spec.inputs) | set(extra_required)
    if set(given) != required:
        raise ValueError(
            f"epilog {spec.epilog.name} needs epilog_inputs {sorted(required) or 'none'}; "
            f"got {sorted(given) or 'none'}"
        )


def _bias_axis(bias: OperandSpec, m: int, n: int) -> tuple[str, int]:
    """Return ("M"|"N", the index of the bias's length axis) from its shape."""
    shape = bias.shape
    if len(shape) == 1:
        if shape[0] in (m, n):
            return ("M" if shape[0] == m else "N"), 0
    elif shape[-2:] == (m, 1):
        return "M", len(shape) - 2
    elif shape[-2:] == (1, n):
        return "N", len(shape) - 1
    raise ValueError(
        f"bias must have shape ({m},), ({m}, 1) or (*batch, {m}, 1) for a bias along M (rows of the result), "
        f"or ({n},), (1, {n}) or (*batch, 1, {n}) along N (columns); got {shape}"
    )


def _bias_traits(bias: OperandSpec, p: _Problem, types: TypeTraits) -> tuple[bool, list[tuple[str, int]]]:
    axis_name, axis = _bias_axis(bias, p.m, p.n)
    length = bias.shape[axis]
    if length > 1 and bias.strides[axis] != 1:
        raise ValueError(
            f"bias needs unit stride along its length; got shape {bias.shape}, strides {bias.strides}"
        )
    allowed = bias_dtypes(types)
    if bias.dtype not in allowed:  # cuBLASLt's refusal (FP8: its bias table), made before any GPU work
        raise EpilogNotSupported(
            f"bias dtype {bias.dtype} is not supported with result dtype {types.d_dtype}; allowed: {allowed}"
        )
    stride = 0
    if len(bias.shape) > 2:
        stride = tile_stride("bias", bias.shape[:-2], bias.strides[:-2], p.batch)
    attrs = [("BIAS_BATCH_STRIDE", stride)]
    if bias.dtype != types.d_dtype:
        attrs.append(("BIAS_DATA_TYPE", _dt.cuda_data_type(bias.dtype)))
    return axis_name == "N", attrs


def _aux_dtype(kind: str, types: TypeTraits, prefs: MatmulEpilogPreferences) -> str:
    if kind == "relu":
        return "uint8"
    if prefs.aux_type is not None:
        return _dt.from_cuda_data_type(prefs.aux_type)
    return _wide_aux_dtype(types)


def _aux_input(
    kind: str, aux: OperandSpec, p: _Problem, dtype: str
) -> tuple[list[tuple[str, int]], BroadcastInput | None]:
    """Validate a forward-pass aux tensor given to a backward epilog; return its LD / batch stride
    attributes and, for one aux shared by every batch entry, the buffer to materialise it in."""
    rows = relu_aux_rows(p.m) if kind == "relu" else gelu_aux_rows(p.m)
    name, quantum, bits = f"{kind}_aux", (16 if kind == "relu" else 8), (8 if kind == "relu" else 1)
    expected = p.batch.shape + (rows, p.n)
    if aux.dtype != dtype:
        raise ValueError(
            f"{name} must have dtype {dtype} (what the forward epilog produced); got {aux.dtype}"
        )
    if tuple(aux.shape) not in (expected, expected[-2:]):  # unbatched: one aux for every batch entry
        raise ValueError(
            f"{name} must have shape {expected} (what the forward epilog produced), or {expected[-2:]} "
            f"for one aux shared by every batch entry; got {aux.shape}"
        )
    ld = aux.strides[-1] if p.n > 1 else rows
    if aux.strides[-2] != 1 or ld < rows or ld % quantum:
        raise ValueError(
            f"{name} must be column-major with a leading dimension that is a multiple of {quantum} and >= {rows}; "
            f"got strides {aux.strides}"
        )
    stride = tile_stride(name, aux.shape[:-2], aux.strides[:-2], p.batch)
    if stride % quantum:
        raise ValueError(f"{name}: batch stride {stride} must be a multiple of {quantum}")
    broadcast = None
    if stride == 0 and p.batch.count > 1:  # never a 0 aux batch stride (see BroadcastInput)
        stride, size = ld * p.n, _dt.itemsize(dtype)
        broadcast = BroadcastInput(name, p.batch.count, stride * size, ((p.n - 1) * ld + rows) * size)
    return [("EPILOGUE_AUX_LD", ld * bits), ("EPILOGUE_AUX_BATCH_STRIDE", stride * bits)], broadcast


def _aux_output(kind: str, p: _Problem, dtype: str) -> tuple[AuxOutputSpec, list[tuple[str, int]]]:
    rows = relu_aux_rows(p.m) if kind == "relu" else gelu_aux_rows(p.m)
    bits = 8 if kind == "relu" else 1
    block = rows * p.n
    shape = p.batch.shape + (rows, p.n)
    strides = dense_batch_strides(p.batch, block) + (1, rows)
    attrs = [
        ("EPILOGUE_AUX_LD", rows * bits),
        ("EPILOGUE_AUX_BATCH_STRIDE", block * bits if p.batch.count > 1 else 0),
    ]
    return AuxOutputSpec(f"{kind}_aux", shape, strides, dtype), attrs


def _bgrad_output(
    name: str, length: int, p: _Problem, dtype: str
) -> tuple[AuxOutputSpec, list[tuple[str, int]]]:
    if not p.batch.shape:
        return AuxOutputSpec(name, (length,), (1,), dtype), [("BIAS_BATCH_STRIDE", 0)]
    shape = p.batch.shape + (length, 1)
    strides = dense_batch_strides(p.batch, length) + (1, length)
    return AuxOutputSpec(name, shape, strides, dtype), [
        ("BIAS_BATCH_STRIDE", length if p.batch.count > 1 else 0)
    ]


class EpilogNotSupported(cuBLASLtError, ValueError):
    """An epilog cuBLASLt refuses for the problem's dtypes, refused before any GPU work: the
    ``cuBLASLtError`` (status ``CUBLAS_STATUS_NOT_SUPPORTED``) nvmath-python raises, and a ValueError."""

    def __init__(self, detail: str):
        super().__init__(15, "CUBLAS_STATUS_NOT_SUPPORTED", detail)


def _check_applicable(spec: EpilogSpec, p: _Problem, types: TypeTraits, version: int | None) -> None:
    if spec.epilog != E.DEFAULT and types.d_dtype.startswith("complex"):
        raise EpilogNotSupported(
            f"epilog {spec.epilog.name} is not supported for complex dtypes (cuBLASLt reports NOT_SUPPORTED); "
            f"D is {types.d_dtype}; use epilog=None"
        )
    if version is not None:
        have = (version // 10000, version // 100 % 100, version % 100)
        need = spec.min_version
        if spec.aux and p.batch.count > 1 and not spec.aux_is_input:
            need = max(need, BATCHED_AUX_MIN_VERSION)
        if have < need:
            raise ValueError(f"epilog {spec.epilog.name} needs cuBLASLt >= {need}; loaded: {have}")


def _wide_aux_dtype(types: TypeTraits) -> str:
    """cuBLASLt's default aux type: C's dtype over an FP8 D, else D's."""
    return types.c_dtype if types.narrow_result else types.d_dtype


def _gelu_aux_prefs(spec: EpilogSpec, dtype: str, prefs: MatmulEpilogPreferences, types: TypeTraits) -> tuple:
    """Extra inputs, attributes and outputs for a GELU aux output's preferences.

    An FP8 aux is quantized by the library (:mod:`._aux_quantize`): cuBLASLt 13.1 refuses every AUX
    scale pointer, so cuBLASLt keeps its default (wide) aux type and gets no AUX scale or amax pointer;
    the amax output is the library's too.
    """
    extra_inputs: tuple[str, ...] = ()
    attrs, outs = [], []
    narrow = is_narrow(dtype)
    if not narrow and (dtype != _wide_aux_dtype(types) or prefs.aux_type is not None):
        attrs.append(("EPILOGUE_AUX_DATA_TYPE", _dt.cuda_data_type(dtype)))
    if narrow:
        extra_inputs = (AUX_QUANTIZATION_SCALE,)
    if prefs.aux_amax:
        if not narrow:
            raise ValueError(
                f"aux_amax=True needs an FP8 aux_type; the aux dtype of {spec.epilog.name} is {dtype}"
            )
        outs.append(AuxOutputSpec(f"{spec.aux}_aux_amax", (1,), (1,), "float32"))
    return extra_inputs, attrs, outs


def _quantization(outputs: list[AuxOutputSpec], p: _Problem, extra: list[AuxOutputSpec]) -> AuxQuantization:
    """The :class:`AuxQuantization` of the (wide, FP8) aux pair that :func:`_aux_and_bgrad` made first
    (``extra``: the amax output, if any)."""
    wide, fp8 = outputs[0], outputs[1]
    amax = extra[0].name if extra else None
    ld = gelu_aux_rows(p.m)
    total = ld * p.n * p.batch.count
    return AuxQuantization(
        wide.name, fp8.name, amax, AUX_QUANTIZATION_SCALE, p.m, ld, total, wide.dtype, fp8.dtype
    )


def epilog_traits(
    epilog: Any,
    epilog_inputs: Mapping[str, OperandSpec] | None,
    *,
    m: int,
    n: int,
    k: int,
    batch: BatchTraits,
    types: TypeTraits,
    preferences: MatmulEpilogPreferences | None = None,
    cublaslt_version: int | None = None,
) -> EpilogTraits:
    """Validate an epilog and its inputs for one problem; return the descriptor settings.

    Args:
        epilog: a :class:`MatmulEpilog` (or int, or ``None`` for DEFAULT).
        epilog_inputs: name -> :class:`OperandSpec` of each input (``bias``, ``relu_aux``,
            ``gelu_aux``; ``aux_quantization_scale`` is a scale and is only checked by name).
        m, n, k: the user's extents of D = A (m x k) @ B (k x n) after 1-D promotion.
        batch: the problem's collapsed batch (``MMTraits.batch``).
        types: the resolved dtypes.
        preferences: ``MatmulPlanPreferences.epilog`` (aux_type, aux_amax; GELU aux only).
        cublaslt_version: ``cublasLtGetVersion()``; ``None`` skips the version check.

    Raises:
        ValueError: a missing/extra input, a bias of the wrong shape/stride/dtype, an aux input not
            matching the forward pass's, complex data, or an epilog too new for the loaded cuBLASLt.
        TypeError: the epilog is not an int.
    """
    spec = epilog_spec(epilog)
    prefs = preferences if preferences is not None else MatmulEpilogPreferences()
    given = dict(epilog_inputs or {})
    p = _Problem(m, n, k, batch)
    _check_applicable(spec, p, types, cublaslt_version)
    transpose, bias_attrs, ptrs = _bias_settings(spec, given, p, types)
    attrs: list[tuple[str, int]] = [("EPILOGUE", int(spec.epilog)), *bias_attrs]
    if transpose:
        p = _Problem(n, m, k, batch)
    extra_inputs, pattrs, pouts = (), [], []
    aux_dtype = _aux_dtype(spec.aux, types, prefs) if spec.aux else ""
    if spec.aux == "gelu" and not spec.aux_is_input:
        extra_inputs, pattrs, pouts = _gelu_aux_prefs(spec, aux_dtype, prefs, types)
    _check_names(spec, given, extra_inputs)
    outputs, aux_attrs, aux_ptrs, broadcast = _aux_and_bgrad(spec, given, p, types, aux_dtype)
    quantization = _quantization(outputs, p, pouts) if extra_inputs else None  # an FP8 GELU aux
    return EpilogTraits(
        epilog=spec.epilog,
        transpose_problem=transpose,
        forces_col=spec.forces_col,
        attributes=tuple(attrs + aux_attrs + pattrs),
        pointer_attributes=tuple(ptrs + aux_ptrs),
        inputs=tuple(sorted(given)),
        aux_outputs=tuple(outputs + pouts),
        required_ops=spec.required_ops,
        staged_operand=spec.staged_operand,
        aux_quantization=quantization,
        broadcast_input=broadcast,
    )


def _bias_settings(
    spec: EpilogSpec, given: Mapping[str, Any], p: _Problem, types: TypeTraits
) -> tuple[bool, list[tuple[str, int]], list[tuple[str, str]]]:
    """``(transpose the problem, attributes, pointer attributes)`` of a bias input (none without one)."""
    if spec.bias != "in" or "bias" not in given:
        return False, [], []
    transpose, attrs = _bias_traits(check_operand_spec("bias", given["bias"]), p, types)
    return transpose, list(attrs), [("BIAS_POINTER", "bias")]


def _aux_and_bgrad(
    spec: EpilogSpec, given: Mapping[str, Any], p: _Problem, types: TypeTraits, aux_dtype: str
) -> tuple[list[AuxOutputSpec], list[tuple[str, int]], list[tuple[str, str]], BroadcastInput | None]:
    """The aux matrix (input or output) and the bias-gradient output of an epilog."""
    outputs: list[AuxOutputSpec] = []
    attrs: list[tuple[str, int]] = []
    ptrs: list[tuple[str, str]] = []
    broadcast = None
    if spec.aux and spec.aux_is_input:
        aux_name = f"{spec.aux}_aux"
        aux_spec = check_operand_spec(aux_name, given[aux_name], min_ndim=2)
        aux_attrs, broadcast = _aux_input(spec.aux, aux_spec, p, aux_dtype)
        attrs += aux_attrs
        ptrs.append(("EPILOGUE_AUX_POINTER", aux_name))
    elif spec.aux:
        out, aux_attrs = _aux_output(spec.aux, p, aux_dtype)
        attrs += aux_attrs
        if is_narrow(aux_dtype):  # cuBLASLt writes an internal wide aux that the library quantizes
            wide = dataclasses.replace(out, name=f"_{out.name}_wide", dtype=_wide_aux_dtype(types))
            outputs += [wide, out]
            ptrs.append(("EPILOGUE_AUX_POINTER", wide.name))
        else:
            outputs.append(out)
            ptrs.append(("EPILOGUE_AUX_POINTER", out.name))
    if spec.bias == "out" and spec.aux_output is not None:
        length = p.n if spec.epilog == E.BGRADB else p.m
        dtype = types.c_dtype if types.narrow_result else types.d_dtype
        out, bias_attrs = _bgrad_output(spec.aux_output, length, p, dtype)
        outputs.append(out)
        attrs += bias_attrs
        ptrs.append(("BIAS_POINTER", out.name))
    return outputs, attrs, ptrs, broadcast
