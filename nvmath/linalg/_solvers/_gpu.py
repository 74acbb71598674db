"""GPU resources of the dense solvers: library handles, column-major working buffers, workspaces,
pointer arrays and ``info`` arrays, all owned by one :class:`GpuContext` per planned object.

Ownership and policy:

* cuSOLVER / cuBLAS handles are created once per (thread, device) and kept for the process (like
  torch's handle pool); a user ``options.handle`` is used as is and never destroyed.
* Everything else a plan allocates is registered with its context and released by
  :meth:`GpuContext.close` (idempotent; cleanup failures warn). Device memory comes from the operands'
  package allocator (or ``options.allocator``), pointer arrays are uploaded once per plan.
* Every call is queued on the context's current stream (:meth:`GpuContext.use_stream`); a stream
  change makes the new stream wait for the old one on the device, never on the host.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from nvmath._internal import devices, memory, streams
from nvmath._internal.streams import StreamHandle
from nvmath._internal.tensors import TensorAdapter
from nvmath.linalg._solvers._common import colmajor_strides

__all__ = [
    "GpuContext",
    "InfoArray",
    "WorkMatrix",
    "blas_handle",
    "data_type",
    "dn_function",
    "dn_handle",
    "prefix",
    "workspace_args",
]

logger = logging.getLogger(__name__)

_THREAD = threading.local()

_PREFIX = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}
_CUDA_TYPE = {"float32": 0, "float64": 1, "complex64": 4, "complex128": 5}  # cudaDataType


def prefix(dtype: str) -> str:
    """The BLAS/LAPACK type letter of a supported dtype (``s``, ``d``, ``c``, ``z``)."""
    return _PREFIX[dtype]


def data_type(dtype: str) -> int:
    """The ``cudaDataType`` of a supported dtype."""
    return _CUDA_TYPE[dtype]


def dn_function(dtype: str, name: str, complex_name: str | None = None) -> Any:
    """The cusolverDn binding ``<prefix(dtype)><name>`` (``<complex_name>`` for complex dtypes, if given)."""
    from nvmath.bindings import cusolverDn

    if complex_name is not None and dtype.startswith("complex"):
        name = complex_name
    return getattr(cusolverDn, f"{prefix(dtype)}{name}")


def workspace_args(g: Any) -> tuple[int, int, int, int]:
    """``(device ptr, device bytes, host ptr, host bytes)``: the workspace arguments of a 64-bit cuSOLVER
    call, from a plan's ``g.dws`` / ``g.dsize`` / ``g.hws`` / ``g.hsize`` (host ptr 0 without a host part).
    """
    return g.dws, g.dsize, (g.hws.ctypes.data if g.hsize else 0), g.hsize


def _handles() -> dict[tuple[str, int], int]:
    table = getattr(_THREAD, "handles", None)
    if table is None:
        table = _THREAD.handles = {}
    return table


def _thread_handle(key: str, library: str, label: str, device_id: int) -> int:
    """This thread's handle of ``nvmath.bindings.<library>`` on ``device_id`` (created on first use)."""
    table = _handles()
    handle = table.get((key, device_id))
    if handle is None:
        from nvmath import bindings

        with devices.device_ctx(device_id):
            handle = table[(key, device_id)] = getattr(bindings, library).create()
        logger.debug("created %s handle %#x on device %d", label, handle, device_id)
    return handle


def dn_handle(device_id: int) -> int:
    """This thread's cusolverDn handle on ``device_id`` (created on first use, kept for the process)."""
    return _thread_handle("dn", "cusolverDn", "cusolverDn", device_id)


def blas_handle(device_id: int) -> int:
    """This thread's cuBLAS handle on ``device_id`` (created on first use, kept for the process)."""
    return _thread_handle("blas", "cublas", "cuBLAS", device_id)


class WorkMatrix:
    """A batch of column-major matrices on the device: ``(*batch, rows, cols)``, C-ordered batch.

    Attributes:
        adapter: the tensor (of the operands' package) holding the memory.
        ptr: the address of matrix 0.
        rows, cols, ld: the matrix shape and leading dimension (``ld == rows``).
        stride: elements between consecutive matrices (``rows * cols``).
        count: the number of matrices.
        itemsize: bytes per element.
    """

    __slots__ = ("adapter", "cols", "count", "dtype", "itemsize", "ld", "ptr", "rows", "stride")

    def __init__(self, adapter: TensorAdapter, rows: int, cols: int, count: int):
        self.adapter = adapter
        self.ptr = int(adapter.data_ptr)
        self.rows, self.cols, self.ld = rows, cols, max(rows, 1)
        self.stride = rows * cols
        self.count = count
        self.itemsize = adapter.itemsize
        self.dtype = adapter.dtype

    def at(self, i: int) -> int:
        """The address of matrix ``i``."""
        return self.ptr + i * self.stride * self.itemsize


class InfoArray:
    """``count`` device ``int32`` status values (one per matrix), read back only on demand."""

    def __init__(self, ctx: GpuContext, count: int):
        self.count = count
        self.ptr = ctx.alloc(4 * count)
        self._ctx = ctx

    def at(self, i: int) -> int:
        """The address of value ``i``."""
        return self.ptr + 4 * i

    def zero(self) -> None:
        """Queue zeroing of the values on the context's stream."""
        self._ctx.memset(self.ptr, 4 * self.count)

    def read(self) -> np.ndarray:
        """Copy the values to the host (synchronizes the stream)."""
        host = np.empty(self.count, dtype=np.int32)
        self._ctx.download(host, self.ptr)
        return host


class GpuContext:
    """The GPU resources of one planned object (see the module docstring).

    Args:
        device_id: the device.
        package: the operands' package (decides the allocator).
        stream: the stream of the first calls.
        allocator: ``options.allocator`` (``None``: the package's).
        handle: ``options.handle`` (``None``: nvmath's per-thread cusolverDn handle).
    """

    def __init__(
        self,
        device_id: int,
        package: str,
        stream: StreamHandle,
        allocator: Any = None,
        handle: int | None = None,
    ):
        self.device_id = device_id
        self.package = package
        self.stream = stream
        self.allocator = allocator
        self._user_handle = handle
        self._dn: int | None = handle
        self._params: int | None = None
        self._closers: list[Callable[[], Any]] = []
        self._keep: list[Any] = []
        self.closed = False

    # ------------------------------------------------------------------ handles
    @property
    def user_handle(self) -> int | None:
        """``options.handle`` (``None``: nvmath's per-thread handles are used)."""
        return self._user_handle

    @property
    def dn(self) -> int:
        """The cusolverDn handle bound to the current stream (set by :meth:`use_stream`)."""
        if self._dn is None:
            self._dn = self._user_handle if self._user_handle is not None else dn_handle(self.device_id)
        return self._dn

    @property
    def params(self) -> int:
        """A ``cusolverDnParams_t`` owned by this context (64-bit API calls)."""
        if self._params is None:
            from nvmath.bindings import cusolverDn

            params = cusolverDn.create_params()
            self._params = params
            self._closers.append(lambda: cusolverDn.destroy_params(params))
        return self._params

    def use_stream(self, stream: StreamHandle) -> None:
        """Queue the next calls on ``stream``, ordered after everything queued on the previous one."""
        from nvmath.bindings import cusolverDn

        if stream.ptr != self.stream.ptr or stream.ctx != self.stream.ctx:
            streams.stream_wait(stream, self.stream)
            self.stream = stream
            if stream.mortal:  # never left bound without a done event (a failed call skips _finish_gpu)
                streams.mark_done(stream)
        # handles are per thread: look this thread's up on every call (a dict lookup)
        self._dn = self._user_handle if self._user_handle is not None else dn_handle(self.device_id)
        cusolverDn.set_stream(self._dn, stream.ptr)

    def bind_blas(self) -> int:
        """The cuBLAS handle bound to the current stream (handles are shared per thread)."""
        from nvmath.bindings import cublas

        handle = blas_handle(self.device_id)
        cublas.set_stream(handle, self.stream.ptr)
        return handle

    # ------------------------------------------------------------------ memory
    def alloc(self, nbytes: int) -> int:
        """Device memory kept until :meth:`close`; returns its address (0 for 0 bytes)."""
        if nbytes <= 0:
            return 0
        allocation = memory.allocate(
            int(nbytes),
            device_id=self.device_id,
            stream=self.stream,
            package=self.package,
            allocator=self.allocator,
        )
        self._closers.append(lambda: allocation.free(self.release_stream()))
        return allocation.ptr

    def host(self, nbytes: int) -> np.ndarray:
        """Host workspace kept until :meth:`close` (an empty array for 0 bytes)."""
        buf = np.empty(max(int(nbytes), 0), dtype=np.uint8)
        self._keep.append(buf)
        return buf

    def matrix(
        self,
        like: TensorAdapter,
        batch_shape: tuple[int, ...],
        rows: int,
        cols: int,
        dtype: str | None = None,
        shape: tuple[int, ...] | None = None,
    ) -> WorkMatrix:
        """A column-major working batch of the operands' package on the device (see :class:`WorkMatrix`).

        ``shape`` overrides the tensor's shape (``(n,)`` for one right-hand-side vector).
        """
        shape = (*batch_shape, rows, cols) if shape is None else tuple(shape)
        adapter = like.empty(
            shape,
            dtype or like.dtype,
            strides=colmajor_strides(shape),
            device_id=self.device_id,
            stream=self.stream,
        )
        self._keep.append(adapter)
        count = 1
        for n in batch_shape:
            count *= n
        return WorkMatrix(adapter, rows, cols, count)

    def vector(self, like: TensorAdapter, shape: tuple[int, ...], dtype: str) -> TensorAdapter:
        """A C-ordered device tensor of the operands' package (eigenvalues, pivots, tau)."""
        adapter = like.empty(tuple(shape), dtype, device_id=self.device_id, stream=self.stream)
        self._keep.append(adapter)
        return adapter

    def pointer_array(self, base: int, stride_bytes: int, count: int) -> int:
        """A device array of ``count`` pointers ``base + i * stride_bytes``, uploaded once."""
        host = base + stride_bytes * np.arange(count, dtype=np.uint64)
        ptr = self.alloc(8 * count)
        self.upload(ptr, host)
        return ptr

    def free_temp(self, allocation: memory.Allocation) -> None:
        """Free :meth:`temp` memory after the work queued so far on the (live) current stream.

        A mortal stream's free goes to the library stream (``streams.survivor``), after the stream's
        done event: recorded here, so that it follows this call's work, not an earlier call's.
        """
        if self.stream.mortal:
            streams.mark_done(self.stream)
        allocation.free(self.stream)

    def temp(self, nbytes: int) -> memory.Allocation:
        """Device memory for one call; the caller frees it with :meth:`free_temp` (stream-ordered)."""
        return memory.allocate(
            int(nbytes),
            device_id=self.device_id,
            stream=self.stream,
            package=self.package,
            allocator=self.allocator,
        )

    def temp_pointer_array(self, base: int, stride_bytes: int, count: int) -> memory.Allocation:
        """Like :meth:`pointer_array` but for one call (free it with :meth:`free_temp`)."""
        host = base + stride_bytes * np.arange(count, dtype=np.uint64)
        allocation = self.temp(8 * count)
        self.upload(allocation.ptr, host)
        return allocation

    def info(self, count: int) -> InfoArray:
        """A device ``info`` array of ``count`` values."""
        return InfoArray(self, count)

    # ------------------------------------------------------------------ copies
    def upload(self, dst: int, host: np.ndarray) -> None:
        """Queue a host-to-device copy (the host buffer may be reused on return)."""
        host = np.ascontiguousarray(host)
        drv = devices.driver()
        with streams.stream_ctx(self.stream):
            devices.check(
                drv.cuMemcpyHtoDAsync(dst, host.ctypes.data, host.nbytes, self.stream.ptr),
                "cuMemcpyHtoDAsync",
            )

    def download(self, host: np.ndarray, src: int) -> None:
        """Copy device memory into the contiguous ``host`` array and wait for it."""
        drv = devices.driver()
        with streams.stream_ctx(self.stream):
            devices.check(
                drv.cuMemcpyDtoHAsync(host.ctypes.data, src, host.nbytes, self.stream.ptr),
                "cuMemcpyDtoHAsync",
            )
        streams.synchronize(self.stream)

    def memcpy(self, dst: int, src: int, nbytes: int) -> None:
        """Queue a device-to-device copy."""
        drv = devices.driver()
        with streams.stream_ctx(self.stream):
            devices.check(drv.cuMemcpyDtoDAsync(dst, src, nbytes, self.stream.ptr), "cuMemcpyDtoDAsync")

    def memset(self, dst: int, nbytes: int) -> None:
        """Queue zeroing ``nbytes`` at ``dst``."""
        if nbytes:
            drv = devices.driver()
            with streams.stream_ctx(self.stream):
                devices.check(drv.cuMemsetD8Async(dst, 0, nbytes, self.stream.ptr), "cuMemsetD8Async")

    def synchronize(self) -> None:
        """Wait for everything queued on the current stream."""
        streams.synchronize(self.stream)

    # ------------------------------------------------------------------ streams that can vanish
    # A plan outlives the calls that used it: the caller may destroy their stream (a raw int, a
    # cuda.core stream, an external one) while the plan stays cached. Touching it afterwards (the
    # sync and frees of :meth:`close`) is undefined behaviour, a crash at worst. The planners record
    # a done event after their work on such ``mortal`` streams (``streams.mark_done``, see
    # ``SolverBase._finish_gpu``); late releases go to a stream that survives (``streams.survivor``).
    def release_stream(self) -> StreamHandle:
        """The stream to order releases on: the current one, or a survivor of a mortal one."""
        return streams.survivor(self.stream)

    # ------------------------------------------------------------------ release
    def defer(self, closer: Callable[[], Any]) -> None:
        """Run ``closer`` at :meth:`close` (library objects such as ``syevjInfo_t``)."""
        self._closers.append(closer)

    def close(self) -> None:
        """Wait for the stream, then release everything this context owns; idempotent, never raises."""
        if self.closed:
            return
        self.closed = True
        try:
            streams.synchronize(self.release_stream())  # never a destroyed stream
        except Exception as exc:  # noqa: BLE001 - cleanup failures warn
            warnings.warn(
                f"dense solver: synchronizing before release failed: {exc}", RuntimeWarning, stacklevel=2
            )
        closers, self._closers = self._closers, []
        for closer in reversed(closers):
            try:
                closer()
            except Exception as exc:  # noqa: BLE001
                warnings.warn(
                    f"dense solver: releasing a resource failed: {exc}", RuntimeWarning, stacklevel=2
                )
        self._keep.clear()
