"""Tests of the torch adapter: CPU views, conjugation, dtypes, empty(); CUDA placement and copies."""

from __future__ import annotations

import timeit

import numpy as np
import pytest

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


def test_wrap_cost(torch):
    """Wrapping a CPU torch tensor costs about a microsecond or less (generous bound for slow CI)."""
    t = torch.zeros(8, 8)
    wrap(t)
    n = 20000
    cost = min(timeit.repeat(lambda: wrap(t), number=n, repeat=5)) / n
    assert cost < 5e-6


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
def test_gpu_wrap_cost(torch_cuda):
    """Wrapping a CUDA torch tensor stays around a microsecond."""
    t = torch_cuda.zeros(8, 8, device="cuda")
    wrap(t)
    n = 20000
    cost = min(timeit.repeat(lambda: wrap(t), number=n, repeat=5)) / n
    print(f"torch CUDA wrap: {cost * 1e9:.0f} ns")
    assert cost < 3e-6


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
