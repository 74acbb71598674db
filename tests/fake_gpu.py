"""The CPU fake GPU shared by the matmul and FFT tests: "device" memory is host memory.

:func:`install` sets up the device side for one test (undone by ``monkeypatch``): every registered
cache emptied (no plan or memo of another test's fake survives), stream and device contexts that need
no driver, device allocations (``memory.allocate``, so ``Workspace.ensure`` too) made of host
buffers, device 0's library stream, and ``copy_into`` between the given fake packages (and numpy) done
as host copies. The fake libraries go on top of it: cuBLASLt in ``linalg/advanced/matmul_fakes.py``,
cuFFT in ``fft/test_fft_cuda_path.py``.

The execute paths call the unchecked bindings (``nvmath.bindings._unchecked``), so a fake library's
entry point there replaces the C function pointer (:func:`route_c`): every argument is checked against
the C prototype as the checked binding would have (:func:`check_c_args`), and the checked Python
function fails the test if anything still calls it.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from nvmath._internal import caches, devices, memory, streams
from nvmath._internal.tensors import copy as tcopy
from nvmath._internal.tensors.base import TensorAdapter
from nvmath._internal.tensors.host import view_from_ptr


class HostAllocation:
    """Device memory of the fake GPU: a host buffer (what ``memory.allocate`` returns here)."""

    def __init__(self, nbytes: int, **kwargs: Any):
        self.buffer = np.empty(max(nbytes, 1), dtype=np.uint8)
        self.ptr, self.size = self.buffer.ctypes.data, nbytes

    def free(self, stream: Any) -> None:
        self.buffer = None


def host_copy(dst: TensorAdapter, src: TensorAdapter, stream: Any) -> None:
    """``copy_into`` for adapters whose memory is host memory on both sides (fake "device" tensors)."""
    views = [view_from_ptr(a.data_ptr, tuple(a.shape), tuple(a.strides), a.dtype) for a in (dst, src)]
    np.copyto(views[0], views[1])


def install(monkeypatch: Any, packages: Iterable[str] = ()) -> None:
    """Install the fake GPU's device side for one test; ``packages``: the fake packages whose tensors
    ``copy_into`` copies as host memory (with each other and with numpy)."""
    caches.clear_all()
    monkeypatch.setattr(streams, "stream_ctx", lambda handle: contextlib.nullcontext())
    monkeypatch.setattr(devices, "device_ctx", lambda device_id: contextlib.nullcontext())
    monkeypatch.setattr(memory, "allocate", HostAllocation)
    monkeypatch.setitem(streams._LIBRARY_STREAMS, 0, streams.StreamHandle(0, 0, "cuda"))
    # stream handles made under the fake (their mark_done events are fake) must never be found by
    # real GPU code later in the same process (the GPU machine runs fake and real tests together)
    monkeypatch.setattr(streams, "_OBJ_CACHE", {})
    monkeypatch.setattr(streams, "_INT_CACHE", {})
    names = (*packages, "numpy")
    for dst in names:
        for src in names:
            if dst in packages or src in packages:
                monkeypatch.setitem(tcopy.COPIERS, (dst, src), host_copy)


_RANGES = {
    ctypes.c_int: (-(2**31), 2**31 - 1),
    ctypes.c_long: (-(2**63), 2**63 - 1),
    ctypes.c_longlong: (-(2**63), 2**63 - 1),
    ctypes.c_void_p: (0, 2**64 - 1),
    ctypes.c_ulong: (0, 2**64 - 1),
    ctypes.c_size_t: (0, 2**64 - 1),
}
"""ctypes argument type -> the range the checked bindings enforce."""


def check_c_args(module: Any, symbol: str, args: tuple) -> None:
    """Assert what the checked binding of ``module`` would have enforced of a call of C ``symbol``: each
    argument a plain ``int`` within its C type's range (ctypes would wrap anything else, and take an
    IntEnum or a numpy integer without a word), or, for a pointer parameter, a ctypes array."""
    _, argtypes = module._bind.prototypes[symbol]
    assert len(args) == len(argtypes), f"{symbol}: {len(args)} arguments for {len(argtypes)} parameters"
    bad = []
    for i, (x, ctype) in enumerate(zip(args, argtypes)):
        if ctype is ctypes.c_void_p and isinstance(x, ctypes.Array):
            continue
        low, high = _RANGES[ctype]
        if type(x) is not int or not low <= x <= high:
            bad.append((i, ctype.__name__, x))
    assert not bad, f"{symbol}: arguments (position, C type, value) the checked binding refuses: {bad}"


def c_symbol(unchecked: Any, name: str) -> str:
    """The C symbol the unchecked binding ``unchecked.<name>`` calls (``gemm_ex`` -> ``cublasGemmEx``)."""
    code = getattr(unchecked, name).__code__
    return next(n for n in code.co_names if n.startswith("_p_"))[3:]


def route_c(monkeypatch: Any, checked: Any, unchecked: Any, name: str, emulation: Callable[..., Any]) -> None:
    """Route the C entry point of binding ``name`` (of the ``checked`` module and its ``unchecked``
    twin) to ``emulation`` (arguments checked by :func:`check_c_args`; status 0 unless it returns one),
    and make the checked ``checked.<name>`` fail the test when called."""
    symbol = c_symbol(unchecked, name)

    def c_function(*args: Any) -> int:
        check_c_args(checked, symbol, args)
        status = emulation(*args)
        return 0 if status is None else status

    def refused(*args: Any, **kwargs: Any) -> None:
        module = checked.__name__.rsplit(".", 1)[-1]
        raise AssertionError(f"the checked binding {module}.{name} was called (execute must not call it)")

    monkeypatch.setattr(checked, "_p_" + symbol, c_function)
    monkeypatch.setattr(checked, name, refused)


def torch_read_as_gpu(t: Any) -> Any:
    """A stateless reader (``nvmath._internal.stateless.register_reader(torch.Tensor, ...)``) that reads a
    torch CPU tensor raw as a tensor on GPU 0: the stateless hot paths' reads of CUDA tensors, on the CPU.
    ``None`` for a dtype the readers do not know."""
    from nvmath._internal import dtypes

    info = dtypes.KNOWN_TORCH.get(t.dtype)
    if info is None:
        return None
    return ("torch", 0, t.shape, t.stride(), info[0], t.is_conj()), t.data_ptr(), t
