"""A ``Matmul``'s constructor-time facts (:class:`Spec`) and the checks that make them: the pure traits
(memoised per problem) and device placement.

:func:`specify` runs every check that needs no GPU -- numpy.matmul traits, dtypes, scales and their
modes -- and memoises the result per problem (shapes, strides, dtypes, conjugation, scale shapes and
the options that decide types), so building planners for a recurring problem skips the trait
computation. :func:`place` then does the first GPU work: device checks, the stream, and device
copies of host operands.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from nvmath._errors import LibraryNotFoundError
from nvmath._internal import caches, streams
from nvmath._internal.streams import StreamHandle
from nvmath.linalg.advanced import _device, _handles
from nvmath.linalg.advanced._operands import Slot, spec_of
from nvmath.linalg.advanced._options import MatmulOptions
from nvmath.linalg.advanced._scaling import (
    TENSOR_WIDE,
    ScalingTraits,
    check_scaling,
    check_scaling_support,
    infer_scaling,
)
from nvmath.linalg.advanced._traits import MMTraits, get_mm_traits
from nvmath.linalg.advanced._typemaps import (
    TypeTraits,
    check_device_support,
    check_quantization_scales,
    resolve_types,
)

__all__ = ["Spec", "place", "specify"]

class Spec(NamedTuple):
    """The constructor-time facts of a ``Matmul`` (fixed for its lifetime).

    Attributes:
        options: the options.
        package: the operands' package.
        user_device: the operands' device ("cpu" for host operands).
        device_id: the GPU that executes.
        host: the operands live in host memory (copied to ``device_id``, results copied back).
        mm: the traits of the device operands.
        types: the resolved dtypes.
        version: the cuBLASLt version.
        has_c: ``c`` was given.
        key: a hashable key of the problem's pure traits (``None``: not memoisable).
        scaling: the scale modes of ``a`` and ``b`` (:class:`~._scaling.ScalingTraits`).
    """

    options: MatmulOptions
    package: str
    user_device: Any
    device_id: int
    host: bool
    mm: MMTraits
    types: TypeTraits
    version: int
    has_c: bool
    key: Any = None
    scaling: ScalingTraits = TENSOR_WIDE


_OPERANDS = ("a", "b", "c")
_TRAITS = caches.memo("nvmath.linalg.advanced: matmul traits", 256)
"""(operand specs, qualifiers, scale shapes, options) -> (mm traits, types, scaling)."""


def _scale_shapes(scales: Mapping[str, Any]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """``(name, shape)`` of each given scale (``()`` for a number), sorted by name."""
    if not scales:
        return ()
    return tuple((n, tuple(getattr(v, "shape", ()))) for n, v in sorted(scales.items()))


def _traits_key(
    specs: Mapping[str, Any], qualifiers: Any, scale_shapes: tuple, options: MatmulOptions
) -> Any:
    """A key for the pure traits of a problem, or ``None`` when some argument is not plain data."""
    conj = None
    if qualifiers is not None:
        if (
            not isinstance(qualifiers, np.ndarray)
            or qualifiers.ndim != 1
            or "is_conjugate" not in (qualifiers.dtype.names or ())
        ):
            return None
        conj = tuple(bool(x) for x in qualifiers["is_conjugate"])
    o = options
    return (
        tuple(specs.items()), conj, o.inplace, o.compute_type, o.scale_type, o.result_type,
        o.block_scaling, o.result_amax, scale_shapes,
    )  # fmt: skip


def specify(
    ops: Mapping[str, Any], qualifiers: Any, scales: Mapping[str, Any], options: MatmulOptions
) -> tuple[Any, Any, ScalingTraits, Any, dict[str, Any]]:
    """The pure checks of the constructor: traits, types, scales (no GPU work); memoised per problem.

    Args:
        ops: the wrapped operands.
        qualifiers: as given to the constructor.
        scales: the given quantization scales (numbers, or wrapped tensors: see
            :func:`~._operands.wrap_scales`).
        options: the options.

    Returns:
        ``(mm traits, types, scaling, key, specs)``; ``key`` is ``None`` when the result was not
        memoised; ``specs``: each operand's :class:`~._layout.OperandSpec`.
    """
    specs = {n: spec_of(op) for n, op in ops.items()}
    shapes = _scale_shapes(scales)
    key = _traits_key(specs, qualifiers, shapes, options)
    hit = _TRAITS.get(key) if key is not None else None
    if hit is None:
        hit = _compute_traits(specs, qualifiers, dict(shapes), options)
        if key is not None:
            _TRAITS.put(key, hit)
    mm, types, scaling = hit
    if types.narrow_inputs and ops["a"].device == "cuda":
        for name in ("a", "b"):
            if ops[name].data_ptr % 16:
                raise ValueError(
                    f"FP8 operand {name!r} must be 16-byte aligned; its address is {ops[name].data_ptr:#x}"
                )
    return mm, types, scaling, key, specs


def _compute_traits(
    specs: Mapping[str, Any],
    qualifiers: Any,
    scale_shapes: Mapping[str, tuple[int, ...]],
    options: MatmulOptions,
) -> tuple[Any, Any, ScalingTraits]:
    a, b, c = (specs.get(n) for n in _OPERANDS)
    mm = get_mm_traits(a, b, c, qualifiers=qualifiers, inplace=options.inplace)
    types = resolve_types(
        a.dtype, b.dtype, c.dtype if c is not None else None, compute_type=options.compute_type,
        scale_type=options.scale_type, result_type=options.result_type, inplace=options.inplace,
    )  # fmt: skip
    scaling = TENSOR_WIDE  # without both a and b scales check_quantization_scales allows none at all
    if "a" in scale_shapes and "b" in scale_shapes:  # the modes' own rules first: they say more
        scaling = infer_scaling(scale_shapes, mm.m, mm.n, mm.k)
        check_scaling(scaling, types, batch_count=mm.batch.count, block_scaling=options.block_scaling)
    check_quantization_scales(scale_shapes, types, block_scaling=options.block_scaling)
    if options.result_amax and not types.narrow_result:
        raise ValueError(f"result_amax=True needs an FP8 result; the result dtype is {types.d_dtype}")
    return mm, types, scaling


NO_GPU = (
    "nvmath.linalg.advanced runs on an NVIDIA GPU (cuBLASLt), and none is usable here ({reason}); numpy "
    "and torch-CPU operands are copied to the GPU and back. For matrix products on the CPU, use "
    "nvmath.linalg.matmul, which executes on the CPU for CPU operands (execution='cpu')."
)


def _compute_capability(device_id: int) -> tuple[int, int]:
    """The device's compute capability; without a driver or GPU, an error saying where to go instead."""
    try:
        return _device.device_info(device_id).compute_capability
    except LibraryNotFoundError as exc:
        raise LibraryNotFoundError(NO_GPU.format(reason=exc)) from exc


def place(
    ops: Mapping[str, Any],
    mm: Any,
    types: Any,
    scaling: ScalingTraits,
    key: Any,
    qualifiers: Any,
    options: MatmulOptions,
    stream: Any,
    specs: Mapping[str, Any] | None = None,
) -> tuple[Spec, dict[str, Slot], StreamHandle]:
    """Check the device, resolve the stream and make the operand slots (copying host operands);
    ``specs``: the operands' specs as :func:`specify` gave them (else computed again).

    Returns:
        ``(spec, slots, stream handle)``.
    """
    first = ops["a"]
    host = first.device != "cuda"
    device_id = options.device_id if host else int(first.device_id)
    version = _handles.cublaslt_version()
    cc = _compute_capability(device_id)
    check_device_support(types, cc, version, block_scaling=options.block_scaling)
    check_scaling_support(scaling, cc, version)
    handle = streams.get_stream(stream, device_id=device_id, package=first.package)
    specs = specs or {}
    slots = {n: Slot(n, op, device_id, handle, specs.get(n)) for n, op in ops.items()}
    if host:  # the device copies may have other strides: the traits of what cuBLASLt reads
        mm = get_mm_traits(
            slots["a"].spec, slots["b"].spec, slots["c"].spec if "c" in slots else None,
            qualifiers=qualifiers, inplace=options.inplace,
        )  # fmt: skip
    spec = Spec(
        options, first.package, first.device_id, device_id, host, mm, types, version, "c" in ops,
        None if host else key, scaling,
    )  # fmt: skip
    return spec, slots, handle
