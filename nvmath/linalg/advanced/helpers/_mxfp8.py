"""MXFP8 scale helpers: make, invert and apply UE8M0 block scales.

An MXFP8 scale is a ``uint8`` ``x`` standing for ``2**(x - 127)`` (``x = 255`` is NaN); one scale
covers 32 consecutive elements along the operand's block axis, and an operand's scales form one
1-D tensor in cuBLASLt's tiled layout (:mod:`._geometry`). Exported by
:mod:`nvmath.linalg.advanced.helpers.matmul`.
"""

from __future__ import annotations

import contextlib
import operator
import sys
from typing import Any

from nvmath.linalg.advanced.helpers import _arrays
from nvmath.linalg.advanced.helpers._geometry import BlockScalingFormat, resolve_geometry
from nvmath.linalg.advanced.helpers._tiles import check_scales, tile, untile
from nvmath.linalg.advanced.helpers._values import (
    FLOAT_BITS,
    check_output_dtype,
    mxfp8_exponents,
    smallest_exact_dtype,
)

__all__ = ["apply_mxfp8_scale", "create_mxfp8_scale", "invert_mxfp8_scale"]

_MX = BlockScalingFormat.MXFP8
_BIAS = 127
_NAN = 255
_EXPONENTS = (-127, 127)  # the finite UE8M0 scales: 2**-127 .. 2**127


def _stream_ctx(x: Any, pkg: str, stream: Any) -> contextlib.AbstractContextManager:
    """Make ``stream`` current for the package of device tensor ``x`` (no-op on the host or for None)."""
    on_host = pkg == "numpy" or (pkg == "torch" and not x.is_cuda)
    if stream is None or on_host:
        return contextlib.nullcontext()
    from nvmath._internal import streams

    device_id = x.device.index if pkg == "torch" else x.device.id
    native = streams.native_stream(streams.get_stream(stream, device_id=device_id, package=pkg), pkg)
    return sys.modules["torch"].cuda.stream(native) if pkg == "torch" else native


def _check_exponent_range(low: int, high: int) -> None:
    if low < _EXPONENTS[0] or high > _EXPONENTS[1]:
        bad = low if low < _EXPONENTS[0] else high
        raise ValueError(
            f"MXFP8 scale exponents must lie in [{_EXPONENTS[0]}, {_EXPONENTS[1]}] (UE8M0 scales "
            f"2**-127 .. 2**127); got {bad}"
        )


def _scales_from_tensor(exponent: Any, pkg: str, x: Any, geom: Any) -> Any:
    if _arrays.package_of(exponent, "exponent") != pkg:
        raise TypeError(f"exponent must be a tensor of x's package ({pkg}); got {type(exponent).__name__}")
    dtype = _arrays.dtype_name(exponent)
    if "int" not in dtype:
        raise ValueError(f"exponent must be an int or an integer tensor; got dtype {dtype}")
    if pkg == "torch":
        exponent = exponent.to(x.device)
    exps = _arrays.astype(_arrays.broadcast_to(exponent, geom.dense_shape, "exponent"), "int32")
    span = _arrays.min_max(exps)
    if span is not None:
        _check_exponent_range(*span)
    return tile(_arrays.astype(exps + _BIAS, "uint8"), geom)


def create_mxfp8_scale(x: Any, exponent: Any, stream: Any = None) -> Any:
    """Make MXFP8 block scales for operand ``x`` whose blocks are all scaled by ``2**exponent``.

    This helper is experimental.

    Args:
        x: the operand the scales are for (a torch, numpy or cupy tensor, at least 2-D). Its
            unit-stride axis among the last two is the block axis (K: ``a`` is ``(..., M, K)``
            row-major, ``b`` is ``(..., K, N)`` column-major); that extent must be a multiple of 32.
        exponent: an int in ``[-127, 127]`` for every block, or an integer tensor of ``x``'s
            package holding one exponent per block, broadcastable to ``x``'s shape with the block
            axis divided by 32.
        stream: for a GPU ``x``, the stream to make the scales on (any stream the package accepts,
            see :mod:`nvmath._internal.streams`); ``None`` is the package's current stream. Ignored
            for host tensors.

    Returns:
        A 1-D ``uint8`` tensor of ``x``'s package and device, in cuBLASLt's tiled layout (see
        :func:`~nvmath.linalg.advanced.helpers.matmul.get_block_scale_offset`), ready to pass as
        ``quantization_scales`` with ``block_scaling=True``.

    Raises:
        TypeError: ``x`` or ``exponent`` is of an unsupported type.
        ValueError: an exponent outside ``[-127, 127]``, an ``exponent`` tensor that does not
            broadcast, or an operand shape unfit for MXFP8 (see :func:`get_block_scale_offset`).
    """
    pkg = _arrays.package_of(x, "x")
    geom = resolve_geometry(x, _MX)
    with _arrays.device_ctx(x), _stream_ctx(x, pkg, stream):
        if _arrays.is_tensor(exponent):
            return _scales_from_tensor(exponent, pkg, x, geom)
        if isinstance(exponent, bool):
            raise TypeError(f"exponent must be an int or an integer tensor; got {exponent!r}")
        try:
            value = operator.index(exponent)
        except TypeError:
            raise TypeError(f"exponent must be an int or an integer tensor; got {exponent!r}") from None
        _check_exponent_range(value, value)
        return _arrays.full_1d(x, geom.size, value + _BIAS, "uint8")


def invert_mxfp8_scale(mx_scales: Any) -> Any:
    """Return the MXFP8 scales of the reciprocals: ``2**(x - 127)`` becomes ``2**(127 - x)``.

    This helper is experimental. The byte ``x`` maps to ``254 - x``, which stays in the finite
    range ``[0, 254]`` for every finite scale (``2**-127`` and ``2**127`` swap), so nothing is
    clipped; the NaN byte 255 stays 255. The layout is untouched (the map is elementwise).

    Args:
        mx_scales: ``uint8`` scales (torch ``float8_e8m0fnu`` too), of any shape, torch / numpy / cupy.

    Returns:
        A new tensor of the same package, device, dtype and shape.

    Raises:
        TypeError: ``mx_scales`` is not a tensor.
        ValueError: ``mx_scales`` has another dtype.
    """
    check_scales(mx_scales, _MX, "mx_scales")
    as_e8m0 = _arrays.dtype_name(mx_scales) == "float8_e8m0fnu"
    raw = mx_scales.view(_arrays.as_dtype("torch", "uint8")) if as_e8m0 else mx_scales
    with _arrays.device_ctx(raw):
        inverted = _arrays.elementwise_where(raw == _NAN, raw, 2 * _BIAS - raw)
    return inverted.view(mx_scales.dtype) if as_e8m0 else inverted


def apply_mxfp8_scale(x: Any, scales_1d: Any, output_dtype: Any = "smallest") -> Any:
    """Dequantize ``x``: multiply every element by its block's MXFP8 scale.

    This helper is experimental. The product is formed exactly (in float64) and converted once
    to the result dtype.

    Args:
        x: an FP8 (``float8_e4m3fn`` / ``float8_e5m2``) operand, or any real floating tensor
            (float16, bfloat16, float32, float64), of torch, numpy or cupy; its block axis is
            inferred as in :func:`create_mxfp8_scale`.
        scales_1d: its 1-D ``uint8`` scales in cuBLASLt's tiled layout, same package and device.
        output_dtype: ``'smallest'``: the narrowest of float16, bfloat16 (torch only), float32
            and float64 that holds every product exactly, judged from ``x``'s dtype and the range
            of the scales present (read on the host: a GPU tensor's stream is synchronized); or
            one of those dtypes (object or name), rounding once to nearest (overflow gives inf).
            NaN scales give NaN.

    Returns:
        A tensor of ``x``'s shape, package, device and memory order.

    Raises:
        TypeError: ``x`` / ``scales_1d`` are not tensors of one package.
        ValueError: a bad dtype of ``x``, ``scales_1d`` or ``output_dtype``; ``scales_1d`` of the
            wrong length; an operand shape unfit for MXFP8.
    """
    pkg = _arrays.package_of(x, "x")
    dtype = _arrays.dtype_name(x)
    if dtype not in FLOAT_BITS:
        raise ValueError(f"x must have a real floating dtype ({', '.join(FLOAT_BITS)}); got {dtype}")
    if check_scales(scales_1d, _MX, "scales_1d") != pkg:
        raise TypeError(f"scales_1d must be a tensor of x's package ({pkg}); got {type(scales_1d).__name__}")
    if _arrays.device_of(scales_1d) != _arrays.device_of(x):
        raise ValueError(
            f"scales_1d must be on x's device {_arrays.device_of(x)}; got {_arrays.device_of(scales_1d)}"
        )
    geom = resolve_geometry(x, _MX)
    name = check_output_dtype(output_dtype, pkg)
    ndim = len(geom.shape)

    def canonical(t: Any) -> Any:  # block axis last
        return _arrays.swap_last(t) if geom.axis == ndim - 2 else t

    with _arrays.device_ctx(x):
        k, nan, span = mxfp8_exponents(untile(scales_1d, geom))
        if name is None:
            low, high, bits = FLOAT_BITS[dtype]
            k_min, k_max = span or (0, 0)
            name = smallest_exact_dtype(pkg, low + k_min, high + k_max, bits)
        factor = canonical(_arrays.elementwise_where(nan, float("nan"), _arrays.exact_pow2(k)))
        xc = _arrays.astype(canonical(x), "float64")
        shape = tuple(xc.shape)
        product = xc.reshape(shape[:-1] + (geom.blocks, geom.block)) * factor[..., None]
        return canonical(_arrays.astype(product.reshape(shape), name))
