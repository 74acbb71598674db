"""Cast-transpose kernels of the FP8 layers: one pass writes a tensor's FP8 copy in both orders.

cuBLASLt runs FP8 GEMMs on Hopper only with both operands contiguous along K ("TN"), so every tensor
that is a GEMM operand along its feature axis in one GEMM and along its token axis in another (the
input ``x``, the hidden ``h``, the gradients ``g`` and ``dz1``, the weights) is needed as ``q`` (R, C)
and ``q.T`` (C, R), both row-major. torch's strided copy of a 1-byte tensor (``q.T.contiguous()``)
runs far below the memory bandwidth; these kernels write both orders in the pass that quantizes:

* :func:`cast_transpose` -- a wide (bfloat16 / float16 / float32) row-major (R, C) tensor ``x``:
  ``q = fp8(x * s)`` in both orders, ``amax = max |x|`` and, when asked, the column sums of ``x`` in
  float32 (a bias gradient). With ``aux`` (the saved GELU pre-activation ``z``, same shape and dtype)
  the value quantized is ``v = round(x * gelu'(z))`` (tanh GELU, computed in float32 and rounded to
  ``x``'s dtype, as ``torch.ops.aten.gelu_backward`` returns it; ``aux`` may also be float16 for a
  bfloat16 ``x``, cuBLASLt's aux type over an FP8 D): the FP8 MLP block's
  dgelu-cast-transpose-dbias, reading fc2's dgrad output once. ``scale=None`` is an amax-only pass
  (current scaling needs the amax before the scale): nothing is written but the amax (and the sums).
  Without the sums it runs ``nvmath_amax``, a plain reduction over 16-byte vectors (no tiles, no
  shared tile, four vectors in flight per thread: the pass is a read of the tensor at the memory's
  bandwidth), where the tensor is 16-byte aligned (:func:`vector_amax_applies`).
* :func:`transpose` -- an FP8 (R, C) tensor to (C, R) (fc1's GEMM writes ``h`` in FP8 directly).
* :func:`current_update` -- current scaling's state update between the amax pass and the cast pass
  (new scale, history, ``found_inf``, the scale to dequantize by) as one one-thread launch instead of
  a dozen tiny torch operations, the same values; :func:`grouped_record` the grouped layers' update of
  every group's state (history push, scale, ``found_inf``) as one launch, :func:`grouped_scale` their
  current scaling's scales of every group.

The CUDA source is :mod:`._fp8_cast_source`. A launch is one C call of the compiled launcher
(:mod:`nvmath._internal.kernel_launch`: torch's stream, the arguments packed by their numpy types, the
device's primary context made current around ``cuLaunchKernel``) where the extension and the driver are
present, else cuda.core's ``launch`` (the pure-Python path); a launch either refuses switches the
kernels off for the process.

The kernels (NVRTC, :mod:`nvmath._internal.nvrtc`, compiled on first use per device) work on 64 x 64
tiles through shared memory, so that both the reads and the writes of either order coalesce: a block
of 32 x 8 threads reads a tile two columns per thread (one 4- or 8-byte load), writes ``q`` from
registers and ``q.T`` from the shared tile, two bytes per thread; in the plain pass the loads of the
block's next tile are issued before this tile's transposed stores and barriers
(:data:`~._fp8_cast_source.PREFETCH`), so that a block keeps reads in flight while it writes. A
block walks ``tile_rows / gridDim.y`` tiles of one column strip (:func:`grid`). The plain pass of
rows of whole 16-byte aligned 8-element vectors (:func:`vector_cast_applies`, the grouped one too)
runs the vectorized kernels instead (:mod:`._fp8_cast_vector_source`: 16-byte loads, 64 x 256 tiles,
the transposed tile written in 16-byte stores; :func:`vector_grid`): a block does four column strips'
work in the same row order, so every value below is the same bit for bit. The amax is one
``atomicMax`` per block (on the float bits of ``|v|``: they order as the values; a NaN wins) and the
column sums are one float32 row per block row (``partial``, (gridDim.y, C)), summed by torch
afterwards: deterministic for a shape. The conversion is ``cvt.rn.satfinite`` (round to nearest
even, finite values saturated, NaN kept) of the float32 product ``v * s``, as
:mod:`nvmath.linalg.advanced._aux_quantize`.

Everything else -- CPU tensors, odd sizes, misaligned or non-contiguous tensors, kernels that failed
to build (then :func:`available` is false for the process, logged once), or the kernels switched off
(:data:`ENABLED`, the environment variable ``NVMATH_FP8_FUSED_CAST=0``) -- runs the layers' former
ops: :func:`quantize_pair` quantizes with the scaling state's own ``quantize`` and transposes with
torch, and the FP8 MLP block runs fc2's dgrad with cuBLASLt's ``DGELU`` (:func:`in_use` is false).
:func:`torch_cast_transpose` is the kernels' arithmetic in torch ops.
:func:`emulate_partials` is the kernel's column-sum order in numpy (what the GPU tests compare
bit-exactly).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

import numpy as np
import torch

from nvmath._internal import caches
from nvmath.torch._fp8 import FP8_MAX, amax_of, quantize
from nvmath.torch._fp8_cast_source import PREFETCH
from nvmath.torch._fp8_cast_source import SOURCE as _SOURCE

__all__ = [
    "PREFETCH",
    "TILE",
    "CastResult",
    "available",
    "cast_transpose",
    "current_update",
    "emulate_partials",
    "grid",
    "grouped_record",
    "grouped_scale",
    "in_use",
    "quantize_pair",
    "torch_cast_transpose",
    "transpose",
    "vector_cast_applies",
    "vector_grid",
    "wgrad_dtype",
]

logger = logging.getLogger(__name__)

TILE = 64
"""Rows and columns of a tile (one block of :data:`THREADS` threads)."""
THREADS = (32, 8)
"""Threads of a block: 32 along the columns (two columns each), 8 along the rows (eight rows each)."""
TARGET_BLOCKS = 2048
"""About how many blocks a launch runs (each loops over tiles of its column strip)."""

ENABLED = os.environ.get("NVMATH_FP8_FUSED_CAST", "1").strip().lower() not in ("0", "false", "off", "no")
"""Whether the FP8 layers use these kernels (default on; ``NVMATH_FP8_FUSED_CAST=0`` in the
environment at import switches them off: the layers' former ops run instead)."""

VECTOR_AMAX = os.environ.get("NVMATH_FP8_VECTOR_AMAX", "1").strip().lower() not in ("0", "false", "off", "no")
"""Whether an amax-only pass (current scaling's first pass over a tensor) runs the vectorized
reduction ``nvmath_amax`` (16-byte loads, no tiles: the pass writes nothing) instead of the
cast-transpose kernel with null outputs; the same amax bits. ``NVMATH_FP8_VECTOR_AMAX=0`` in the
environment at import: the cast-transpose kernel's amax-only pass (to compare them)."""
VECTOR_CAST = os.environ.get("NVMATH_FP8_VECTOR_CAST", "1").strip().lower() not in ("0", "false", "off", "no")
"""Whether the plain cast-transpose (no DGELU, the grouped one too) runs the vectorized kernels
(``nvmath_cast_transpose_vec``: 16-byte loads, 64 x 256 tiles, 16-byte transposed stores;
:mod:`._fp8_cast_vector_source`) where they apply (:func:`vector_cast_applies`): the same bytes, amax
and partial sums bit for bit. ``NVMATH_FP8_VECTOR_CAST=0`` in the environment at import: the 64 x 64
kernels everywhere (to compare them)."""
VEC_COLS = 256
"""Columns of a tile of the vectorized cast-transpose (32 threads x 8)."""
AMAX_UNROLL = 4
"""16-byte vectors of ``x`` (and of the aux) each thread of the amax reduction loads before reducing."""
AMAX_BLOCKS = 1024
"""Most blocks an amax reduction launches (about what the GPU holds at once; the threads loop)."""

_WIDE = {torch.bfloat16: "nvmath_bf16", torch.float16: "nvmath_f16", torch.float32: "float"}
_E5M2 = {torch.float8_e4m3fn: 0, torch.float8_e5m2: 1}

_AUX = {torch.bfloat16: (None, torch.bfloat16, torch.float16), torch.float16: (None, torch.float16),
        torch.float32: (None, torch.float32)}  # fmt: skip
"""The aux dtypes each wide dtype takes (``None``: no aux, the plain cast-transpose)."""

_NAMES: dict[Any, str] = {
    (wide, fp8, aux): f"nvmath_cast_transpose<{ctype}, {_WIDE[aux or wide]}, {e5m2}, {int(aux is not None)}>"
    for wide, ctype in _WIDE.items()
    for fp8, e5m2 in _E5M2.items()
    for aux in _AUX[wide]
}
_NAMES.update({
    ("amax", wide, aux): f"nvmath_amax<{ctype}, {_WIDE[aux or wide]}, {int(aux is not None)}>"
    for wide, ctype in _WIDE.items()
    for aux in _AUX[wide]
})
_NAMES.update({
    ("grouped", wide, fp8): f"nvmath_cast_transpose_grouped<{ctype}, {ctype}, {e5m2}, 0>"
    for wide, ctype in _WIDE.items()
    for fp8, e5m2 in _E5M2.items()
})
_NAMES.update({
    (kind, wide, fp8): f"nvmath_cast_transpose{suffix}_vec<{ctype}, {e5m2}>"
    for kind, suffix in (("vector", ""), ("grouped_vector", "_grouped"))
    for wide, ctype in _WIDE.items()
    for fp8, e5m2 in _E5M2.items()
})
_NAMES.update({("grouped_amax", wide): f"nvmath_amax_grouped<{ctype}>" for wide, ctype in _WIDE.items()})
_NAMES["transpose"] = "nvmath_fp8_transpose"
_NAMES["grouped_record"] = "nvmath_grouped_record"
_NAMES["grouped_scale"] = "nvmath_grouped_scale"
_NAMES["current_scale"] = "nvmath_current_scale"
_broken: list[str] = []
MAX_GRID_Y = 65535


@dataclasses.dataclass
class CastResult:
    """What :func:`cast_transpose` returns: ``q`` (R, C) and ``qt`` (C, R) (``None`` after an amax-only
    pass), ``amax`` (float32, shape ()), ``colsum`` (float32 (C,) column sums of the values, or
    ``None``)."""

    q: torch.Tensor | None
    qt: torch.Tensor | None
    amax: torch.Tensor
    colsum: torch.Tensor | None


def grid(rows: int, cols: int) -> tuple[int, int]:
    """``(gridDim.x, gridDim.y)`` of a launch over a (rows, cols) tensor: one block column per 64-column
    strip; block rows so that the grid holds about :data:`TARGET_BLOCKS` blocks (each at least one
    tile, at most :data:`MAX_GRID_Y`)."""
    gx = -(-cols // TILE)
    tiles = -(-rows // TILE)
    gy = max(1, min(tiles, -(-TARGET_BLOCKS // max(gx, 1)), MAX_GRID_Y))
    return gx, gy


def tiles_of_block_row(rows: int, gy: int, by: int) -> list[int]:
    """The tile indices (along the rows) block row ``by`` of a ``gy``-row grid walks, in order."""
    return list(range(by, -(-rows // TILE), gy))


def _kernel_shape_ok(x: torch.Tensor) -> bool:
    if x.dim() != 2 or not x.is_contiguous() or x.numel() == 0:
        return False
    rows, cols = x.shape
    align = 2 * x.element_size()
    return rows % 2 == 0 and cols % 2 == 0 and x.data_ptr() % align == 0


def available(x: torch.Tensor, aux: torch.Tensor | None = None) -> bool:
    """Whether :func:`cast_transpose` runs ``x`` (and ``aux``) on the kernel: a contiguous, 2-D CUDA
    tensor of a wide dtype with even sizes, ``aux`` alike, and kernels that did not fail to build."""
    if not in_use() or not x.is_cuda or x.dtype not in _WIDE or not _kernel_shape_ok(x):
        return False
    if aux is None:
        return True
    alike = aux.dtype in _AUX[x.dtype] and aux.shape == x.shape and aux.device == x.device
    return alike and _kernel_shape_ok(aux)


_LOADED: dict[int, dict[Any, Any]] = {}
"""device id -> the kernels (a dictionary lookup per launch: the NVRTC cache's key is rebuilt and
hashed from the source and the names on every call, ~3 us)."""


def _kernels(device_id: int) -> dict[Any, Any] | None:
    loaded = _LOADED.get(device_id)
    if loaded is not None:
        return loaded
    from nvmath._internal import nvrtc

    try:
        what = "FP8 cast-transpose kernels"
        loaded = nvrtc.compiled_kernels(_SOURCE, _NAMES, device_id, what=what, logger=logger)
        _LOADED[device_id] = loaded
        return loaded
    except Exception as exc:  # noqa: BLE001 (NVRTC or the driver refused: the layers use torch's ops)
        _broken.append(repr(exc))
        logger.warning("FP8 cast-transpose kernels unavailable (%s); using torch operations instead", exc)
        return None


def _launch(
    x: torch.Tensor, kernel_key: Any, *args: Any, blocks: int | None = None, threads: tuple = THREADS
) -> bool:
    """Launch the kernel ``kernel_key`` over ``x``'s grid (:func:`grid`; ``blocks``: a 1-D grid of that
    many blocks instead) of ``threads`` blocks on torch's current stream; False when the kernels
    cannot be built or the launch is refused (then nothing ran, and the kernels are not used again in
    this process)."""
    device_id = x.device.index if x.device.index is not None else torch.cuda.current_device()
    gx, gy = grid(*x.shape) if blocks is None else (blocks, 1)
    key = (gx, gy, threads)
    dims = _DIMS.get(key)
    if dims is None:  # (made once per grid and block: a launch reuses it)
        dims = _DIMS.put(key, ((gx, gy, 1), (*threads, 1)))
    return _launch_on(device_id, kernel_key, dims, args)


_DIMS = caches.memo("nvmath.torch FP8 cast kernels: launch dimensions", 1024)
"""``(gx, gy, threads)`` or a 3-D grid -> the ``(grid, block)`` pair of a launch (made once each)."""

_LAUNCHER: tuple = ()
"""The modules ``(cuda.core, nvmath._internal.devices, nvmath._internal.streams)``, imported at the first
launch through cuda.core (not per launch; their functions looked up at each call)."""


def _launcher() -> tuple:
    global _LAUNCHER
    import importlib

    from nvmath._internal import devices, streams

    _LAUNCHER = (importlib.import_module("cuda.core"), devices, streams)
    return _LAUNCHER


_DIRECT: dict[int, tuple] = {}
"""device id -> ``(compiled launcher, primary context, {kernel key: kernel handle})`` (or ``(None,)``:
this device's launches go through cuda.core), made at the device's first launch."""


def _direct(device_id: int, kernels: dict) -> tuple:
    from nvmath._internal import kernel_launch

    launcher = kernel_launch.launcher()
    if launcher is None:
        made: tuple = (None,)
    else:
        from nvmath._internal import devices

        handles = {k: kernel_launch.kernel_handle(v) for k, v in kernels.items()}
        made = (launcher, devices.primary_context(device_id), handles)
    _DIRECT[device_id] = made
    return made


def _launch_on(device_id: int, kernel_key: Any, dims: tuple, args: tuple) -> bool:
    """One launch of the kernel ``kernel_key`` on the ``(grid, block)`` pair ``dims`` with ``args`` on
    torch's current stream of GPU ``device_id`` (:func:`_launch` and :func:`launch_grid`): by the
    compiled launcher (:mod:`nvmath._internal.kernel_launch`) where there is one, else by cuda.core;
    False when the kernels cannot be built or the launch is refused (nothing ran; the kernels are not
    used again in this process)."""
    kernels = _kernels(device_id)
    if kernels is None:
        return False
    direct = _DIRECT.get(device_id) or _direct(device_id, kernels)
    if direct[0] is not None:
        try:
            status = direct[0](direct[1], device_id, direct[2][kernel_key], dims[0], dims[1], args)
        except TypeError:  # (an argument of a type the launcher does not pack: cuda.core packs it)
            pass
        else:
            if status == 0:
                return True
            from nvmath._internal.kernel_launch import describe_status

            return _refused(describe_status(status))
    core, devices, streams = _LAUNCHER or _launcher()
    stream = streams.current_stream(device_id, "torch")
    from nvmath._internal.kernel_launch import core_config

    try:
        # the launch needs the device's context current: torch's autograd thread need not have one
        with devices.device_ctx(device_id):
            core.launch(stream.core, core_config(dims), kernels[kernel_key], *args)
    except Exception as exc:  # noqa: BLE001 (a refused launch: the layers' former ops from now on)
        return _refused(repr(exc))
    return True


def _refused(why: str) -> bool:
    """A refused launch: logged, and the kernels are not used again in this process; False."""
    _broken.append(why)
    logger.warning("FP8 cast-transpose launch failed (%s); using torch operations instead", why)
    return False


def _ptr(t: torch.Tensor | None) -> Any:
    return np.uintp(0 if t is None else t.data_ptr())


def cast_transpose(
    x: torch.Tensor, scale: torch.Tensor | None, dtype: torch.dtype, *, aux: torch.Tensor | None = None,
    colsum: bool = False,
) -> CastResult:  # fmt: skip
    """Quantize the (R, C) tensor ``x`` (or ``round(x * gelu'(aux))``) to ``dtype`` with ``scale`` in
    both orders, with its amax and, with ``colsum``, its column sums (see the module docstring).
    ``scale=None``: the amax (and the sums) only."""
    if not available(x, aux):
        return torch_cast_transpose(x, scale, dtype, aux=aux, colsum=colsum)
    if scale is None and not colsum and vector_amax_applies(x, aux):
        return _vector_amax(x, aux, dtype)
    rows, cols = x.shape
    amax = torch.zeros(1, dtype=torch.float32, device=x.device)
    q = qt = partial = None
    if scale is not None:
        q = torch.empty((rows, cols), dtype=dtype, device=x.device)
        qt = torch.empty((cols, rows), dtype=dtype, device=x.device)
        scale = scale.reshape(1).to(torch.float32).contiguous()
    if colsum:
        partial = torch.empty((grid(rows, cols)[1], cols), dtype=torch.float32, device=x.device)
    args = (_ptr(x), _ptr(aux), _ptr(q), _ptr(qt), _ptr(scale), _ptr(amax), _ptr(partial),
            np.int64(rows), np.int64(cols))  # fmt: skip
    if aux is None and vector_cast_applies(x):
        done = launch_grid(x.device, ("vector", x.dtype, dtype), (*vector_grid(rows, cols, colsum), 1), args)
    else:
        done = _launch(x, (x.dtype, dtype, None if aux is None else aux.dtype), *args)
    if not done:
        return torch_cast_transpose(x, scale, dtype, aux=aux, colsum=colsum)
    sums = partial.sum(0) if partial is not None else None
    return CastResult(q, qt, amax[0], sums)


def vector_cast_applies(x: torch.Tensor) -> bool:
    """Whether the plain cast-transpose of ``x`` (already :func:`available`; the grouped one of its
    row groups too) runs the vectorized kernel: :data:`VECTOR_CAST` on, whole 8-element row vectors
    (``cols % 8 == 0``) and ``x`` 16-byte aligned (then every row, and every group's first row, is)."""
    return VECTOR_CAST and x.shape[-1] % 8 == 0 and x.data_ptr() % 16 == 0


def vector_grid(rows: int, cols: int, sums: bool = True) -> tuple[int, int]:
    """``(gridDim.x, gridDim.y)`` of the vectorized cast-transpose: one block column per
    :data:`VEC_COLS` columns; with the column ``sums`` the block rows of :func:`grid` (the partial
    sums keep its layout and order), else one per 64-row tile (at most :data:`MAX_GRID_Y`): a
    quarter of grid()'s blocks doing four tiles each would leave a partial last wave at three
    resident blocks per SM."""
    gy = grid(rows, cols)[1] if sums else max(1, min(-(-rows // TILE), MAX_GRID_Y))
    return -(-cols // VEC_COLS), gy


def vector_amax_applies(x: torch.Tensor, aux: torch.Tensor | None) -> bool:
    """Whether an amax-only pass over ``x`` (and ``aux``), both already :func:`available`, runs the
    vectorized reduction (:data:`VECTOR_AMAX` on; 16-byte aligned; a whole number of 16-byte vectors)."""
    if not VECTOR_AMAX or x.data_ptr() % 16 or x.numel() % (16 // x.element_size()):
        return False
    return aux is None or aux.data_ptr() % 16 == 0


def amax_blocks(numel: int, element_size: int) -> int:
    """Blocks of the vectorized amax launch: enough for one round of :data:`AMAX_UNROLL` 16-byte
    vectors per thread, at most :data:`AMAX_BLOCKS` (the threads then loop, grid-stride)."""
    vectors = numel // (16 // element_size)
    per_block = THREADS[0] * THREADS[1] * AMAX_UNROLL
    return max(1, min(-(-vectors // per_block), AMAX_BLOCKS))


def _vector_amax(x: torch.Tensor, aux: torch.Tensor | None, dtype: torch.dtype) -> CastResult:
    """The amax-only pass by the vectorized reduction (the cast-transpose's torch path where it fails)."""
    amax = torch.zeros(1, dtype=torch.float32, device=x.device)
    key = ("amax", x.dtype, None if aux is None else aux.dtype)
    blocks = amax_blocks(x.numel(), x.element_size())
    if not _launch(x, key, _ptr(x), _ptr(aux), _ptr(amax), np.int64(x.numel()), blocks=blocks):
        return torch_cast_transpose(x, None, dtype, aux=aux)
    return CastResult(None, None, amax[0], None)


def torch_cast_transpose(
    x: torch.Tensor, scale: torch.Tensor | None, dtype: torch.dtype, *, aux: torch.Tensor | None = None,
    colsum: bool = False,
) -> CastResult:  # fmt: skip
    """:func:`cast_transpose` through torch's ops (the kernels' semantics; a non-finite amax makes the
    whole ``q`` NaN here, as :func:`._fp8.quantize` does, where the kernel saturates)."""
    v = _torch_values(x, aux)
    amax = amax_of(v)
    sums = v.float().sum(0) if colsum else None
    if scale is None:
        return CastResult(None, None, amax, sums)
    q = quantize(v, scale, dtype, amax)
    return CastResult(q, q.T.contiguous(), amax, sums)


def _torch_values(x: torch.Tensor, aux: torch.Tensor | None) -> torch.Tensor:
    """The values the kernel quantizes, by torch: ``x``, or ``gelu_backward(x, aux)`` in ``x``'s dtype."""
    if aux is None:
        return x
    if aux.dtype == x.dtype:
        return torch.ops.aten.gelu_backward(x, aux, approximate="tanh")
    # (the kernel reads each in its own dtype and rounds the float32 result once)
    return torch.ops.aten.gelu_backward(x.float(), aux.float(), approximate="tanh").to(x.dtype)


def transpose(q: torch.Tensor) -> torch.Tensor:
    """``q.T.contiguous()`` of an FP8 (R, C) tensor (the transpose kernel on CUDA where it applies)."""
    if not (q.is_cuda and q.dtype in FP8_MAX and in_use() and _kernel_shape_ok(q)):
        return q.T.contiguous()
    rows, cols = q.shape
    out = torch.empty((cols, rows), dtype=q.dtype, device=q.device)
    if not _launch(q, "transpose", _ptr(q), _ptr(out), np.int64(rows), np.int64(cols)):
        return q.T.contiguous()
    return out


def current_update(
    amax: torch.Tensor, scale: torch.Tensor, hist: torch.Tensor, found_inf: torch.Tensor, fp8_max: float,
    margin: int,
) -> torch.Tensor | None:  # fmt: skip
    """Current scaling's state update after an amax pass as one kernel launch: ``scale`` (a role's
    element of the state's scale) becomes :func:`._fp8.scale_from_amax` of ``amax``, a finite amax is
    written to ``hist`` (the role's single history element), a non-finite one adds 1 to ``found_inf``
    (the role's flag); returns the scale the GEMM dequantizes by (NaN for a non-finite amax). The
    values of ScalingState's lean torch sequence, bit for bit (NaN payloads aside). ``None`` (nothing
    done) where the kernel does not apply: a CPU state, or the kernels not in use."""
    if not (amax.is_cuda and scale.is_cuda and in_use()):
        return None
    used = torch.empty((), dtype=torch.float32, device=scale.device)
    args = (_ptr(amax), _ptr(scale), _ptr(hist), _ptr(found_inf), _ptr(used), np.float32(fp8_max),
            np.float32(2.0**margin))  # fmt: skip
    if not _launch(scale, "current_scale", *args, blocks=1, threads=(1, 1)):
        return None
    return used


def emulate_partials(v: np.ndarray, gy: int | None = None) -> np.ndarray:
    """The kernel's ``partial`` (gridDim.y, C) for the float32 values ``v`` (R, C): thread (tx, ty) of
    block row ``by`` adds its rows in order (tiles of :func:`tiles_of_block_row`, rows ``ty + 8 k``
    of each), then the block adds the eight threads' sums of a column in ``ty`` order. ``gy``: the
    grid's block rows (default: :func:`grid`'s)."""
    v = np.asarray(v, dtype=np.float32)
    rows, cols = v.shape
    gy = grid(rows, cols)[1] if gy is None else gy
    partial = np.zeros((gy, cols), dtype=np.float32)
    for by in range(gy):
        sums = np.zeros((8, cols), dtype=np.float32)
        for t in tiles_of_block_row(rows, gy, by):
            for k in range(8):
                for ty in range(8):
                    r = t * TILE + ty + 8 * k
                    if r < rows:
                        sums[ty] += v[r]
        acc = sums[0].copy()
        for j in range(1, 8):
            acc += sums[j]
        partial[by] = acc
    return partial


def quantize_pair(
    state: Any, x: torch.Tensor, role: str, *, aux: torch.Tensor | None = None, colsum: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:  # fmt: skip
    """``(q, q.T contiguous, scale, column sums or None)`` of ``x`` (or of ``round(x * gelu'(aux))``)
    quantized as ``role`` under ``state`` (a :class:`._fp8.ScalingState`, updated as by its
    ``quantize``): one :func:`cast_transpose` pass (two under current scaling, the first amax-only);
    where the kernel does not apply (:func:`available`), the state's ``quantize`` of the values and
    torch's transpose and sum (the layers' former ops)."""
    dtype = state.dtype(role)
    if not available(x, aux):
        v = _torch_values(x, aux)
        q, scale = state.quantize(v.contiguous(), role)
        return q, q.T.contiguous(), scale, (v.float().sum(0) if colsum else None)

    def run(scale: torch.Tensor | None) -> tuple[CastResult, torch.Tensor]:
        r = cast_transpose(x.detach(), scale, dtype, aux=aux, colsum=colsum and scale is not None)
        return r, r.amax

    r, scale = state.quantize_by(role, run, finish=current_update)
    return r.q, r.qt, scale, r.colsum


def in_use() -> bool:
    """Whether the layers use the kernels: :data:`ENABLED` and the kernels did not fail to build in
    this process (otherwise the layers' former ops run)."""
    return ENABLED and not _broken


def broken() -> bool:
    """Whether the kernels failed to build in this process."""
    return bool(_broken)


def wgrad_dtype(weight_dtype: torch.dtype) -> torch.dtype:
    """The result dtype of a weight-gradient GEMM: the weight's (the accumulator rounded once) with
    the kernels in use, else float32 (then cast to the weight's dtype: the layers' former path)."""
    return weight_dtype if ENABLED else torch.float32


def launch_grid(device: torch.device, kernel_key: Any, shape: tuple[int, int, int], args: tuple) -> bool:
    """Launch the kernel ``kernel_key`` once over a ``shape`` grid of :data:`THREADS` blocks on torch's
    current stream with ``args`` (addresses as ``np.uintp``, sizes as ``np.int64``): the grouped
    cast-transpose (``("grouped", wide, fp8)``), whose blocks find their group from ``blockIdx.z``.
    False when the kernels are not in use or cannot be built, or the launch is refused (nothing ran;
    the kernels are not used again in this process)."""
    if not in_use():
        return False
    device_id = device.index if device.index is not None else torch.cuda.current_device()
    dims = _DIMS.get(shape)
    if dims is None:
        dims = _DIMS.put(shape, (tuple(shape), (*THREADS, 1)))
    return _launch_on(device_id, kernel_key, dims, args)


def grouped_record(
    amax: torch.Tensor, used: torch.Tensor, active: torch.Tensor | None, active_rows: int, hist: torch.Tensor,
    scale: torch.Tensor, found_inf: torch.Tensor, delayed: bool, use_max: bool, fp8_max: float, margin: int,
    out: torch.Tensor | None = None,
) -> torch.Tensor | None:  # fmt: skip
    """The grouped scaling state's update of ``R`` adjacent roles of ``G`` groups
    (:meth:`~._grouped_fp8_state.GroupedScalingState.record`) as one launch of ``nvmath_grouped_record``
    (one block per role and group; see the source): ``amax``, ``used`` (R, G) float32; ``active`` (G,)
    bool, the groups that ran, for the first ``active_rows`` roles (``None``: all ran); ``hist`` the
    first role's (L, G) column of the state's (L, 3, G) history, ``scale``, ``found_inf`` its (G,) rows
    of the state's (3, G) tensors (all updated in place). Returns ``out`` (R, G): ``1 / used`` (the
    dequantization scales), NaN where an amax is not finite (``out`` given: a contiguous (R, G) float32
    tensor it is written into, e.g. rows of a step's scratch; else a new one); ``None`` (nothing done)
    where the kernel does not apply (CPU tensors, the kernels not in use)."""
    if not (amax.is_cuda and in_use()):
        return None
    rows, groups = amax.shape
    amax, used = amax.contiguous(), used.contiguous()
    if out is None:
        out = torch.empty((rows, groups), dtype=torch.float32, device=amax.device)
    args = (_ptr(amax), _ptr(used), _ptr(active), np.int32(active_rows), _ptr(hist), _ptr(scale),
            _ptr(found_inf), _ptr(out), np.int64(groups), np.int64(hist.shape[0]), np.int64(hist.stride(0)),
            np.int32(delayed), np.int32(use_max), np.float32(fp8_max), np.float32(2.0**margin))  # fmt: skip
    if not _launch(amax, "grouped_record", *args, blocks=rows * groups):
        return None
    return out


def grouped_scale(
    amax: torch.Tensor, scale: torch.Tensor, fp8_max: float, margin: int, out: torch.Tensor | None = None
) -> torch.Tensor | None:
    """Current scaling's (G,) scales from the groups' amaxes ``amax`` (G,) float32 and the state's
    scales ``scale`` (G,) (kept where an amax is 0 or not finite) as one launch of
    ``nvmath_grouped_scale``: :func:`._fp8.scale_from_amax`'s values (into ``out``, a contiguous (G,)
    float32 tensor, where given); ``None`` (nothing done) where the kernel does not apply."""
    if not (amax.is_cuda and in_use()):
        return None
    n = amax.numel()
    if out is None:
        out = torch.empty(n, dtype=torch.float32, device=amax.device)
    args = (_ptr(amax.contiguous()), _ptr(scale), _ptr(out), np.int64(n), np.float32(fp8_max),
            np.float32(2.0**margin))  # fmt: skip
    blocks = -(-n // (THREADS[0] * THREADS[1]))
    if not _launch(amax, "grouped_scale", *args, blocks=blocks):
        return None
    return out
