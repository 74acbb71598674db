"""Decoding block scales to numbers, and the ``output_dtype='smallest'`` rule.

``'smallest'`` picks the narrowest of float16, bfloat16 (torch only), float32 and float64 that
represents every result *exactly*. Each candidate is described by the binary powers it can hold
(from its smallest subnormal to its largest exponent) and its significand bits; a result of
``p``-bit values times ``2**k`` with ``k`` in ``[k_min, k_max]`` fits a candidate when its bit span
``[lo + k_min, hi + k_max]`` lies inside the candidate's and ``p`` does not exceed its precision.
MXFP8 scales are read on the host to find ``k_min`` / ``k_max`` (a device tensor's stream is
synchronized); NVFP4 (UE4M3) scales always fit float16.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from nvmath.linalg.advanced.helpers import _arrays
from nvmath.linalg.advanced.helpers._geometry import BlockScalingFormat

__all__ = [
    "FLOAT_BITS",
    "check_expand_dtype",
    "check_output_dtype",
    "decode",
    "mxfp8_exponents",
    "smallest_exact_dtype",
]

FLOAT_BITS: dict[str, tuple[int, int, int]] = {
    "float8_e4m3fn": (-9, 8, 4),
    "float8_e5m2": (-16, 15, 3),
    "float16": (-24, 15, 11),
    "bfloat16": (-133, 127, 8),
    "float32": (-149, 127, 24),
    "float64": (-1074, 1023, 53),
}
"""Per real floating dtype: (exponent of the smallest subnormal, largest exponent, significand bits)."""

_CANDIDATES = {
    "torch": ("float16", "bfloat16", "float32", "float64"),
    "numpy": ("float16", "float32", "float64"),
    "cupy": ("float16", "float32", "float64"),
}
_OUTPUT_NAMES = ("float16", "bfloat16", "float32", "float64")


def check_output_dtype(output_dtype: Any, pkg: str, *, raw: str | None = None) -> str | None:
    """Return the dtype name ``output_dtype`` asks for, or ``None`` for ``'smallest'``.

    Args:
        output_dtype: ``'smallest'``, a dtype object of the package, or a dtype name.
        pkg: the tensors' package.
        raw: a further allowed name (the scale dtype, for raw scale entries).

    Raises:
        ValueError: anything else (the message lists what is allowed).
    """
    if isinstance(output_dtype, str) and output_dtype == "smallest":
        return None
    if isinstance(output_dtype, str):
        name = output_dtype
    elif type(output_dtype).__module__.startswith("torch"):
        name = str(output_dtype).removeprefix("torch.")
    else:
        try:
            name = np.dtype(output_dtype).name
        except TypeError:
            name = repr(output_dtype)
    allowed = _OUTPUT_NAMES + ((raw,) if raw else ())
    if name not in allowed:
        raise ValueError(
            f"output_dtype must be 'smallest' or one of {', '.join(allowed)}; got {output_dtype!r}"
        )
    return name


def smallest_exact_dtype(pkg: str, lo: int, hi: int, precision: int) -> str:
    """The narrowest candidate dtype of ``pkg`` holding ``precision``-bit values within ``2**lo .. 2**hi``.

    Args:
        pkg: the package (bfloat16 is a candidate for torch only).
        lo: the lowest binary power a result may need.
        hi: the highest binary power a result may need.
        precision: the significand bits of one result.
    """
    for name in _CANDIDATES[pkg]:
        low, high, bits = FLOAT_BITS[name]
        if low <= lo and hi <= high and precision <= bits:
            return name
    return "float64"


def mxfp8_exponents(dense: Any) -> tuple[Any, Any, tuple[int, int] | None]:
    """Split dense UE8M0 scales into ``(k, nan, (k_min, k_max))``.

    ``k = x - 127`` as int32 (0 where ``x`` is 255), ``nan`` marks the 255 (NaN) entries, and the
    range covers the non-NaN entries (``None`` when there are none).
    """
    if _arrays.dtype_name(dense) == "float8_e8m0fnu":
        dense = dense.view(_arrays.as_dtype("torch", "uint8"))
    nan = dense == 255
    k = _arrays.astype(dense, "int32") - 127
    k = _arrays.elementwise_where(nan, 0, k)
    finite = k[~nan]
    return k, nan, _arrays.min_max(finite)


_E4M3 = "float8_e4m3fn"
_EXPAND_OUTPUTS = {
    BlockScalingFormat.NVFP4: (_E4M3, *_OUTPUT_NAMES),
    BlockScalingFormat.MXFP8: ("uint8", *_OUTPUT_NAMES),
}


def check_expand_dtype(output_dtype: Any, fmt: BlockScalingFormat, pkg: str) -> str | None:
    """The dtype name ``expand_block_scale``'s ``output_dtype`` asks for (``None``: ``'smallest'``).

    Raises:
        TypeError: a dtype ``fmt``'s scales cannot be expanded to (as nvmath-python raises).
    """
    try:
        return check_output_dtype(output_dtype, pkg, raw=_EXPAND_OUTPUTS[fmt][0])
    except ValueError as exc:
        allowed = ", ".join(_EXPAND_OUTPUTS[fmt])
        raise TypeError(
            f"output_dtype must be 'smallest' or one of {allowed} for {fmt.value} scales; "
            f"got {output_dtype!r}"
        ) from exc


def _e4m3_values() -> np.ndarray:
    """float32 value of each of the 256 UE4M3 (float8_e4m3fn) bit patterns."""
    b = np.arange(256)
    exp, man = (b >> 3) & 15, (b & 7).astype(np.float64)
    mag = np.where(exp == 0, man / 8 * 2.0**-6, (1 + man / 8) * np.ldexp(1.0, exp - 7))
    mag = np.where((exp == 15) & (man == 7), np.nan, mag)
    return np.where(b >= 128, -mag, mag).astype(np.float32)


def _nvfp4_values(dense: Any, pkg: str) -> Any:
    """float32 values of NVFP4 scales given as float8_e4m3fn or as their uint8 bit patterns."""
    if _arrays.dtype_name(dense) != "uint8":
        return _arrays.astype(dense, "float32")
    if pkg == "torch":
        return dense.view(_arrays.as_dtype("torch", _E4M3)).to(_arrays.as_dtype("torch", "float32"))
    table = _e4m3_values()
    return (table if pkg == "numpy" else sys.modules[pkg].asarray(table))[dense]


def decode(dense: Any, fmt: BlockScalingFormat, output_dtype: Any, pkg: str) -> Any:
    """The scales ``dense`` in the dtype ``output_dtype`` asks for, as nvmath-python's
    ``expand_block_scale`` gives them.

    ``'smallest'`` (and the format's raw dtype) give the scale entries themselves: ``float8_e4m3fn``
    for NVFP4 (uint8 bit patterns are viewed as it; packages without that dtype get float16, which
    holds every UE4M3 value), the ``uint8`` exponent bytes (UE8M0) for MXFP8. A float dtype gives the
    values (MXFP8: ``2**(x - 127)``, 255 is NaN).

    Raises:
        TypeError: an ``output_dtype`` not allowed for ``fmt``.
        ValueError: MXFP8 values that ``output_dtype`` cannot hold (too large or too small).
    """
    name = check_expand_dtype(output_dtype, fmt, pkg)
    raw = _arrays.dtype_name(dense)
    if fmt is BlockScalingFormat.NVFP4:
        if name in (None, _E4M3):
            if raw == _E4M3:
                return dense
            if pkg == "torch":
                return dense.view(_arrays.as_dtype("torch", _E4M3))
            if name == _E4M3:
                raise TypeError(f"{pkg} has no float8_e4m3fn dtype: choose float16, float32 or float64")
            name = "float16"
        return _arrays.astype(_nvfp4_values(dense, pkg), name)
    if raw == "float8_e8m0fnu":
        dense = dense.view(_arrays.as_dtype("torch", "uint8"))
    if name in (None, "uint8"):
        return dense
    k, nan, span = mxfp8_exponents(dense)
    if span is not None:
        low, high, _ = FLOAT_BITS[name]
        if not (low <= span[0] and span[1] <= high):
            raise ValueError(
                f"output_dtype {name} cannot hold the MXFP8 scales 2**{span[0]} .. 2**{span[1]}; "
                f"choose a wider dtype (float32 or float64)"
            )
    values = _arrays.elementwise_where(nan, float("nan"), _arrays.exact_pow2(k))
    return _arrays.astype(values, name)
