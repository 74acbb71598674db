"""nvmath-python 1.0 calls on the GPU (torch operands): FFT keys and operand swaps across batch
arrangements, in-place FFT of a sliced operand, FFT attributes, matmul with a 1-D ``c``, bias-gradient
epilogs on row-major operands, and ``release_operands`` reference counts."""

from __future__ import annotations

import gc
import sys

import numpy as np
import pytest

import nvmath.fft as nf
import nvmath.linalg.advanced as adv
from nvmath.fft import FFT

pytestmark = pytest.mark.gpu


def rel(torch, got, want):
    got, want = got.to(torch.complex128), want.to(torch.complex128)
    return float(torch.linalg.norm(got - want) / torch.linalg.norm(want))


def test_fft_reset_operand_with_another_batch_arrangement(torch_cuda):
    """An FFT planned for (2, 3, 64) over axis 2 runs (3, 2, 64) and transposed batch strides after reset."""
    torch = torch_cuda
    x = torch.randn(2, 3, 64, dtype=torch.complex64, device="cuda")
    y = torch.randn(3, 2, 64, dtype=torch.complex64, device="cuda")
    z = torch.randn(3, 2, 64, dtype=torch.complex64, device="cuda").transpose(0, 1)
    assert FFT.create_key(x, axes=(2,)) == FFT.create_key(y, axes=(2,)) == FFT.create_key(z, axes=(2,))
    with FFT(x, axes=(2,)) as f:
        f.plan()
        assert rel(torch, f.execute(), torch.fft.fft(x, dim=2)) < 1e-5
        for other in (y, z):
            f.reset_operand(other)
            out = f.execute()
            assert out.shape == other.shape
            assert rel(torch, out, torch.fft.fft(other, dim=2)) < 1e-5
        with pytest.raises(ValueError):
            f.reset_operand(torch.randn(2, 3, 32, dtype=torch.complex64, device="cuda"))


def test_fft_inplace_on_sliced_operand(torch_cuda):
    """In place on a non-overlapping slice (every other row) writes the slice and nothing else."""
    torch = torch_cuda
    base = torch.randn(8, 64, dtype=torch.complex64, device="cuda")
    keep = base.clone()
    view = base[::2]
    ref = torch.fft.fft(view, dim=1)
    out = nf.fft(view, axes=(1,), options={"inplace": True})
    torch.cuda.synchronize()
    assert out is view
    assert rel(torch, base[::2], ref) < 1e-5
    assert torch.equal(base[1::2], keep[1::2])


def test_fft_attributes_on_gpu(torch_cuda):
    """memory_space / execution_space / device_id and the internal layout of a C2R copy."""
    torch = torch_cuda
    x = torch.randn(4, 33, dtype=torch.complex64, device="cuda")
    with FFT(x, axes=(1,), options={"fft_type": "C2R"}) as f:
        assert (f.memory_space, f.execution_space, f.device_id) == ("cuda", "cuda", x.device.index)
        assert f.package == "torch" and f.fft_abstract_type == "C2R"
        assert f.internal_operand_layout.strides == (33, 1)  # the copy keeps the operand's layout
    host = torch.randn(4, 32, dtype=torch.complex64)
    with FFT(host, axes=(1,), execution="cuda") as f:
        assert (f.memory_space, f.execution_space) == ("cpu", "cuda")


def test_matmul_c_vector_on_gpu(torch_cuda):
    """``c`` of shape (M,) is broadcast over the columns."""
    torch = torch_cuda
    a = torch.randn(64, 32, device="cuda")
    b = torch.randn(32, 48, device="cuda")
    c = torch.randn(64, device="cuda")
    out = adv.matmul(a, b, c, beta=2.0)
    want = a.double() @ b.double() + 2.0 * c.double()[:, None]
    assert float(torch.linalg.norm(out.double() - want) / torch.linalg.norm(want)) < 1e-5


@pytest.mark.parametrize("a_order", ["row", "col"])
@pytest.mark.parametrize("b_order", ["row", "col"])
@pytest.mark.parametrize(
    ("epilog", "name"), [(adv.MatmulEpilog.BGRADA, "bgrada"), (adv.MatmulEpilog.BGRADB, "bgradb")]
)
def test_bias_gradients_any_operand_order(torch_cuda, a_order, b_order, epilog, name):
    """BGRADA / BGRADB with the reduced operand in either memory order: the library handles it
    (ORDER_ROW). The other operand in the other order (BGRADA with a row-major b, BGRADB with a
    column-major a) is cuBLASLt's to run: right values, or (xfail) its typed NOT_SUPPORTED."""
    from nvmath._errors import CudaLibraryError

    torch = torch_cuda
    other_order = (epilog == adv.MatmulEpilog.BGRADA and b_order == "row") or (
        epilog == adv.MatmulEpilog.BGRADB and a_order == "col"
    )
    a = torch.randn(64, 32, device="cuda")
    b = torch.randn(32, 48, device="cuda")
    if a_order == "col":
        a = a.T.contiguous().T
    if b_order == "col":
        b = b.T.contiguous().T
    try:
        out, aux = adv.matmul(a, b, epilog=epilog)
    except CudaLibraryError as exc:
        if not other_order:
            raise
        pytest.xfail(f"cuBLASLt does not run this layout: {exc}")
    want = a.double() @ b.double()
    assert float(torch.linalg.norm(out.double() - want) / torch.linalg.norm(want)) < 1e-5
    grad = a.double().sum(dim=1) if epilog == adv.MatmulEpilog.BGRADA else b.double().sum(dim=0)
    got = aux[name].double().reshape(-1)
    assert float(torch.linalg.norm(got - grad) / torch.linalg.norm(grad)) < 1e-5



@pytest.mark.parametrize(
    ("epilog", "name"), [(adv.MatmulEpilog.BGRADA, "bgrada"), (adv.MatmulEpilog.BGRADB, "bgradb")]
)
def test_bias_gradient_copy_refreshed_on_execute_and_reset(torch_cuda, epilog, name):
    """The reduced operand in the order cuBLASLt refuses (row-major a for BGRADA, column-major
    b for BGRADB) is read from the planner's copy: in-place updates and reset_operands are seen."""
    torch = torch_cuda

    def operands(seed):
        g = torch.Generator().manual_seed(seed)
        a = torch.randn(64, 32, generator=g).cuda()
        b = torch.randn(48, 32, generator=g).cuda().T  # column-major b
        return a, b

    def check(out, aux, a, b):
        want = a.double() @ b.double()
        assert float(torch.linalg.norm(out.double() - want) / torch.linalg.norm(want)) < 1e-5
        grad = a.double().sum(dim=1) if name == "bgrada" else b.double().sum(dim=0)
        got = aux[name].double().reshape(grad.shape)
        assert float(torch.linalg.norm(got - grad) / torch.linalg.norm(grad)) < 1e-5

    a, b = operands(1)
    with adv.Matmul(a, b) as mm:
        mm.plan(epilog=epilog)
        check(*mm.execute(), a, b)
        (a if name == "bgrada" else b).mul_(2.0)
        check(*mm.execute(), a, b)
        a2, b2 = operands(2)
        mm.reset_operands(a=a2, b=b2)
        check(*mm.execute(), a2, b2)
    torch.cuda.synchronize()

def test_matmul_release_operands_reference_counts(torch_cuda):
    """release_operands() gives back every reference to the operands, bias and result."""
    torch = torch_cuda
    a = torch.randn(64, 32, device="cuda")
    b = torch.randn(32, 48, device="cuda")
    c = torch.randn(48, 64, device="cuda").T  # column-major, as the bias epilog's D
    bias = torch.randn(64, device="cuda")
    gc.collect()
    before = [sys.getrefcount(t) for t in (a, b, c, bias)]
    mm = adv.Matmul(a, b, c, beta=1.0)
    mm.plan(epilog=adv.MatmulEpilog.BIAS, epilog_inputs={"bias": bias})
    out = mm.execute()
    torch.cuda.synchronize()
    out_refs = sys.getrefcount(out)
    mm.release_operands()
    gc.collect()
    assert [sys.getrefcount(t) for t in (a, b, c, bias)] == before
    assert sys.getrefcount(out) == out_refs
    mm.free()


def test_fft_release_operand_reference_count(torch_cuda):
    """FFT.release_operand() gives back the reference to the operand."""
    torch = torch_cuda
    x = torch.randn(4, 64, dtype=torch.complex64, device="cuda")
    before = sys.getrefcount(x)
    f = FFT(x, axes=(1,))
    f.plan()
    f.execute()
    f.release_operand()
    gc.collect()
    assert sys.getrefcount(x) == before
    f.free()


def test_numpy_get_nvrtc_version_on_gpu_machine():
    """get_nvrtc_version() works where NVRTC is installed (cuda-bindings)."""
    from nvmath._utils import get_nvrtc_version

    major, minor, patch = get_nvrtc_version()
    assert major >= 12 and minor >= 0 and patch >= 0
    assert np.int64(major) == major


@pytest.mark.parametrize("n", [177, 353, 96, 100])
def test_half_precision_sizes_are_cufft_s_decision(torch_cuda, n):
    """A complex32 FFT of a non-power-of-two size runs when cuFFT plans it (nvmath-python passes every
    size through) and raises cuFFTError, not ValueError, when cuFFT refuses it."""
    from nvmath.bindings.cufft import cuFFTError

    torch = torch_cuda
    x64 = torch.randn(4, n, dtype=torch.complex64, device="cuda")
    x = x64.to(torch.complex32)
    try:
        out = nf.fft(x, axes=(1,))
    except cuFFTError:
        return  # cuFFT's refusal, reported with nvmath-python's exception type
    torch.cuda.synchronize()
    assert out.dtype == torch.complex32 and out.shape == x.shape
    ref = torch.fft.fft(x.to(torch.complex64), dim=1)
    assert rel(torch, out.to(torch.complex64), ref) < 2e-2


def test_user_allocator_gets_default_stream_as_handle_0(torch_cuda):
    """An nvmath-python style async allocator that wraps the stream it is given with
    torch.cuda.ExternalStream works on the default stream (handle 0, not cuda.core's legacy 1)."""
    from nvmath.memory import BaseCUDAMemoryManagerAsync, MemoryPointer

    torch = torch_cuda
    seen = []

    class TorchAllocator(BaseCUDAMemoryManagerAsync):
        def __init__(self, device_id, logger):
            self.device_id = device_id

        def memalloc_async(self, size, stream):
            seen.append(int(stream.handle))
            ext = torch.cuda.ExternalStream(int(stream.handle), device=self.device_id)
            ptr = torch.cuda.caching_allocator_alloc(size, self.device_id, ext)
            return MemoryPointer(ptr, size, finalizer=lambda: torch.cuda.caching_allocator_delete(ptr))

    x = torch.randn(4, 4099, dtype=torch.complex64, device="cuda")  # a prime size: cuFFT needs a workspace
    with torch.cuda.stream(torch.cuda.default_stream()):
        out = nf.fft(x, axes=(1,), options={"allocator": TorchAllocator(0, None)})
    torch.cuda.synchronize()
    assert rel(torch, out, torch.fft.fft(x, dim=1)) < 1e-4
    assert seen and seen[0] == 0
