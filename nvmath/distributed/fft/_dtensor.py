"""torch DTensors into the distributed FFT: ``Shard(0)`` is ``Slab.X``, ``Shard(1)`` is ``Slab.Y``.

A DTensor on a one-dimensional device mesh of every rank, sharded on dimension 0 or 1, goes into
:func:`~nvmath.distributed.fft.fft` (and ``ifft``, ``rfft``, ``irfft``) or
:class:`~nvmath.distributed.fft.FFT`; the result is a DTensor sharded as the result lies (the
operand's dimension with ``options.redistribute=True``, the other one with ``False``), of the
result's global shape (the last axis halved plus one for R2C, restored for C2R).

Placements map through :mod:`nvmath.distributed.distribution._dtensor` (the matmul's mapping):
``torch.chunk``'s split and the Slab's must coincide, for the operand and the result, which is
checked on every rank before any GPU work (``ConvertDistributionError`` otherwise). ``Replicate``
and ``Partial`` operands, meshes of several dimensions and shards of other dimensions are refused, and
so is a DTensor that requires a gradient (no autograd through the FFT yet).

A DTensor's local tensor comes from torch's allocator, not the NVSHMEM symmetric heap that
cuFFTMp needs, and has no room for the in-place result: the local tensor is copied into a
symmetric operand (:func:`~nvmath.distributed.fft.allocate_operand`), transformed there, and the
result copied out into a new tensor of torch's allocator. The stateless functions allocate and
free that staging buffer per call (both collective; the cuFFTMp plan comes from the plan cache);
:class:`DTensorFFT` keeps it until :meth:`~DTensorFFT.free`. The copies run on torch's current
stream; with an explicit ``stream`` the host waits between the copies and the transform.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from nvmath._internal import streams
from nvmath._internal.options import check_or_create_options
from nvmath.distributed import _runtime, _symmetric
from nvmath.distributed.distribution import Slab
from nvmath.distributed.distribution._dtensor import (
    distribution_from_placements,
    is_dtensor,
    placement_spec,
    placements_for,
)
from nvmath.distributed.distribution._reshape_layout import c_strides

from ._allocate import allocate_operand
from ._checks import fft_layout
from ._options import FFTOptions
from ._planner import FFT, register_dtensor_class

__all__ = ["DTensorFFT", "DTensorProblem", "dtensor_problem", "run_stateless"]

_COMPLEX = ("complex64", "complex128")


@dataclasses.dataclass(frozen=True)
class DTensorProblem:
    """What a DTensor operand means to the distributed FFT (the same on every rank)."""

    partition: int  # 0: Slab.X (Shard(0)), 1: Slab.Y (Shard(1))
    global_shape: tuple[int, ...]
    local_shape: tuple[int, ...]
    dtype: str
    fft_type: str
    result_shape: tuple[int, ...]
    result_placements: tuple[Any, ...]

    @property
    def slab(self) -> Slab:
        return Slab.X if self.partition == 0 else Slab.Y


def _dtype_name(local: Any) -> str:
    return str(local.dtype).removeprefix("torch.")


def _fft_type(dtype: str, options: FFTOptions) -> str:
    if options.fft_type is not None:
        return options.fft_type
    return "C2C" if dtype in _COMPLEX else "R2C"


def _result_shape(shape: tuple[int, ...], fft_type: str, parity: str) -> tuple[int, ...]:
    last = shape[-1]
    if fft_type == "R2C":
        last = last // 2 + 1
    elif fft_type == "C2R":
        last = 2 * (last - 1) if parity == "even" else 2 * last - 1
    return (*shape[:-1], last)


def _shard_dim(x: Any) -> int:
    """The operand's shard dimension (0 or 1) on a 1-D mesh of every rank.

    Raises:
        ValueError: another mesh, a ``Replicate`` / ``Partial`` placement, another dimension.
    """
    _, nranks = _nranks()
    mesh = x.device_mesh
    if mesh.ndim != 1 or mesh.size() != nranks:
        raise ValueError(
            f"the distributed FFT takes DTensors on a 1-D device mesh of all {nranks} ranks; got a mesh of "
            f"shape {tuple(mesh.shape)}"
        )
    kind, dim = placement_spec(x.placements[0])
    if kind == "replicate":
        raise ValueError(
            "a Replicate() DTensor is not distributed: redistribute it to Shard(0) (Slab.X) or Shard(1) "
            "(Slab.Y) first, or transform its local tensor with nvmath.fft"
        )
    dim = int(dim) % len(x.shape)  # type: ignore[arg-type]
    if dim not in (0, 1):
        raise ValueError(
            f"Shard({dim}): the distributed FFT takes DTensors sharded on dimension 0 (Slab.X) or 1 (Slab.Y)"
        )
    return dim


def _grad_enabled() -> bool:
    import torch

    return torch.is_grad_enabled()


def _nranks() -> tuple[int, int]:
    group = _runtime.context().process_group
    return group.rank, group.nranks


def dtensor_problem(x: Any, options: FFTOptions, distribution: Any = None) -> DTensorProblem:
    """Check a DTensor operand and map it (local checks only: every rank reaches the same verdict).

    Raises:
        TypeError: not a DTensor.
        ValueError: see :func:`_shard_dim`; a ``distribution`` other than the placement's; a 1-D
            or 4-D operand.
        ConvertDistributionError: ``torch.chunk``'s split of the operand or of the result differs
            from the Slab's (uneven extents).
        NotImplementedError: the DTensor requires a gradient (grad mode on).
    """
    if not is_dtensor(x):
        raise TypeError(f"expected a torch DTensor, got {type(x).__name__}")
    if x.requires_grad and _grad_enabled():
        raise NotImplementedError(
            "autograd through the distributed FFT is not implemented: the result would carry no gradient; "
            "run it under torch.no_grad() or pass x.detach()"
        )
    shape = tuple(int(n) for n in x.shape)
    if len(shape) not in (2, 3):
        raise ValueError(f"the distributed FFT transforms 2-D and 3-D arrays; the DTensor's shape is {shape}")
    dim = _shard_dim(x)
    distribution_from_placements(x.placements, shape, kind="slab")  # the chunk split is the slab's
    if distribution is not None and fft_layout(distribution, len(shape)) != dim:
        raise ValueError(
            f"distribution={distribution!r} contradicts the DTensor's placement Shard({dim}) "
            f"({'Slab.X' if dim == 0 else 'Slab.Y'}); leave distribution out for DTensors"
        )
    local = x.to_local()
    dtype = _dtype_name(local)
    fft_type = _fft_type(dtype, options)
    result_shape = _result_shape(shape, fft_type, options.last_axis_parity)
    result_partition = dim if options.redistribute else 1 - dim
    placements = placements_for(Slab(result_partition, len(shape)), result_shape)
    return DTensorProblem(dim, shape, tuple(local.shape), dtype, fft_type, result_shape, placements)


def stage(problem: DTensorProblem, local: Any, logger: Any = None) -> Any:
    """A symmetric operand holding a copy of ``local`` (collective: the allocation)."""
    operand = allocate_operand(problem.local_shape, "torch", input_dtype=local.dtype,
                               distribution=problem.slab, fft_type=problem.fft_type,
                               logger=logger)  # fmt: skip
    operand.copy_(local)
    return operand


def as_dtensor(result: Any, like: Any, problem: DTensorProblem) -> Any:
    """A DTensor of ``result`` copied out of the symmetric buffer (dense, torch's allocator)."""
    import torch
    from torch.distributed.tensor import DTensor

    local = result.clone(memory_format=torch.contiguous_format)
    return DTensor.from_local(local, like.device_mesh, list(problem.result_placements), run_check=False,
                              shape=problem.result_shape, stride=c_strides(problem.result_shape))  # fmt: skip


def _current(device_id: int) -> Any:
    return streams.get_stream(None, device_id=device_id, package="torch")


def run_stateless(x: Any, distribution: Any, options: FFTOptions, stream: Any,
                  transform: Callable[[Any, Slab], Any]) -> Any:  # fmt: skip
    """One stateless FFT of a DTensor: stage, ``transform(operand, slab)`` (the cached path), copy
    out, free the staging buffer (collective)."""
    problem = dtensor_problem(x, options, distribution)
    device = _runtime.context().device_id
    operand = stage(problem, x.to_local())
    try:
        if stream is not None:  # the copy ran on torch's current stream; the transform runs on `stream`
            streams.synchronize(_current(device))
        result = transform(operand, problem.slab)
        if stream is not None:
            streams.synchronize(streams.get_stream(stream, device_id=device, package="torch"))
        out = as_dtensor(result, x, problem)
        streams.synchronize(_current(device))  # the copy-out is done before the buffer is freed
    finally:
        _symmetric.free_symmetric_memory(operand)
    return out


class DTensorFFT(FFT):
    """:class:`~nvmath.distributed.fft.FFT` of a DTensor (what ``FFT(dtensor)`` makes): a symmetric
    staging operand is allocated at construction and freed by :meth:`free` (both collective);
    :meth:`execute` copies the DTensor's local tensor in and returns the result as a new DTensor.
    ``distribution`` may be left out (it comes from the placement)."""

    def __init__(self, operand: Any, /, *, distribution: Any = None, options: Any = None, stream: Any = None):
        options = check_or_create_options(FFTOptions, options, "FFT options")
        problem = dtensor_problem(operand, options, distribution)
        staging = stage(problem, operand.to_local(), options.logger)
        try:
            super().__init__(staging, distribution=problem.slab, options=options, stream=stream)
        except BaseException:
            _symmetric.free_symmetric_memory(staging)  # the construction failed on every rank alike
            raise
        self._problem, self._staging, self._source = problem, staging, operand
        self._explicit_stream = stream is not None

    def execute(self, *, direction: Any = None, stream: Any = None, release_workspace: bool = False,
                sync_symmetric_memory: bool = True) -> Any:  # fmt: skip
        """Copy the DTensor's local tensor in, transform, and return the result as a new DTensor
        (arguments as :meth:`FFT.execute`)."""
        source = self._source
        if source is None or self._staging is None:  # the base class raises the lifecycle error
            return super().execute(direction=direction, stream=stream)
        explicit = self._explicit_stream or stream is not None
        self._staging.copy_(source.to_local())
        if explicit:
            streams.synchronize(_current(self._device))
        result = super().execute(direction=direction, stream=stream, release_workspace=release_workspace,
                                 sync_symmetric_memory=sync_symmetric_memory)  # fmt: skip
        if explicit:
            streams.synchronize(self._stream if stream is None else streams.get_stream(
                stream, device_id=self._device, package="torch"))  # fmt: skip
        return as_dtensor(result, source, self._problem)

    def reset_operand(self, operand: Any = None, *, distribution: Any = None, stream: Any = None) -> None:
        """Use another DTensor of the same placement, shapes and dtype (local checks only)."""
        if operand is None:
            self.release_operand()
            return
        problem = dtensor_problem(operand, self._options, distribution)
        if problem != self._problem:
            raise ValueError(
                f"the new DTensor operand ({problem}) differs from the planned one ({self._problem})"
            )
        self.reset_operand_unchecked(operand, stream=stream)

    def reset_operand_unchecked(self, operand: Any, *, distribution: Any = None, stream: Any = None) -> None:
        """:meth:`reset_operand` without the checks."""
        super().reset_operand_unchecked(self._staging, stream=stream)
        self._source = operand
        self._explicit_stream = self._explicit_stream or stream is not None

    def release_operand(self) -> None:
        """Drop the reference to the DTensor (the staging buffer stays until :meth:`free`)."""
        self._source = None
        super().release_operand()

    def free(self) -> None:
        """Free the plans and the staging buffer (collective; idempotent)."""
        staging, self._staging = getattr(self, "_staging", None), None
        try:
            super().free()
        finally:
            self._source = None
            if staging is not None:
                _symmetric.free_symmetric_memory(staging)


register_dtensor_class(DTensorFFT)
