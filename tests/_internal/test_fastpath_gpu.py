"""nvmath._internal.fastpath on the GPU: real cuEventRecord, cublasLtMatmul and cufftXtExec calls through
the compiled and the pure caller give bit-identical results to the checked bindings.

Run on the GPU machine after an in-place build (``python3 setup.py build_ext --inplace`` or
``python3 tools/build_fastcall.py``); without the build the compiled cases skip with a reason.
"""

from __future__ import annotations

import ctypes

import pytest
from fastcall_probes import CALLERS

from nvmath._internal import fastpath

pytestmark = pytest.mark.gpu


def _driver():
    from cuda.bindings import driver

    return driver


@pytest.mark.parametrize("cls", CALLERS)
def test_event_record_marks_the_stream_position(cls, torch_cuda):
    """cuEventRecord(event, stream) through the caller returns CUDA_SUCCESS and the event completes
    after the stream's earlier work."""
    torch, drv = torch_cuda, _driver()
    torch.zeros(1, device="cuda")  # the primary context current on this thread
    stream = torch.cuda.Stream(0)
    err, event = drv.cuEventCreate(0)
    assert int(err) == 0
    try:
        record = cls(fastpath.driver_symbol_address("cuEventRecord"), [0, 0], [0, 1])
        with torch.cuda.stream(stream):
            x = torch.ones(1 << 20, device="cuda")
            y = x * 3
        assert record(int(event), stream.cuda_stream) == 0
        assert int(drv.cuEventSynchronize(event)[0]) == 0
        assert int(drv.cuEventQuery(event)[0]) == 0
        assert float(y[-1]) == 3.0
    finally:
        drv.cuEventDestroy(event)


def _lt_setup(m, n, k):
    from nvmath.bindings import cublasLt
    from nvmath.bindings.cublas import ComputeType, CudaDataType

    handle = cublasLt.create()
    desc = cublasLt.matmul_desc_create(ComputeType.COMPUTE_32F, CudaDataType.R_32F)
    layouts = [
        cublasLt.matrix_layout_create(CudaDataType.R_32F, r, c, r) for r, c in ((m, k), (k, n), (m, n))
    ]

    def free():
        for layout in layouts:
            cublasLt.matrix_layout_destroy(layout)
        cublasLt.matmul_desc_destroy(desc)
        cublasLt.destroy(handle)

    return handle, desc, layouts, free


@pytest.mark.parametrize("cls", CALLERS)
def test_cublaslt_matmul_is_bit_identical_to_the_binding(cls, torch_cuda):
    """D = A B (fp32, column-major, algo NULL) through the caller equals the checked binding's D bit for
    bit, and matches torch."""
    from nvmath.bindings import cublasLt
    from nvmath.bindings.cublasLt import cuBLASLtError

    torch = torch_cuda
    m, n, k = 96, 80, 64
    gen = torch.Generator(device="cuda").manual_seed(21)
    a_t = torch.randn(k, m, device="cuda", generator=gen)  # A (m x k) column-major
    b_t = torch.randn(n, k, device="cuda", generator=gen)  # B (k x n) column-major
    d_ref, d_new = (torch.empty(n, m, device="cuda") for _ in range(2))
    alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
    stream = torch.cuda.current_stream().cuda_stream
    handle, desc, (la, lb, ld), free = _lt_setup(m, n, k)
    try:
        fixed = [
            handle,
            desc,
            ctypes.addressof(alpha),
            0,
            la,
            0,
            lb,
            ctypes.addressof(beta),
            0,
            ld,
            0,
            ld,
            0,
            0,
            0,
            0,
        ]
        cublasLt.matmul(*fixed[:3], a_t.data_ptr(), la, b_t.data_ptr(), lb, fixed[7], d_ref.data_ptr(), ld,
                        d_ref.data_ptr(), ld, 0, 0, 0, stream)  # fmt: skip
        caller = cls(
            fastpath.symbol_address("cublasLt", "cublasLtMatmul"),
            fixed,
            [3, 5, 8, 10, 15],
            error=cuBLASLtError,
        )
        assert caller(a_t.data_ptr(), b_t.data_ptr(), d_new.data_ptr(), d_new.data_ptr(), stream) == 0
        torch.cuda.synchronize()
    finally:
        free()
    assert torch.equal(d_new, d_ref)
    torch.testing.assert_close(d_new, b_t @ a_t, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cls", CALLERS)
def test_cufft_xt_exec_is_bit_identical_to_the_binding(cls, torch_cuda):
    """A batched C2C forward FFT (direction -1: a negative int argument) through the caller equals the
    checked binding's output bit for bit, and matches torch.fft.fft."""
    from nvmath.bindings import cufft

    torch = torch_cuda
    n, batch = 256, 8
    x = torch.randn(
        batch, n, dtype=torch.complex64, device="cuda", generator=torch.Generator("cuda").manual_seed(4)
    )
    y_ref, y_new = torch.empty_like(x), torch.empty_like(x)
    stream = torch.cuda.current_stream().cuda_stream
    plan = cufft.plan1d(n, cufft.Type.C2C, batch)
    try:
        cufft.set_stream(plan, stream)
        cufft.xt_exec(plan, x.data_ptr(), y_ref.data_ptr(), -1)
        caller = cls(
            fastpath.symbol_address("cufft", "cufftXtExec"), [plan, 0, 0, -1], [1, 2], error=cufft.cuFFTError
        )
        assert caller(x.data_ptr(), y_new.data_ptr()) == 0
        torch.cuda.synchronize()
    finally:
        cufft.destroy(plan)
    assert torch.equal(y_new, y_ref)
    torch.testing.assert_close(y_new, torch.fft.fft(x), rtol=1e-4, atol=1e-3)
