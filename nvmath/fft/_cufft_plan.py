"""RAII cuFFT plans: the handles of one transform's steps, their shared workspace, stream binding.

Sequence per step (cuFFT's documented order): ``cufftCreate`` -> ``cufftSetAutoAllocation(0)`` ->
``cufftXtSetJITCallback`` (prolog on the first step, epilog on the last) -> ``cufftXtMakePlanMany``
(64-bit sizes and strides, ``cudaDataType`` in/out/execution types). The steps run one after the
other on one stream, so they share one workspace, the largest they need, allocated on first
execution from the operand package's allocator (or ``options.allocator``) and registered with
``cufftSetWorkArea``. The stream is bound with ``cufftSetStream`` only when it changes; a new
stream first waits for the previous one, so internal buffers are never raced.

:meth:`CufftPlan.launch` is the hot path of a transform without staging: once a single-launch plan
runs steadily on a stream (bound, workspace bound, no done event to record), one compiled call makes the
stream's context current only if another one is, launches ``cufftXtExec`` and restores the context
(``fft_exec_in_context`` in ``nvmath/_fastcall.c``); otherwise, and on the pure-Python path, it is
:meth:`CufftPlan.run` inside :func:`~nvmath._internal.streams.stream_ctx`. Both launch the same call.
The planner's compiled hit (``FFTHit`` of ``nvmath._fastcall``, :meth:`CufftPlan.attach_hit`) makes that
same one-call launch, with the result allocation, in one C call: the plan arms it with the launch and the
bound stream exactly while the launch is valid, and disarms it otherwise.

A failing constructor destroys whatever it created; :meth:`CufftPlan.close` is idempotent and runs
at garbage collection too; a failing ``cufftDestroy`` warns, it never raises.
"""

from __future__ import annotations

import ctypes
import logging
import weakref
from typing import Any

from nvmath._errors import warn_cleanup_failure
from nvmath._internal import devices, dtypes, fastpath, streams
from nvmath._internal.memory import Workspace
from nvmath._internal.options import freeze_options
from nvmath._internal.streams import StreamHandle
from nvmath.fft._callbacks import CallbackPlanError, DeviceCallable, callback_symbol, find_symbol
from nvmath.fft._layout import CufftStep
from nvmath.fft._traits import FFTTraits

__all__ = [
    "LTO_MIN_VERSION", "CufftPlan", "compiled_hit", "cufft_info", "launch_error", "one_call_launch",
    "step_dtypes", "workspace_size",
]  # fmt: skip

logger = logging.getLogger(__name__)

LTO_MIN_VERSION = (11, 3)
"""The first cuFFT with LTO callbacks (CUDA 12.6 Update 2)."""

_LOAD = {
    "float32": "LD_REAL",
    "float64": "LD_REAL_DOUBLE",
    "complex64": "LD_COMPLEX",
    "complex128": "LD_COMPLEX_DOUBLE",
}
_STORE = {k: "ST" + v[2:] for k, v in _LOAD.items()}
_BUFFERS = ("operand", "result", "staging")
"""The buffers a step reads or writes, in the order :meth:`CufftPlan.run` takes their addresses."""


def _cufft() -> Any:
    from nvmath.bindings import cufft

    return cufft


def _unchecked_exec() -> Any:
    """The caller of ``cufftXtExec(handle, input, output, direction)``: compiled when the path is active
    (``nvmath._internal.fastpath``), else the unchecked binding (``nvmath.bindings._unchecked.cufft``:
    no per-call range check). Its arguments are valid by construction: the plan handles come from
    ``cufftCreate``, the addresses are the buffers' (tensor adapters or our allocations) plus byte
    offsets computed at plan time, the direction is an ``int`` of a validated
    :class:`~nvmath.fft.FFTDirection`. It is the only caller of ``cufftXtExec`` (through
    :meth:`CufftPlan.run`)."""
    from nvmath.bindings._unchecked import cufft as unchecked
    from nvmath.bindings.cufft import cuFFTError

    return fastpath.bound_caller(
        "cufft", "cufftXtExec", (0, 0, 0, 0), (0, 1, 2, 3), error=cuFFTError,
        pure=lambda: unchecked.xt_exec,
    )  # fmt: skip


_DRIVER_FAILED = 0x10000  # nvmath._fastcall.FFT_LAUNCH_DRIVER_FAILED
_CONTEXT_CALLS: list[tuple[int, int] | None] = []  # [(cuCtxGetCurrent, cuCtxSetCurrent) addresses or None]


def launch_error(status: int) -> Exception:
    """The error of a failed one-call launch (``fft_exec_in_context``): a ``cuFFTError`` with
    cufftXtExec's status, or a ``RuntimeError`` naming the context call the driver refused."""
    if status & _DRIVER_FAILED:
        return RuntimeError(
            f"CUDA driver call cuCtxGetCurrent / cuCtxSetCurrent around cufftXtExec failed: status "
            f"{status & (_DRIVER_FAILED - 1)}"
        )
    from nvmath.bindings.cufft import cuFFTError

    return cuFFTError(status)


class _LaunchFailure(Exception):
    """The ``error`` class of the compiled one-call launch: calling it with the status gives
    :func:`launch_error`'s exception (that is what gets raised)."""

    def __new__(cls, status: int) -> Exception:  # type: ignore[misc]
        return launch_error(status)


def _context_calls() -> tuple[int, int] | None:
    """The driver's ``cuCtxGetCurrent`` / ``cuCtxSetCurrent`` addresses (looked up once), or ``None``
    without a driver library."""
    if not _CONTEXT_CALLS:
        try:
            found: tuple[int, int] | None = (
                fastpath.driver_symbol_address("cuCtxGetCurrent"),
                fastpath.driver_symbol_address("cuCtxSetCurrent"),
            )
        except Exception as exc:  # noqa: BLE001 - no driver library: the Python launch
            logger.debug("FFT launches keep the Python context switch: %s", exc)
            found = None
        _CONTEXT_CALLS.append(found)
    return _CONTEXT_CALLS[0]


def one_call_launch(ctx: int, handle: int) -> Any:
    """The compiled ``fft_exec_in_context`` of plan ``handle`` in context ``ctx`` (``(input, output,
    direction)`` per call), or ``None`` where it cannot be made: the compiled path is off, the cuFFT
    binding calls a Python function (a test's fake) or there is no driver library."""
    if not fastpath.available():
        return None
    exec_address = fastpath.bound_address("cufft", "cufftXtExec")
    calls = _context_calls() if exec_address is not None else None
    if calls is None:
        return None
    from nvmath import _fastcall

    return fastpath.make_caller(
        _fastcall.fft_exec_in_context_address(), (*calls, exec_address, ctx, handle, 0, 0, 0), (5, 6, 7),
        error=_LaunchFailure,
    )  # fmt: skip


def compiled_hit(
    raw: Any, device_id: int, result: tuple[Any, tuple, tuple], directions: tuple, fallback: Any
) -> Any:  # fmt: skip
    """The compiled hit of a planned FFT with results made by torch (``nvmath._fastcall.FFTHit``): a call
    on torch's current stream in an allowed direction in one C call -- ``result`` = ``(new, shape,
    strides)`` (``new(shape, strides)`` makes the result), ``directions`` the allowed
    :class:`FFTDirection` members with their ``int``, the default first -- and every other call
    ``fallback``'s (the Python hit); ``None`` where the compiled path is off. It serves calls only while
    a plan armed it (:meth:`CufftPlan.attach_hit`)."""
    if not fastpath.available():
        return None
    from nvmath import _fastcall

    maker = getattr(_fastcall, "FFTHit", None)
    if maker is None:  # pragma: no cover - an extension built before FFTHit
        return None
    new, shape, strides = result
    (default, value), other = directions[0], directions[1:]
    more = {"other": other[0][0], "other_value": other[0][1]} if other else {}
    return maker(raw, device_id, new, shape, strides, default, value, fallback, **more)


def cufft_info() -> dict[str, Any]:
    """``{"version", "path", ...}`` of the loaded cuFFT (loads it)."""
    from nvmath.bindings._loader import library_info

    return library_info("cufft")


def step_dtypes(traits: FFTTraits, step: CufftStep) -> tuple[str, str]:
    """The (input, output) dtypes of ``step``."""
    if traits.fft_type == "R2C":
        real, cplx = traits.operand_dtype, traits.result_dtype
    elif traits.fft_type == "C2R":
        real, cplx = traits.result_dtype, traits.operand_dtype
    else:
        real = cplx = traits.operand_dtype
    return {"C2C": (cplx, cplx), "R2C": (real, cplx), "C2R": (cplx, real)}[step.kind]


def _plan_args(traits: FFTTraits, step: CufftStep) -> tuple:
    itype, otype = step_dtypes(traits, step)
    exec_type = otype if step.kind == "R2C" else itype
    rank, n, inembed, istride, idist, onembed, ostride, odist, batch = step.plan_args()
    return (
        rank, list(n), list(inembed), istride, idist, dtypes.cuda_data_type(itype),
        list(onembed), ostride, odist, dtypes.cuda_data_type(otype), batch, dtypes.cuda_data_type(exec_type),
    )  # fmt: skip


def _destroy(handles: list[int]) -> None:
    cufft = _cufft()
    while handles:
        handle = handles.pop()
        try:
            cufft.destroy(handle)
        except Exception as exc:  # noqa: BLE001 - cleanup failures warn, never raise
            warn_cleanup_failure(f"cufftDestroy({handle})", exc)


def _check_lto_support() -> dict[str, Any]:
    info = cufft_info()
    try:
        version = tuple(int(p) for p in str(info["version"]).split(".")[:2])
    except ValueError:
        version = (0, 0)
    if version < LTO_MIN_VERSION:
        raise RuntimeError(
            f"FFT callbacks need cuFFT >= {LTO_MIN_VERSION[0]}.{LTO_MIN_VERSION[1]} (LTO callbacks); the loaded "
            f"cuFFT is {info['version']} from {info['path']}"
        )
    return info


def _callback_error(attached: list[tuple[str, str | None, str]], exc: BaseException) -> RuntimeError:
    """The error for cuFFT refusing the callbacks ``attached`` ((kind, symbol name, dtype) each)."""
    info = cufft_info()
    shown = "; ".join(
        f"the {kind} on {dtype} elements, linked as "
        + (callback_symbol(kind, dtype) if symbol is None else f"{symbol!r} (a C++ function cuFFT declares)")
        for kind, symbol, dtype in attached
    )
    return RuntimeError(
        f"cuFFT {info['version']} ({info['path']}) refused the LTO callback(s) ({shown}): {exc}. The LTO-IR "
        "must define that function with cuFFT's callback signature (compile_prolog / compile_epilog with "
        "the element dtype of the operand / result do) for this GPU's architecture; LTO callbacks also need "
        "an nvJitLink of the same CUDA major version as cuFFT, at least as new"
    )


_LEGACY_SET_JIT: dict[str, Any] = {}


def _host_address(data: bytes | int, keep: list) -> int:
    """The address of LTO-IR given as ``bytes`` (kept alive in ``keep``) or already as an int address.

    The bindings take pointers as ints only (a ``bytes`` object is refused, never passed by address).
    """
    if isinstance(data, int):
        return data
    buffer = ctypes.c_char_p(data)  # points into the bytes object itself, no copy
    keep.append((data, buffer))
    return ctypes.cast(buffer, ctypes.c_void_p).value or 0


def _legacy_set_jit_callback(
    handle: int, symbol: str | None, callback: DeviceCallable, cb_type: int, caller_info: int
) -> None:
    """``cufftXtSetJITCallback`` of cuFFT 11.x (CUDA 12.6-12.9), whose exported symbol has no name argument.

    cuFFT 11.4 exports the named form as ``__cufftXtSetJITCallback_12_7`` (cufftXt.h maps the
    6-argument ``cufftXtSetJITCallback`` to it inline); cuFFT 11.3 has only the 5-argument form.
    """
    from nvmath.bindings import _loader

    library = _loader._library("cufft")
    tail = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)  # fatbin, size, type, info
    if symbol is None:
        name, argtypes = "cufftXtSetJITCallback", (ctypes.c_int, *tail)
        args: tuple = (handle, callback.ltoir, callback.size, cb_type, caller_info)
    else:
        name, argtypes = "__cufftXtSetJITCallback_12_7", (ctypes.c_int, ctypes.c_char_p, *tail)
        args = (handle, symbol.encode(), callback.ltoir, callback.size, cb_type, caller_info)
    function = _LEGACY_SET_JIT.get(name)
    if function is None:
        function = _LEGACY_SET_JIT[name] = library.resolve(name, ctypes.c_int, argtypes, "cuFFT 11.4")
    status = function(*args)
    if status:
        raise _cufft().cuFFTError(status)


def _set_callback(
    handle: int, kind: str, callback: DeviceCallable, dtype: str, keep: list
) -> tuple[str, str | None, str]:
    """Attach a callback to a handle before its plan is made; return (kind, symbol name, dtype) for errors.

    The symbol name is ``None`` (NULL: cuFFT links its default mangled name, which our compiled
    callbacks define) unless ``callback.name`` names another C++ function.
    """
    cufft = _cufft()
    info = _check_lto_support()
    callback = freeze_options(callback)  # the validated snapshot (an FFT's already is): size set for bytes
    symbol = find_symbol(callback, kind, dtype)  # ValueError for a callback of another kind / dtype
    cell = ctypes.c_void_p(callback.data or None)  # caller_info: an array of one device pointer
    keep.append(cell)
    cb_type = getattr(cufft.XtCallbackType, (_LOAD if kind == "prolog" else _STORE)[dtype])
    try:
        major = int(str(info["version"]).split(".")[0])
    except ValueError:
        major = 12
    try:
        if major >= 12:
            cufft.xt_set_jit_callback(
                handle, symbol, _host_address(callback.ltoir, keep), callback.size, cb_type,
                ctypes.addressof(cell),
            )  # fmt: skip
        else:
            _legacy_set_jit_callback(handle, symbol, callback, int(cb_type), ctypes.addressof(cell))
    except Exception as exc:
        raise _callback_error([(kind, symbol, dtype)], exc) from exc
    return kind, symbol, dtype


class CufftPlan:
    """The cuFFT handles of one transform (one per step) and their workspace.

    Args:
        traits: the transform (``traits.steps`` non-empty).
        device_id: the device the plans run on.
        package: whose allocator provides the workspace ("torch", "cupy", anything else = cuda.core).
        allocator: an optional user memory manager for the workspace.
        prolog, epilog: optional LTO callbacks (the planner checks they apply).
    """

    _hit: Any = None  # attach_hit(): armed with the one-call launch whenever it is valid (none by default)

    def __init__(
        self,
        traits: FFTTraits,
        *,
        device_id: int,
        package: str,
        allocator: Any = None,
        prolog: DeviceCallable | None = None,
        epilog: DeviceCallable | None = None,
    ):
        cufft = _cufft()
        self.device_id = device_id
        self.handles: list[int] = []
        self._keep: list[Any] = []  # caller_info cells of the callbacks
        self._finalizer = weakref.finalize(self, _destroy, self.handles)
        sizes = []
        try:
            with devices.device_ctx(device_id):
                for i, step in enumerate(traits.steps):
                    handle = cufft.create()
                    self.handles.append(handle)
                    cufft.set_auto_allocation(handle, 0)
                    itype, otype = step_dtypes(traits, step)
                    attached = []
                    if i == 0 and prolog is not None:
                        attached.append(_set_callback(handle, "prolog", prolog, itype, self._keep))
                    if i == len(traits.steps) - 1 and epilog is not None:
                        attached.append(_set_callback(handle, "epilog", epilog, otype, self._keep))
                    try:
                        sizes.append(cufft.xt_make_plan_many(handle, *_plan_args(traits, step)))
                    except Exception as exc:
                        if not attached:
                            raise
                        if isinstance(exc, cufft.cuFFTError):  # e.g. CUFFT_NOT_SUPPORTED: keep the status
                            detail = str(_callback_error(attached, exc))
                            raise CallbackPlanError(exc.status, exc.status_name, detail) from exc
                        raise _callback_error(attached, exc) from exc
        except BaseException:
            self.close()
            raise
        self.workspace_size = max(sizes, default=0)
        self.workspace = Workspace(
            device_id=device_id, package=package, allocator=allocator, name="cuFFT workspace"
        )
        self._bound_workspace = 0
        self._stream: StreamHandle | None = None
        self._done_always = streams.done_after_every_call(False, package)
        self._launches = self._launch_table(traits)
        # one launch (most transforms): (handle, src index, dst index, input offset, output offset)
        first = self._launches[0]
        self._single = (*first[:3], *first[3][0]) if len(self._launches) == 1 and len(first[3]) == 1 else None
        self._xt_exec = _unchecked_exec()  # the hot path (see _unchecked_exec)
        # launch(): the compiled one-call launch on the bound stream (None: the Python launch), per context
        self._one_call: Any = None
        self._one_call_stream: StreamHandle | None = None
        self._one_call_by_ctx: dict[int, Any] = {}
        self._hit = None
        logger.debug(
            "cuFFT plans %s on device %d, workspace %d bytes", self.handles, device_id, self.workspace_size
        )

    def _launch_table(self, traits: FFTTraits) -> tuple:
        """``(handle, src index, dst index, byte offset pairs)`` per step; indices into ``_BUFFERS``."""
        table = []
        for handle, step in zip(self.handles, traits.steps):
            isz, osz = (dtypes.itemsize(d) for d in step_dtypes(traits, step))
            offsets = tuple((i * isz, o * osz) for i, o in step.offsets)
            table.append((handle, _BUFFERS.index(step.src), _BUFFERS.index(step.dst), offsets))
        return tuple(table)

    def bind(self, stream: StreamHandle) -> None:
        """Bind every handle (and the workspace) to ``stream``, after the previous stream's work."""
        cufft = _cufft()
        self._set_one_call(None, None)  # (launch() finds its launch again after a run)
        previous = self._stream
        if previous is not None:
            streams.stream_wait(stream, previous)
        for handle in self.handles:
            cufft.set_stream(handle, stream.ptr)
        self._stream = stream
        if stream.mortal:  # bound from now on: later waits use its event, even if execution fails
            streams.mark_done(stream)
        if self._bound_workspace:
            self.workspace.ensure(self.workspace_size, stream)

    def _bind_workspace(self, stream: StreamHandle) -> None:
        cufft = _cufft()
        ptr = self.workspace.ensure(self.workspace_size, stream)
        for handle in self.handles:
            cufft.set_work_area(handle, ptr)
        self._bound_workspace = ptr

    def execute(self, pointers: dict[str, int], direction: int, stream: StreamHandle) -> None:
        """Run every step on ``stream``; ``pointers`` maps buffer names to device addresses.

        The caller makes the plan's device (or the stream's context) current.
        """
        self.run(pointers["operand"], pointers["result"], pointers.get("staging", 0), int(direction), stream)

    def run(self, operand: int, result: int, staging: int, direction: int, stream: StreamHandle) -> None:
        """:meth:`execute` with the three buffer addresses and an ``int`` direction (the hot path)."""
        if stream is not self._stream:
            current = self._stream
            if current is None or stream.ptr != current.ptr:
                self.bind(stream)
            else:  # another handle of the bound raw stream (maybe a new stream reusing a destroyed one's
                streams.stream_wait(stream, current)  # handle: wait on the old one's done event, if any)
                self._stream = stream
        if not self._bound_workspace and self.workspace_size:
            self._bind_workspace(stream)
        single = self._single
        ptrs = (operand, result, staging)
        if single is not None:
            handle, src, dst, i, o = single
            self._xt_exec(handle, ptrs[src] + i, ptrs[dst] + o, direction)
        else:
            xt_exec = self._xt_exec
            for handle, src, dst, offsets in self._launches:
                src_ptr, dst_ptr = ptrs[src], ptrs[dst]
                for i, o in offsets:
                    xt_exec(handle, src_ptr + i, dst_ptr + o, direction)
        if stream.mortal and (self.workspace_size or staging or self._done_always):
            # the stream may be gone when the workspace is next bound or freed (a call that used no
            # workspace, staging buffer or output of our allocator leaves nothing of ours in flight);
            streams.record_done(stream)  # the caller made the stream's context current

    def launch(self, operand: int, result: int, direction: int, stream: StreamHandle) -> None:
        """:meth:`run` without staging, with ``stream``'s context made current around it (the caller
        holds none). Once the plan has run on ``stream`` (bound, workspace bound) and a call leaves
        nothing to record (see :meth:`run`), a single-launch plan runs in one compiled call that also
        switches the context only when another is current (:func:`one_call_launch`); otherwise, and on
        the pure-Python path, it is ``run()`` inside :func:`~nvmath._internal.streams.stream_ctx`."""
        one_call = self._one_call
        if one_call is not None and stream is self._one_call_stream:
            one_call(operand + self._single[3], result + self._single[4], direction)  # type: ignore[index]
            return
        with streams.stream_ctx(stream):
            self.run(operand, result, 0, direction, stream)
        if stream is not self._one_call_stream:
            self._set_one_call(self._one_call_for(stream), stream)

    def _set_one_call(self, call: Any, stream: StreamHandle | None) -> None:
        """Make ``call`` the one-call launch on ``stream`` (``None``: none), and arm or disarm the attached
        hit with it: the hit serves calls in C exactly while this launch is valid."""
        self._one_call, self._one_call_stream = call, stream
        hit = self._hit
        if hit is not None:
            if call is None or stream is None:
                hit.disarm()
            else:
                hit.arm(stream.ptr, call, self._single[3], self._single[4])  # type: ignore[index]

    def attach_hit(self, hit: Any) -> None:
        """Attach the planner's compiled hit (``nvmath._fastcall.FFTHit``; ``None``: detach), replacing (and
        disarming) the previous one. The plan arms it with its one-call launch and the bound stream whenever
        :meth:`launch` has one, and disarms it whenever it has none (another stream bound, the workspace
        released, the plan closed): an armed hit never launches on a stream the plan is not bound to."""
        previous, self._hit = self._hit, hit
        if previous is not None and previous is not hit:
            previous.disarm()
        self._set_one_call(self._one_call, self._one_call_stream)

    def _one_call_for(self, stream: StreamHandle) -> Any:
        """The one-call launch on the bound ``stream`` (cached per context), or ``None``: several launches,
        buffers other than operand -> result, a call that must record the stream's done event, or no
        compiled launch (see :func:`one_call_launch`)."""
        single = self._single
        if single is None or single[1:3] != (0, 1) or stream is not self._stream:
            return None
        if stream.mortal and (self.workspace_size or self._done_always):
            return None
        if not fastpath.available() or fastpath.bound_address("cufft", "cufftXtExec") is None:
            return None
        if _context_calls() is None:  # (no driver library: nor a context to ask for)
            return None
        ctx = stream.ctx or devices.primary_context(self.device_id)
        made = self._one_call_by_ctx.get(ctx)
        if made is None:
            made = self._one_call_by_ctx[ctx] = one_call_launch(ctx, single[0])
        return made

    def release_workspace(self) -> None:
        """Free the workspace (stream-ordered); the next execution allocates it again."""
        self._set_one_call(None, None)
        self.workspace.release()
        self._bound_workspace = 0

    def close(self) -> None:
        """Destroy the handles and free the workspace; idempotent."""
        self._one_call = self._one_call_stream = None
        hit, self._hit = self._hit, None
        if hit is not None:
            hit.disarm()
        self._one_call_by_ctx = {}
        self._finalizer()
        workspace = getattr(self, "workspace", None)
        if workspace is not None:
            workspace.release()
            self._bound_workspace = 0

    def __repr__(self) -> str:
        return (
            f"CufftPlan(handles={self.handles}, device_id={self.device_id}, workspace={self.workspace_size})"
        )


def workspace_size(
    traits: FFTTraits, *, device_id: int, technique: str = "default", handle: int | None = None
) -> int:
    """The workspace (bytes) the steps of ``traits`` need: cuFFT's estimate, or the planned size.

    Args:
        traits: the transform.
        device_id: the device.
        technique: ``"default"`` (``cufftXtGetSizeMany``, no plan is made) or ``"refined"`` (plans
            are made and destroyed: the exact size).
        handle: an existing cuFFT handle to use (otherwise one is created): the size query runs on
            it, and with ``"refined"`` the (first) plan is made on it, as in nvmath-python; it is not
            destroyed.
    """
    cufft = _cufft()
    sizes = []
    with devices.device_ctx(device_id):
        for i, step in enumerate(traits.steps):
            own = handle is None or (technique == "refined" and i > 0)  # a handle holds one plan
            h = cufft.create() if own else handle
            try:
                if technique == "refined":
                    cufft.set_auto_allocation(h, 0)
                    sizes.append(cufft.xt_make_plan_many(h, *_plan_args(traits, step)))
                else:
                    sizes.append(cufft.xt_get_size_many(h, *_plan_args(traits, step)))
            finally:
                if own:
                    _destroy([h])
    return max(sizes, default=0)
