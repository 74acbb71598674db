"""Tests of the torch adapter: CPU views, conjugation, dtypes, empty(); CUDA placement and copies."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from call_profile import c_calls, profile_calls, python_calls

from nvmath._internal import streams
from nvmath._internal.tensors import wrap


def _check(t, dtype):
    from nvmath._internal.tensors.torch_adapter import TorchAdapter

    w = wrap(t)
    assert isinstance(w, TorchAdapter) and w.tensor is t
    assert w.data_ptr == t.data_ptr()
    assert tuple(w.shape) == tuple(t.shape) and isinstance(w.shape, tuple)
    assert w.strides == t.stride()
    assert (w.dtype, w.itemsize, w.size) == (dtype, t.element_size(), t.numel())
    assert w.package == "torch"
    return w


def test_cpu_views(torch):
    """Sliced, transposed, expanded (stride 0), 0-d and empty CPU tensors wrap exactly."""
    base = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
    for view in [
        base,
        base[1:, ::2, 1:4],
        base.permute(2, 0, 1),
        base[:, :1, :].expand(3, 7, 5),
        base[1, 2, 3],
        base[:0],
    ]:
        w = _check(view, "float32")
        assert (w.device, w.device_id, w.is_conjugate) == ("cpu", "cpu", False)
    assert wrap(base[:, :1, :].expand(3, 7, 5)).strides[1] == 0


def test_conjugate_bit(torch):
    """A lazily conjugated complex tensor reports is_conjugate; resolve_conj clears it."""
    z = torch.randn(3, 4, dtype=torch.complex64)
    assert not wrap(z).is_conjugate
    assert wrap(z.conj()).is_conjugate
    assert wrap(z.conj()).data_ptr == z.data_ptr()
    assert not wrap(z.conj().resolve_conj()).is_conjugate
    assert not wrap(torch.randn(3).conj()).is_conjugate  # real: conj is a no-op


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize(
    "attr,name",
    [
        ("float16", "float16"),
        ("bfloat16", "bfloat16"),
        ("float64", "float64"),
        ("complex32", "complex32"),
        ("complex128", "complex128"),
        ("float8_e4m3fn", "float8_e4m3fn"),
        ("float8_e5m2", "float8_e5m2"),
        ("int8", "int8"),
        ("int32", "int32"),
        ("uint8", "uint8"),
    ],
)
def test_dtypes(torch, attr, name):
    """Each torch dtype reports its canonical name and item size."""
    _check(torch.zeros(2, 3, dtype=getattr(torch, attr)), name)


def test_parameter_is_torch(torch):
    """nn.Parameter (a Tensor subclass) uses the torch adapter."""
    _check(torch.nn.Parameter(torch.zeros(2, 2)), "float32")


def test_meta_device_rejected(torch):
    """A tensor on a device other than cpu / cuda raises ValueError naming the operand."""
    with pytest.raises(ValueError, match="operand 'a'.*meta"):
        wrap(torch.empty(2, device="meta"), "operand 'a'")


@pytest.mark.parametrize("strides", [None, (1, 2, 6), (4, 1, 8)])
def test_empty_honours_strides(torch, strides):
    """empty() gives a torch CPU tensor with exactly the requested strides and dtype."""
    w = wrap(torch.zeros(1)).empty((2, 3, 4), "bfloat16", strides=strides)
    assert w.tensor.dtype == torch.bfloat16 and w.strides == (strides or (12, 4, 1))
    assert w.device_id == "cpu"


def test_to_cpu_is_identity(torch):
    """to('cpu') of a CPU tensor returns the same adapter."""
    w = wrap(torch.zeros(2))
    assert w.to("cpu") is w


def _spy_slow_paths(monkeypatch, torch) -> list[str]:
    """Record any DLPack export, StridedMemoryView construction or generic adapter a wrap makes."""
    from nvmath._internal.tensors import generic_adapter

    seen: list[str] = []
    real_dlpack = torch.Tensor.__dlpack__

    def dlpack(self, *args, **kwargs):
        seen.append("__dlpack__")
        return real_dlpack(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "__dlpack__", dlpack)
    real_init = generic_adapter.GenericAdapter.__init__

    def generic_init(self, *args, **kwargs):
        seen.append("GenericAdapter")
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(generic_adapter.GenericAdapter, "__init__", generic_init)
    try:
        from cuda.core import utils as core_utils
    except ImportError:
        core_utils = None
    if core_utils is not None:

        class SpyView:
            @staticmethod
            def from_dlpack(*args, **kwargs):
                seen.append("StridedMemoryView")
                raise AssertionError("the torch fast path built a StridedMemoryView")

            from_cuda_array_interface = from_dlpack

        monkeypatch.setattr(core_utils, "StridedMemoryView", SpyView)
    return seen


def _check_fast_path(t, monkeypatch, torch) -> None:
    """``wrap(t)`` enters only wrap() and the adapter's __init__, calls only the class lookup and the
    tensor's is_neg (negative-bit views are refused) / data_ptr / stride (get_device on CUDA, is_conj for
    complex dtypes), never exports DLPack."""
    from nvmath._internal.tensors.torch_adapter import TorchAdapter

    wrap(t)  # the first wrap of a dtype may fill the dtype table
    seen = _spy_slow_paths(monkeypatch, torch)
    gc.disable()  # (a collection inside the profiled call would add the gc callbacks' frames)
    try:
        events = profile_calls(lambda: wrap(t))
    finally:
        gc.enable()
    assert python_calls(events) == ["wrap", "__init__"]
    expected = ["get", "is_neg", "data_ptr", "stride"] + (["get_device"] if t.is_cuda else [])
    expected += ["is_conj"] if t.is_complex() else []
    assert c_calls(events) == expected
    assert type(wrap(t)) is TorchAdapter and seen == []


@pytest.mark.parametrize("dtype", ["float32", "complex64"])
def test_wrap_takes_the_direct_attribute_path(torch, monkeypatch, dtype):
    """Wrapping a CPU torch tensor reads its attributes directly: no DLPack capsule, no
    StridedMemoryView, no generic adapter, no Python call beyond the adapter's constructor (the cost
    is measured by the benchmarks' overhead/wrap-torch-cpu-tensor row)."""
    _check_fast_path(torch.zeros(8, 8, dtype=getattr(torch, dtype)), monkeypatch, torch)


# --------------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_cuda_tensor(torch_cuda):
    """A CUDA tensor reports device 'cuda' and its ordinal."""
    torch = torch_cuda
    w = _check(torch.zeros(4, 4, device="cuda")[:, 1:], "float32")
    assert (w.device, w.device_id) == ("cuda", 0)


@pytest.mark.gpu
def test_empty_on_a_side_stream_and_round_trip(torch_cuda):
    """empty() on another stream allocates there; to() moves data both ways with the right values."""
    torch = torch_cuda
    side = torch.cuda.Stream(0)
    handle = streams.get_stream(side, device_id=0, package="torch")
    x = wrap(torch.arange(12.0, device="cuda").reshape(3, 4))
    y = x.empty((3, 4), "float32", strides=(1, 3), stream=handle)
    assert y.device_id == 0 and y.strides == (1, 3)
    host = x.to("cpu", handle)
    assert host.device_id == "cpu" and np.array_equal(host.tensor.numpy(), np.arange(12.0).reshape(3, 4))
    back = host.to(0, handle)
    side.synchronize()
    assert back.device_id == 0 and torch.equal(back.tensor, x.tensor)


@pytest.mark.gpu
def test_gpu_wrap_takes_the_direct_attribute_path(torch_cuda, monkeypatch):
    """Wrapping a CUDA torch tensor takes the same direct path as a CPU one (no DLPack, no
    StridedMemoryView; its cost is the benchmarks' overhead/wrap-torch-tensor row)."""
    _check_fast_path(torch_cuda.zeros(8, 8, device="cuda")[:, 1:], monkeypatch, torch_cuda)


@pytest.mark.gpu
def test_operands_on_two_devices_rejected(torch_cuda):
    """Torch operands on two GPUs raise ValueError naming both operands and devices."""
    from nvmath._internal.tensors import wrap_operands

    torch = torch_cuda
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    with pytest.raises(ValueError, match="operand 'b' is on device 1 but 'a' is on device 0"):
        wrap_operands(a=torch.zeros(2, device="cuda:0"), b=torch.zeros(2, device="cuda:1"))


def test_negative_bit_view_is_explained():
    """A torch negative-bit view (z.conj().imag) is refused with a message naming it and the fix
    (resolve_neg()), not torch's "can't call numpy()"; the resolved tensor is accepted."""
    import torch

    from nvmath._internal.tensors import wrap

    z = torch.randn(3, 3, dtype=torch.complex128)
    view = z.conj().imag
    assert view.is_neg()
    with pytest.raises(ValueError, match=r"negative-bit view.*resolve_neg\(\)"):
        wrap(view, "operand 'a'")
    import nvmath

    with pytest.raises(ValueError, match="negative-bit view"):
        nvmath.linalg.inv(view)
    assert wrap(view.resolve_neg()).dtype == "float64"
