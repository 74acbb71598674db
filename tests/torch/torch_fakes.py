"""torch CPU tensors as "GPU" tensors of the fake cuBLASLt (``tests/linalg/advanced/matmul_fakes.py``).

:func:`install` routes cuBLASLt to the numpy emulator and wraps ``torch.Tensor`` with
:class:`FakeTorchAdapter`: a CPU tensor posing as a tensor on GPU 0 (package ``"faketorch"``), whose
memory the emulator reads and writes through its address. So the whole of nvmath.torch -- autograd,
custom ops, planner cache, Linear -- runs through the real advanced-matmul planner on the CPU, and
``gradcheck`` / ``opcheck`` compare it with torch in float64.
"""

from __future__ import annotations

import importlib.util
import pathlib
from typing import Any

import torch

from nvmath._internal import dtypes
from nvmath._internal.tensors import dispatch
from nvmath._internal.tensors.base import TensorAdapter, check_strides

_spec = importlib.util.spec_from_file_location(
    "matmul_fakes_for_torch", pathlib.Path(__file__).parents[1] / "linalg" / "advanced" / "matmul_fakes.py"
)
F = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(F)


class FakeTorchAdapter(TensorAdapter):
    """A torch CPU tensor that the planner takes for a tensor on (fake) GPU 0."""

    __slots__ = ()
    package = "faketorch"
    device = "cuda"
    device_id = 0
    is_conjugate = False

    def __init__(self, tensor: Any, stream: Any = None):
        self.tensor = tensor
        self.data_ptr = tensor.data_ptr()
        self.shape = tuple(tensor.shape)
        self.strides = tensor.stride()
        self.dtype = dtypes.torch_dtype_info(tensor.dtype)[0]
        self.itemsize = tensor.element_size()
        self.size = tensor.numel()

    def empty(self, shape, dtype, *, strides=None, device_id=None, stream=None):
        shape = tuple(shape)
        out = torch.empty_strided(shape, check_strides(shape, strides), dtype=dtypes.to_torch_dtype(dtype))
        if out.is_floating_point():
            out.fill_(float("nan"))  # poison
        return FakeTorchAdapter(out)

    def to(self, device_id, stream=None):
        return self

    def copy_(self, src, stream=None):
        self.tensor.copy_(src.tensor)
        return self

    def unwrap(self, stream=None):
        return self.tensor


def install(monkeypatch: Any) -> Any:
    """Install the fake GPU and the torch-as-GPU adapter for one test; return the ``FakeLt``."""
    fake = F.install(monkeypatch)
    monkeypatch.setitem(dispatch._CLASSES, torch.Tensor, FakeTorchAdapter)
    monkeypatch.setitem(dispatch._CLASSES, torch.nn.Parameter, FakeTorchAdapter)
    # nvmath.torch's layers run CPU tensors by torch's operations; here they pose as CUDA tensors
    from nvmath.torch import _functional

    monkeypatch.setattr(_functional, "FUSED_DEVICE_TYPES", frozenset({"cuda", "cpu"}))
    return fake


def install_as_torch(monkeypatch: Any) -> Any:
    """The fake GPU with torch CPU tensors posing as tensors of package ``"torch"`` on GPU 0 (so the
    torch-only fast paths run: torch's raw current stream, read as the legacy default stream 0, its
    current device 0, no capture; results by ``torch.empty_strided``); returns ``nvmath.torch`` with
    both planner caches emptied. (``tools/torch_host_cost.py`` measures on it.)"""
    from nvmath._internal import streams
    from nvmath.linalg.advanced import _results

    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device_id: 0, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_isCurrentStreamCapturing", lambda: False, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 0, raising=False)
    monkeypatch.setattr(streams, "_TORCH_RAW", None)  # (looked up again under the fake, restored after)

    class AsTorch(FakeTorchAdapter):
        __slots__ = ()
        package = "torch"

        def empty(self, shape, dtype, *, strides=None, device_id=None, stream=None):
            out = super().empty(shape, dtype, strides=strides, device_id=device_id, stream=stream)
            return AsTorch(out.tensor)

    install(monkeypatch)
    monkeypatch.setitem(dispatch._CLASSES, torch.Tensor, AsTorch)
    monkeypatch.setitem(dispatch._CLASSES, torch.nn.Parameter, AsTorch)
    init = _results.ResultMaker.__init__

    def cpu_results(self: Any, *args: Any, **kwargs: Any) -> None:  # torch.empty_strided on the CPU
        init(self, *args, **kwargs)
        if self._raw_stream is not None:
            self._device = torch.device("cpu")
            self.direct = (*self.direct[:4], self._device)

    monkeypatch.setattr(_results.ResultMaker, "__init__", cpu_results)
    import nvmath.torch as nt

    for cache in (nt.default_cache, nt.compiled_cache):
        cache.clear()
    return nt
