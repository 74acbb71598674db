"""Adapter for ``torch.Tensor`` (CPU and CUDA). Loaded only once a torch tensor is wrapped."""

from __future__ import annotations

import logging
import sys
from typing import Any

from nvmath._internal import dtypes, streams
from nvmath._internal.tensors.base import TensorAdapter, check_strides

__all__ = ["TorchAdapter"]

logger = logging.getLogger(__name__)

_INFO = dtypes.KNOWN_TORCH  # torch dtype -> (name, itemsize, is_complex), filled lazily


class TorchAdapter(TensorAdapter):
    """A strided ``torch.Tensor`` on the CPU or a CUDA device.

    ``shape`` is the tensor's ``torch.Size`` (a tuple subclass). ``is_conjugate`` reports torch's
    lazy conjugation bit: the memory holds the unconjugated values.
    """

    __slots__ = ("device", "device_id", "is_conjugate")
    package = "torch"

    def __init__(self, tensor: Any, stream: Any = None):
        if tensor.is_neg():  # its memory holds the values of opposite sign: nvmath reads memory
            raise ValueError(
                "it is a torch negative-bit view (e.g. z.conj().imag): its memory holds the negated "
                "values, which nvmath would read and write as they are; pass x.resolve_neg() (a copy)"
            )
        self.tensor = tensor
        self.data_ptr = tensor.data_ptr()
        self.shape = tensor.shape
        self.strides = tensor.stride()
        try:
            info = _INFO[tensor.dtype]
        except KeyError:
            info = dtypes.torch_dtype_info(tensor.dtype)
        self.dtype = info[0]
        self.itemsize = info[1]
        # `size` is filled on first read (see __getattr__): numel() is a tenth of the wrap cost
        if tensor.is_cuda:
            self.device = "cuda"
            self.device_id = tensor.get_device()
        elif tensor.is_cpu:
            self.device = "cpu"
            self.device_id = "cpu"
        else:
            raise ValueError(
                f"torch tensors on device '{tensor.device}' are not supported; use 'cpu' or 'cuda'"
            )
        self.is_conjugate = tensor.is_conj() if info[2] else False

    def __getattr__(self, name: str) -> Any:
        # only reached for slots not yet set: `size` is computed once, on first use
        if name == "size":
            size = self.size = self.tensor.numel()
            return size
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def empty(
        self,
        shape: tuple[int, ...],
        dtype: str,
        *,
        strides: tuple[int, ...] | None = None,
        device_id: int | str | None = None,
        stream: Any = None,
    ) -> TorchAdapter:
        """New tensor via ``torch.empty_strided``, allocated on ``stream`` for CUDA devices."""
        torch = sys.modules["torch"]
        if device_id is None:
            device_id = self.device_id
        shape = tuple(shape)
        strides = check_strides(shape, strides)
        tdt = dtypes.to_torch_dtype(dtype)
        if device_id == "cpu":
            return TorchAdapter(torch.empty_strided(shape, strides, dtype=tdt, device="cpu"))
        device = torch.device("cuda", device_id)
        if stream is None or stream.ptr == streams.torch_raw_stream()(device_id):
            return TorchAdapter(torch.empty_strided(shape, strides, dtype=tdt, device=device))
        with torch.cuda.stream(streams.native_stream(stream, "torch")):
            return TorchAdapter(torch.empty_strided(shape, strides, dtype=tdt, device=device))

    def to(self, device_id: int | str, stream: Any = None) -> TorchAdapter:
        """Copy with ``Tensor.to`` on ``stream``; to the host it blocks, to a GPU it does not."""
        if device_id == self.device_id:
            return self
        torch = sys.modules["torch"]
        if self.device_id != "cpu" and device_id != "cpu":
            raise ValueError(
                f"copies between GPUs are not supported (tensor on device {self.device_id}, asked for {device_id})"
            )
        target = "cpu" if device_id == "cpu" else torch.device("cuda", device_id)
        gpu = self.device_id if device_id == "cpu" else device_id
        if stream is None:
            stream = streams.get_stream(None, device_id=gpu, package="torch")
        with torch.cuda.stream(streams.native_stream(stream, "torch")):
            return TorchAdapter(self.tensor.to(target, non_blocking=device_id != "cpu"))
