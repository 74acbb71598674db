"""FFT traits: from an operand's shape, strides and dtype plus the options to a complete plan (pure).

:func:`make_traits` checks everything that can be checked without a GPU -- axes, dtype and
transform type, sizes, half-precision rules, the result dtype the operand's package can hold -- and
computes the result shape and strides and, for CUDA execution, the cuFFT steps
(:class:`~nvmath.fft._layout.CufftStep`) and whether the operand must first be copied into an
internal *staging* buffer (always for C2R, which overwrites its input; for host operands, whose
device copy is the staging buffer; and for layouts cuFFT cannot describe when
``layout_fallback="copy"``).

Axis orders: the *cuFFT order* of the transformed axes sorts them by decreasing operand stride,
except that for R2C/C2R the last requested axis (the halved one) is always innermost. The
``"optimized"`` result layout is dense with the batch axes outside (in the operand's order) and the
transformed axes inside (cuFFT order); ``"natural"`` is dense in the operand's own axis order (or
``"optimized"`` where cuFFT cannot write the natural layout).
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Sequence
from typing import Any

from nvmath._errors import UnsupportedLayoutError
from nvmath._internal.tensors.base import axis_order, dense_strides, is_dense
from nvmath.fft._layout import (
    MAX_OPERAND_LAUNCHES,
    CufftStep,
    LayoutUnsupported,
    chunk_axes,
    is_non_overlapping,
    solve_step,
)
from nvmath.fft._options import FFTOptions

__all__ = [
    "CPU_DTYPES",
    "SUPPORTED_DTYPES",
    "FFTTraits",
    "PlanKey",
    "RealOperandRequired",
    "cufft_order",
    "logical_shapes",
    "make_traits",
    "normalize_axes",
    "plan_key",
    "resolve_fft_type",
    "suggest_permutation",
]

SUPPORTED_DTYPES: tuple[str, ...] = ("float16", "float32", "float64", "complex32", "complex64", "complex128")
"""Operand dtypes of CUDA execution."""

CPU_DTYPES: tuple[str, ...] = ("float32", "float64", "complex64", "complex128")
"""Operand dtypes of CPU execution."""

_HALF = ("float16", "complex32")
_TO_COMPLEX = {"float16": "complex32", "float32": "complex64", "float64": "complex128"}
_TO_REAL = {v: k for k, v in _TO_COMPLEX.items()}


class RealOperandRequired(ValueError, RuntimeError):
    """A complex operand given to a real-to-complex transform (``rfft``, ``fft_type="R2C"``).

    A ``RuntimeError`` as nvmath-python raises it, and a ``ValueError`` as the other dtype errors.
    """


@dataclasses.dataclass(frozen=True)
class FFTTraits:
    """Everything decided about a transform before any GPU work.

    Attributes:
        fft_type: ``"C2C"``, ``"R2C"`` or ``"C2R"``.
        operand_shape, operand_strides, operand_dtype: the operand (strides in elements).
        axes: the transformed axes, normalized (non-negative), in the caller's order.
        fft_shape: the logical transform sizes along ``axes``.
        result_shape, result_strides, result_dtype: the result as returned to the caller.
        inplace: whether the result is the operand.
        execution: ``"cuda"`` or ``"cpu"``.
        cross_space: whether the operand lives in the other memory space than the execution.
        staging_strides: CUDA only: the layout of the internal device buffer the operand is copied
            into before each execution, or ``None`` when cuFFT reads the operand directly.
        steps: CUDA only: the cuFFT plans, in execution order.
        layout_key: CPU only: what a CPU key compares (:func:`plan_key`): the cuFFT plans a device
            operand of this layout would get, or ``None`` where cuFFT cannot describe it.
    """

    fft_type: str
    operand_shape: tuple[int, ...]
    operand_strides: tuple[int, ...]
    operand_dtype: str
    axes: tuple[int, ...]
    fft_shape: tuple[int, ...]
    result_shape: tuple[int, ...]
    result_strides: tuple[int, ...]
    result_dtype: str
    inplace: bool
    execution: str
    cross_space: bool = False
    staging_strides: tuple[int, ...] | None = None
    steps: tuple[CufftStep, ...] = ()
    layout_key: tuple | None = None

    @property
    def launches(self) -> int:
        """``cufftXtExec`` calls per execution (CUDA)."""
        return sum(step.launches for step in self.steps)


def normalize_axes(axes: Any, ndim: int) -> tuple[int, ...]:
    """Return ``axes`` as a tuple of non-negative ints (all axes when ``None``).

    Raises:
        TypeError: ``axes`` is not a sequence of ints.
        ValueError: the operand is 0-D, or ``axes`` is empty, out of range or repeats an axis.
    """
    if ndim == 0:
        raise ValueError("the operand is 0-dimensional; an FFT needs at least one axis")
    if axes is None:
        return tuple(range(ndim))
    if isinstance(axes, (str, bytes)) or not isinstance(axes, Sequence):
        raise TypeError(f"axes must be a sequence of ints or None; got {type(axes).__name__}: {axes!r}")
    if len(axes) == 0:
        raise ValueError("axes must name at least one axis; got an empty sequence")
    result = []
    for a in axes:
        if isinstance(a, bool) or not isinstance(a, numbers.Integral):
            raise TypeError(f"axes must be a sequence of ints; got {axes!r}")
        if not -ndim <= a < ndim:
            raise ValueError(
                f"axis {a} is out of range for an operand with {ndim} dimensions (axes={tuple(axes)})"
            )
        result.append(int(a) % ndim)
    if len(set(result)) != len(result):
        raise ValueError(f"axes must not repeat an axis; got {tuple(axes)}")
    return tuple(result)


def resolve_fft_type(dtype: str, fft_type: str | None) -> tuple[str, str]:
    """Return ``(fft_type, result dtype)`` for an operand of ``dtype``.

    Raises:
        ValueError: the dtype is not supported, or does not suit the requested transform type.
    """
    if dtype not in SUPPORTED_DTYPES:
        raise ValueError(
            f"the operand dtype {dtype!r} is not supported; the FFT supports {', '.join(SUPPORTED_DTYPES)}"
        )
    real = dtype in _TO_COMPLEX
    if fft_type is None:
        fft_type = "R2C" if real else "C2C"
    if real and fft_type != "R2C":
        raise ValueError(
            f"a {fft_type} transform needs a complex operand; got {dtype} (use fft_type='R2C' / rfft, "
            "or convert the operand to complex)"
        )
    if not real and fft_type == "R2C":
        raise RealOperandRequired(
            f"an R2C transform needs a real operand; got {dtype} (use fft_type='C2C' / fft)"
        )
    if fft_type == "C2C":
        return fft_type, dtype
    return fft_type, (_TO_COMPLEX[dtype] if real else _TO_REAL[dtype])


def logical_shapes(
    fft_type: str, shape: tuple[int, ...], axes: tuple[int, ...], parity: str
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Return ``(fft_shape, result_shape)``: the logical transform sizes and the result's shape.

    Raises:
        ValueError: an extent is zero, or a C2R output would be empty.
    """
    zeros = [a for a, n in enumerate(shape) if n == 0]
    if zeros:
        raise ValueError(
            f"the operand has zero-size axes {zeros} (shape {shape}); FFTs need non-empty operands"
        )
    fft_shape = [shape[a] for a in axes]
    result_shape = list(shape)
    last = axes[-1]
    if fft_type == "R2C":
        result_shape[last] = shape[last] // 2 + 1
    elif fft_type == "C2R":
        m = shape[last]
        n = 2 * (m - 1) if parity == "even" else 2 * m - 1
        if n < 1:
            raise ValueError(
                f"a C2R transform with last_axis_parity='even' needs at least 2 elements along axis {last}; "
                f"got {m} (use last_axis_parity='odd' for a 1-element output)"
            )
        fft_shape[-1] = result_shape[last] = n
    return tuple(fft_shape), tuple(result_shape)


def cufft_order(
    fft_type: str, axes: tuple[int, ...], shape: Sequence[int], strides: Sequence[int]
) -> tuple[int, ...]:
    """The transformed axes outer to inner as cuFFT will see them (see the module documentation)."""

    def key(a: int) -> tuple:
        return (shape[a] > 1, -abs(strides[a]), axes.index(a))

    if fft_type == "C2C":
        return tuple(sorted(axes, key=key))
    return tuple(sorted(axes[:-1], key=key)) + (axes[-1],)


def suggest_permutation(ndim: int, axes: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A transpose (batch axes first, then ``axes``) whose C-ordered copy cuFFT takes, and its new axes."""
    batch = tuple(a for a in range(ndim) if a not in axes)
    return batch + axes, tuple(range(ndim - len(axes), ndim))


def _check_precision(
    dtype: str, fft_shape: tuple[int, ...], execution: str, package: str, result: str
) -> None:
    """Refuse half precision on the CPU and complex32 outside torch (``fft_shape``: not checked)."""
    if dtype in _HALF:
        if execution == "cpu":
            raise ValueError(
                f"CPU execution does not support {dtype}; use ExecutionCUDA or {', '.join(CPU_DTYPES)}"
            )
        # which half-precision sizes run is cuFFT's decision (it plans many non-powers of two on
        # recent GPUs): planning raises cuFFTError for the ones it refuses, as nvmath-python does
    if "complex32" in (dtype, result) and package != "torch":
        raise TypeError(
            f"a {package} operand cannot hold complex32 (the {'operand' if dtype == 'complex32' else 'result'} "
            "dtype of this transform); use torch tensors for half-precision FFTs"
        )


def _dense(shape: Sequence[int], order: Sequence[int]) -> tuple[int, ...]:
    return dense_strides(tuple(shape), tuple(order))


def _orders(
    fft_type: str, axes: tuple[int, ...], shape: tuple[int, ...], strides: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Return ``(cuFFT order, optimized axis order, natural axis order)``."""
    order = cufft_order(fft_type, axes, shape, strides)
    natural = axis_order(shape, strides)
    optimized = tuple(a for a in natural if a not in axes) + order
    return order, optimized, natural


Buffer = tuple[str, tuple[int, ...], tuple[int, ...]]  # (name, extents, strides)


def _live_axes(fft_type: str, order: tuple[int, ...], extents: Sequence[int]) -> tuple[int, ...]:
    """Drop extent-1 transformed axes (identity transforms), keeping the halved axis and >= 1 axis."""
    if fft_type == "C2C":
        live = tuple(a for a in order if extents[a] > 1)
        return live or order[-1:]
    return tuple(a for a in order[:-1] if extents[a] > 1) + order[-1:]


def build_steps(
    fft_type: str,
    order: tuple[int, ...],
    n_of: dict[int, int],
    src: Buffer,
    dst: Buffer,
    *,
    half: bool = False,
) -> tuple[CufftStep, ...]:
    """The cuFFT steps transforming ``src`` into ``dst`` over the axes ``order`` (outer to inner).

    Raises:
        LayoutUnsupported: a step cannot be described (a limit on launches applies to steps that
            read the caller's operand out of place).
    """
    groups = chunk_axes(_live_axes(fft_type, order, src[1]), fft_type)
    limit = MAX_OPERAND_LAUNCHES if src[0] == "operand" and dst[0] != "operand" else None
    steps = []
    if fft_type == "C2R":
        for group in groups[:-1]:
            steps.append(solve_step("C2C", group, [n_of[a] for a in group], src, src))
        steps.append(solve_step("C2R", groups[-1], [n_of[a] for a in groups[-1]], src, dst))
    else:
        steps.append(
            solve_step(fft_type, groups[0], [n_of[a] for a in groups[0]], src, dst, max_launches=limit)
        )
        for group in groups[1:]:
            steps.append(solve_step("C2C", group, [n_of[a] for a in group], dst, dst))
    if half:
        _check_half_strides(steps)
    return tuple(steps)


def _check_half_strides(steps: list[CufftStep]) -> None:
    """Half-precision real transforms need a unit stride on the real side (as nvmath-python requires)."""
    for step in steps:
        if step.kind == "R2C" and step.istride != 1:
            raise LayoutUnsupported(f"half-precision R2C needs unit-stride input along axis {step.axes[-1]}")
        if step.kind == "C2R" and step.ostride != 1:
            raise LayoutUnsupported(f"half-precision C2R needs unit-stride output along axis {step.axes[-1]}")


def _unsupported(
    shape: tuple[int, ...], strides: tuple[int, ...], axes: tuple[int, ...], reason: str, *, inplace: bool
) -> UnsupportedLayoutError:
    permutation, new_axes = suggest_permutation(len(shape), axes)
    fix = (
        f"transpose the operand by {permutation} and copy it to C order, then use axes={new_axes} "
        "(see the error's .permutation and .axes)"
    )
    if not inplace:
        fix += ", or pass options={'layout_fallback': 'copy'} to let nvmath copy it before each execution"
    return UnsupportedLayoutError(
        f"cuFFT cannot describe the operand layout (shape {shape}, strides {strides}) for axes {axes}: "
        f"{reason}. To fix: {fix}.",
        permutation,
        new_axes,
    )


def _first_solvable(
    p: _Problem, combos: list[tuple[Buffer, Buffer]]
) -> tuple[Buffer, Buffer, tuple[CufftStep, ...]]:
    """Return the first ``(src, dst, steps)`` of ``combos`` cuFFT can describe."""
    reason = LayoutUnsupported("no candidate layout")
    for src, dst in combos:
        try:
            return src, dst, build_steps(p.fft_type, p.orders[0], p.n_of, src, dst, half=p.half)
        except LayoutUnsupported as exc:
            reason = exc
    raise reason


@dataclasses.dataclass(frozen=True)
class _Problem:
    fft_type: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    axes: tuple[int, ...]
    n_of: dict[int, int]
    result_shape: tuple[int, ...]
    orders: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]  # cuFFT, optimized, natural
    result_layout: str
    fallback: str
    half: bool
    overwrite: bool = False


def _cuda_inplace(p: _Problem, cross: bool) -> tuple[tuple[int, ...] | None, tuple[CufftStep, ...]]:
    order, optimized, natural = p.orders
    if cross:  # the device copy of the host operand is transformed in place, then copied back
        combos = [(("staging", p.shape, _dense(p.shape, o)),) * 2 for o in (natural, optimized)]
        src, _, steps = _first_solvable(p, combos)
        return src[2], steps
    operand = ("operand", p.shape, p.strides)
    try:
        return None, build_steps(p.fft_type, order, p.n_of, operand, operand, half=p.half)
    except LayoutUnsupported as exc:
        raise _unsupported(p.shape, p.strides, p.axes, str(exc), inplace=True) from None


def _cuda_out_of_place(
    p: _Problem, cross: bool
) -> tuple[tuple[int, ...] | None, tuple[int, ...], tuple[CufftStep, ...]]:
    _order, optimized, natural = p.orders
    layouts = [natural, optimized] if p.result_layout == "natural" else [optimized]
    results = [("result", p.result_shape, _dense(p.result_shape, o)) for o in layouts]
    staged = [("staging", p.shape, _dense(p.shape, optimized))]
    if natural != optimized:  # a copy keeps the operand's axis order where cuFFT can read it, as
        # nvmath-python's copies do: callbacks index by offsets into this buffer (get_input_layout)
        staged.insert(0, ("staging", p.shape, _dense(p.shape, natural)))
    operand = ("operand", p.shape, p.strides)
    if p.fft_type == "C2R" and p.overwrite and not cross and is_dense(p.shape, p.strides):
        # cuFFT may use the operand as scratch: only a gap-free operand (no other data in between)
        try:
            _, dst, steps = _first_solvable(p, [(operand, r) for r in results])
            if len(steps) == 1:  # one cuFFT launch reads the operand (no intermediate use of it)
                return None, dst[2], steps
        except LayoutUnsupported:
            pass  # keep the copy
    if p.fft_type == "C2R" or cross:
        src, dst, steps = _first_solvable(p, [(s, r) for s in staged for r in results])
        return src[2], dst[2], steps
    try:
        _, dst, steps = _first_solvable(p, [(operand, r) for r in results])
        return None, dst[2], steps
    except LayoutUnsupported as exc:
        if p.fallback != "copy":
            raise _unsupported(p.shape, p.strides, p.axes, str(exc), inplace=False) from None
    src, dst, steps = _first_solvable(p, [(staged[-1], r) for r in results])
    return src[2], dst[2], steps


def _check_inplace(fft_type: str, shape: tuple[int, ...], strides: tuple[int, ...]) -> None:
    if fft_type != "C2C":
        raise ValueError(f"inplace=True is only supported for C2C transforms; this transform is {fft_type}")
    if not is_non_overlapping(shape, strides):
        raise ValueError(
            f"an in-place FFT needs an operand whose elements do not overlap in memory; got shape {shape}, "
            f"strides {strides}"
        )


def make_traits(
    shape: Sequence[int],
    strides: Sequence[int],
    dtype: str,
    *,
    axes: Any = None,
    options: FFTOptions | None = None,
    execution: str = "cuda",
    package: str = "torch",
    operand_space: str = "cuda",
) -> FFTTraits:
    """Check a transform and compute its traits (see the module documentation).

    Args:
        shape, strides: the operand's shape and strides (elements).
        dtype: the operand's canonical dtype name.
        axes: the transformed axes (``None``: all).
        options: the :class:`FFTOptions` (``None``: defaults).
        execution: ``"cuda"`` or ``"cpu"``.
        package: the operand's package (``"numpy"``, ``"cupy"``, ``"torch"``, ...).
        operand_space: ``"cuda"`` or ``"cpu"``: where the operand lives.

    Raises:
        TypeError: bad ``axes``, or a result dtype the package cannot hold.
        ValueError: a bad dtype, transform type, size, or in-place request.
        UnsupportedLayoutError: cuFFT cannot describe the layout (and ``layout_fallback`` is
            ``"error"``, or the transform is in place).
    """
    options = options if options is not None else FFTOptions()
    shape, strides = tuple(int(n) for n in shape), tuple(int(s) for s in strides)
    if len(strides) != len(shape):
        raise ValueError(f"strides {strides} do not match shape {shape}")
    axes = normalize_axes(axes, len(shape))
    fft_type, result_dtype = resolve_fft_type(dtype, options.fft_type)
    if options.inplace:
        _check_inplace(fft_type, shape, strides)
    fft_shape, result_shape = logical_shapes(fft_type, shape, axes, options.last_axis_parity)
    _check_precision(dtype, fft_shape, execution, package, result_dtype)
    orders = _orders(fft_type, axes, shape, strides)
    common = {
        "fft_type": fft_type,
        "operand_shape": shape,
        "operand_strides": strides,
        "operand_dtype": dtype,
        "axes": axes,
        "fft_shape": fft_shape,
        "result_shape": result_shape,
        "result_dtype": result_dtype,
        "inplace": options.inplace,
        "execution": execution,
        "cross_space": execution != operand_space,
    }
    problem = _Problem(
        fft_type, shape, strides, axes, dict(zip(axes, fft_shape)), result_shape, orders,
        options.result_layout, options.layout_fallback, dtype in _HALF, options.overwrite_operand,
    )  # fmt: skip
    if execution == "cpu":
        return _cpu_traits(problem, common)
    return _cuda_traits(problem, options.inplace, operand_space == "cpu", common)


def _cpu_traits(problem: _Problem, common: dict[str, Any]) -> FFTTraits:
    """Traits of a CPU transform: the result is dense, in the natural or the operand's axis order."""
    layout = problem.orders[2] if problem.result_layout == "natural" else problem.orders[1]
    strides, result_shape = common["operand_strides"], common["result_shape"]
    result_strides = strides if common["inplace"] else _dense(result_shape, layout)
    layout_key = _cuda_layout_key(problem, common["inplace"])
    return FFTTraits(result_strides=result_strides, layout_key=layout_key, **common)


def _steps_key(steps: Sequence[CufftStep]) -> tuple:
    return tuple((s.kind, s.plan_args(), s.src, s.dst, s.offsets) for s in steps)


def _cuda_layout_key(problem: _Problem, inplace: bool) -> tuple | None:
    """The cuFFT plans a device operand of ``problem``'s layout would get (whether it is staged, the
    steps), so that CPU keys group the batch arrangements CUDA keys group; ``None`` where cuFFT cannot
    describe the layout (the CPU key then compares the whole layout)."""
    try:
        if inplace:
            staging, steps = _cuda_inplace(problem, False)
        else:
            staging, _, steps = _cuda_out_of_place(problem, False)
    except (UnsupportedLayoutError, LayoutUnsupported):
        return None
    return staging is not None, _steps_key(steps)


def _cuda_traits(problem: _Problem, inplace: bool, cross: bool, common: dict[str, Any]) -> FFTTraits:
    if inplace:
        staging, steps = _cuda_inplace(problem, cross)
        return FFTTraits(result_strides=problem.strides, staging_strides=staging, steps=steps, **common)
    staging, result_strides, steps = _cuda_out_of_place(problem, cross)
    return FFTTraits(result_strides=result_strides, staging_strides=staging, steps=steps, **common)


def traits_key(traits: FFTTraits) -> tuple:
    """A hashable summary of everything in ``traits`` that decides a plan."""
    return tuple(getattr(traits, f.name) for f in dataclasses.fields(traits))


class PlanKey:
    """The traits part of an FFT key: equal (and hashing equal) when :func:`plan_key` is, while
    keeping the traits it was made from (``estimate_workspace_size`` plans from them)."""

    __slots__ = ("_hash", "_key", "traits")

    def __init__(self, traits: FFTTraits):
        self.traits = traits
        self._key = plan_key(traits)
        self._hash = hash(self._key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlanKey) and self._key == other._key

    def __repr__(self) -> str:
        return f"PlanKey{self._key!r}"


def plan_key(traits: FFTTraits) -> tuple:
    """A hashable summary of what decides the cuFFT plan (nvmath-python's ``create_key`` semantics).

    Operands that need the same cuFFT plans -- same transform sizes, total batch count and distance
    between consecutive transforms, e.g. shapes ``(2, 3, 64)`` and ``(3, 2, 64)`` over ``axes=(2,)``
    -- have equal keys, whatever their shapes and batch strides; an :class:`~nvmath.fft.FFT` planned
    for one accepts the other in ``reset_operand``. CPU transforms group the same arrangements (the
    cuFFT plans a device operand of their layout would get: scipy takes any strides, and a swapped-in
    operand re-derives its traits); where cuFFT cannot describe a layout, the CPU key is the whole traits.
    """
    if traits.execution != "cuda":
        if traits.layout_key is None:
            return traits_key(traits)
        return (
            traits.execution, traits.fft_type, traits.operand_dtype, traits.result_dtype, traits.inplace,
            traits.cross_space, traits.layout_key,
        )  # fmt: skip
    return (
        "cuda", traits.fft_type, traits.operand_dtype, traits.result_dtype, traits.inplace,
        traits.cross_space, traits.staging_strides is not None, _steps_key(traits.steps),
    )  # fmt: skip
