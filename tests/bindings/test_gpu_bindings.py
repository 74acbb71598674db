"""Raw bindings on a GPU: handles of every library, a cuBLASLt matmul found by the heuristic, a cuFFT
plan and execution, a cuSOLVER Cholesky solve, and a saved heuristic result that runs again.

Memory comes from ``cuda.core`` (``Device.allocate``) and is copied with ``cuda.bindings`` driver
calls; every library call is one of ours. Problems are tiny: the file runs in about a second.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

from nvmath.bindings import _loader, cublas, cublasLt, cufft, cusolver, cusolverDn

pytestmark = pytest.mark.gpu

CUFFT_FORWARD = -1
WORKSPACE_BYTES = 4 << 20


class Gpu:
    """Device 0, a stream, and host<->device copies for the tests."""

    def __init__(self):
        from cuda.core import Device

        self.device = Device(0)
        self.device.set_current()
        self.stream = self.device.create_stream()
        self.sptr = int(self.stream.handle)  # the bindings take handles and addresses as ints only
        self.buffers = []

    def empty(self, nbytes: int) -> int:
        buffer = self.device.allocate(max(nbytes, 1), stream=self.stream)
        self.buffers.append(buffer)
        return int(buffer.handle)

    def put(self, array: np.ndarray):
        from cuda.bindings import driver

        buffer = self.empty(array.nbytes)
        self.stream.sync()
        (status,) = driver.cuMemcpyHtoD(buffer, array.ctypes.data, array.nbytes)
        assert status == driver.CUresult.CUDA_SUCCESS
        return buffer

    def get(self, buffer, out: np.ndarray) -> np.ndarray:
        from cuda.bindings import driver

        self.stream.sync()
        (status,) = driver.cuMemcpyDtoH(out.ctypes.data, buffer, out.nbytes)
        assert status == driver.CUresult.CUDA_SUCCESS
        return out

    def close(self):
        self.stream.sync()
        for buffer in self.buffers:
            buffer.close()
        self.stream.close()


@pytest.fixture(scope="module")
def gpu():
    """A current device 0 with a stream (module-wide)."""
    state = Gpu()
    yield state
    state.close()


@pytest.fixture(scope="module")
def lt_handle(gpu):
    """A cuBLASLt handle (module-wide)."""
    handle = cublasLt.create()
    yield handle
    cublasLt.destroy(handle)


def test_handles_create_and_destroy(gpu) -> None:
    """Each library creates a handle (an int), accepts a stream on it, and destroys it."""
    stream = int(gpu.stream.handle)
    handle = cublasLt.create()
    assert isinstance(handle, int) and handle
    cublasLt.destroy(handle)

    handle = cublas.create()
    if not hasattr(type(gpu.stream), "__index__"):  # a cuda.core Stream object is not an int handle
        with pytest.raises(TypeError, match=r"cublas.set_stream\(\): parameter stream_id must be an int"):
            cublas.set_stream(handle, gpu.stream)
    cublas.set_stream(handle, stream)
    assert cublas.get_stream(handle) == stream
    assert cublas.get_version(handle) >= 12000
    cublas.destroy(handle)

    plan = cufft.create()
    assert isinstance(plan, int)
    cufft.set_stream(plan, stream)
    cufft.destroy(plan)

    handle = cusolverDn.create()
    cusolverDn.set_stream(handle, stream)
    assert cusolverDn.get_stream(handle) == stream
    cusolverDn.destroy(handle)


def _matmul_problem(gpu, m: int = 64, n: int = 48, k: int = 32):
    rng = np.random.default_rng(1)
    a = np.asfortranarray(rng.standard_normal((m, k), dtype=np.float32))
    b = np.asfortranarray(rng.standard_normal((k, n), dtype=np.float32))
    r32f = cublas.CudaDataType.R_32F
    desc = cublasLt.matmul_desc_create(cublas.ComputeType.COMPUTE_32F, r32f)
    layouts = [
        cublasLt.matrix_layout_create(r32f, rows, cols, rows) for rows, cols in ((m, k), (k, n), (m, n))
    ]
    buffers = (gpu.put(a), gpu.put(b), gpu.empty(m * n * 4), gpu.empty(WORKSPACE_BYTES))
    return a, b, desc, layouts, buffers


def _destroy(desc, layouts, pref=None) -> None:
    for layout in layouts:
        cublasLt.matrix_layout_destroy(layout)
    cublasLt.matmul_desc_destroy(desc)
    if pref is not None:
        cublasLt.matmul_preference_destroy(pref)


def _heuristics(lt_handle, desc, layouts, count: int = 4):
    pref = cublasLt.matmul_preference_create()
    cublasLt.matmul_preference_set(
        pref, cublasLt.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES, WORKSPACE_BYTES
    )
    results = np.zeros(count, dtype=cublasLt.matmul_heuristic_result_dtype)
    la, lb, lc = layouts
    found = cublasLt.matmul_algo_get_heuristic(lt_handle, desc, la, lb, lc, lc, pref, count, results.ctypes.data)
    return pref, results[:found]


def _run_matmul(
    gpu, lt_handle, desc, layouts, buffers, algo_ptr: int, matmul=cublasLt.matmul
) -> np.ndarray:
    la, lb, lc = layouts
    a, b, d, workspace = buffers
    alpha, beta = np.ones(1, np.float32), np.zeros(1, np.float32)
    matmul(
        lt_handle,
        desc,
        alpha.ctypes.data,
        a,
        la,
        b,
        lb,
        beta.ctypes.data,
        d,
        lc,
        d,
        lc,
        algo_ptr,
        workspace,
        WORKSPACE_BYTES,
        gpu.sptr,
    )
    m = cublasLt.matrix_layout_get(lc, cublasLt.MatrixLayoutAttribute.ROWS)
    n = cublasLt.matrix_layout_get(lc, cublasLt.MatrixLayoutAttribute.COLS)
    return gpu.get(d, np.empty((m, n), dtype=np.float32, order="F"))


def test_unchecked_cublaslt_matmul_equals_the_checked_one(gpu, lt_handle) -> None:
    """The unchecked binding the planners call gives bit-identical results to the checked one with the
    same algorithm, and a NULL handle still raises cuBLASLtError (a typed error, not a crash)."""
    from nvmath.bindings._unchecked import cublasLt as unchecked

    a, b, desc, layouts, buffers = _matmul_problem(gpu)
    pref, results = _heuristics(lt_handle, desc, layouts)
    try:
        checked = _run_matmul(gpu, lt_handle, desc, layouts, buffers, results.ctypes.data)
        fast = _run_matmul(gpu, lt_handle, desc, layouts, buffers, results.ctypes.data, unchecked.matmul)
        np.testing.assert_array_equal(fast, checked)
        np.testing.assert_allclose(fast, a @ b, rtol=1e-4, atol=1e-4)
        with pytest.raises(cublasLt.cuBLASLtError):
            _run_matmul(gpu, 0, desc, layouts, buffers, results.ctypes.data, unchecked.matmul)
    finally:
        _destroy(desc, layouts, pref)


def test_cublaslt_matmul_matches_numpy(gpu, lt_handle) -> None:
    """A float32 matmul with the first heuristic algorithm equals numpy's product."""
    a, b, desc, layouts, buffers = _matmul_problem(gpu)
    pref, results = _heuristics(lt_handle, desc, layouts)
    try:
        assert len(results) >= 1 and results["state"][0] == 0
        d = _run_matmul(gpu, lt_handle, desc, layouts, buffers, results.ctypes.data)
        np.testing.assert_allclose(d, a @ b, rtol=1e-4, atol=1e-4)
    finally:
        _destroy(desc, layouts, pref)


def test_saved_heuristic_result_runs_again(gpu, lt_handle) -> None:
    """A heuristic result saved with np.save, loaded, checked and used again gives the same product."""
    a, b, desc, layouts, buffers = _matmul_problem(gpu, 40, 24, 16)
    pref, results = _heuristics(lt_handle, desc, layouts, 2)
    try:
        saved = io.BytesIO()
        np.save(saved, results)
        saved.seek(0)
        loaded = np.load(saved)
        assert (
            loaded.dtype == cublasLt.matmul_heuristic_result_dtype and loaded.tobytes() == results.tobytes()
        )
        algo = np.ascontiguousarray(loaded["algo"][:1])
        checked = np.zeros(1, dtype=cublasLt.matmul_heuristic_result_dtype)
        la, lb, lc = layouts
        cublasLt.matmul_algo_check(lt_handle, desc, la, lb, lc, lc, algo.ctypes.data, checked.ctypes.data)
        assert checked["workspace_size"][0] <= WORKSPACE_BYTES
        algo_id = cublasLt.matmul_algo_config_get(algo.ctypes.data, cublasLt.MatmulAlgoConfigAttribute.ID)
        first = results[:1]["algo"].copy()
        assert algo_id == cublasLt.matmul_algo_config_get(first.ctypes.data, cublasLt.MatmulAlgoConfigAttribute.ID)
        d = _run_matmul(gpu, lt_handle, desc, layouts, buffers, algo.ctypes.data)
        np.testing.assert_allclose(d, a @ b, rtol=1e-4, atol=1e-4)
    finally:
        _destroy(desc, layouts, pref)


def test_algo_capability_attribute_sizes(gpu, lt_handle) -> None:
    """Every algo capability the loaded library knows has the size of its documented dtype."""
    _, _, desc, layouts, _ = _matmul_problem(gpu, 16, 16, 16)
    pref, results = _heuristics(lt_handle, desc, layouts, 1)
    try:
        held = np.ascontiguousarray(results["algo"][:1])
        algo = held.ctypes.data
        checked = 0
        for attr in cublasLt.MatmulAlgoCapAttribute:
            try:
                size = cublasLt.matmul_algo_cap_get_attribute(algo, attr, 0, 0)
            except cublasLt.cuBLASLtError:
                assert _loader.library_info("cublasLt")["version"] != cublasLt.HEADER_VERSION, attr.name
                continue  # newer than the loaded library
            itemsize = cublasLt.get_matmul_algo_cap_attribute_dtype(attr).itemsize
            if attr in cublasLt.get_matmul_algo_cap_attribute_dtype.arrays:
                assert size % itemsize == 0, attr.name
                assert len(cublasLt.matmul_algo_cap_get(algo, attr)) == size // itemsize
            else:
                assert size == itemsize, attr.name
                cublasLt.matmul_algo_cap_get(algo, attr)
            checked += 1
        assert checked >= 15
    finally:
        _destroy(desc, layouts, pref)


def test_cufft_plan_and_exec_match_numpy(gpu) -> None:
    """A batched C2C plan (xt_make_plan_many + xt_exec) and an R2C plan (plan1d) match numpy.fft."""
    n, batch = 64, 3
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((batch, n)) + 1j * rng.standard_normal((batch, n))).astype(np.complex64)
    c64 = cufft.CudaDataType.C_32F
    plan = cufft.create()
    try:
        work = cufft.xt_make_plan_many(plan, 1, [n], None, 1, n, c64, None, 1, n, c64, batch, c64)
        assert work >= 0
        cufft.set_stream(plan, gpu.sptr)
        src, dst = gpu.put(x), gpu.empty(x.nbytes)
        cufft.xt_exec(plan, src, dst, CUFFT_FORWARD)
        np.testing.assert_allclose(
            gpu.get(dst, np.empty_like(x)), np.fft.fft(x, axis=-1), rtol=1e-4, atol=1e-3
        )
    finally:
        cufft.destroy(plan)

    real = rng.standard_normal((batch, n)).astype(np.float32)
    plan = cufft.plan1d(n, cufft.Type.R2C, batch)
    try:
        cufft.set_stream(plan, gpu.sptr)
        src, dst = gpu.put(real), gpu.empty(batch * (n // 2 + 1) * 8)
        cufft.exec_r2c(plan, src, dst)
        out = gpu.get(dst, np.empty((batch, n // 2 + 1), dtype=np.complex64))
        np.testing.assert_allclose(out, np.fft.rfft(real, axis=-1), rtol=1e-4, atol=1e-3)
    finally:
        cufft.destroy(plan)


def test_cusolver_xpotrf_xpotrs_match_numpy(gpu) -> None:
    """The 64-bit Cholesky factorization and solve (xpotrf + xpotrs) match numpy.linalg.solve."""
    n, nrhs = 32, 3
    rng = np.random.default_rng(3)
    m = rng.standard_normal((n, n))
    a = np.asfortranarray(m @ m.T + n * np.eye(n))
    b = np.asfortranarray(rng.standard_normal((n, nrhs)))
    r64f, lower = cusolverDn.CudaDataType.R_64F, cusolverDn.FillMode.LOWER
    handle = cusolverDn.create()
    params = cusolverDn.create_params()
    try:
        cusolverDn.set_stream(handle, gpu.sptr)
        d_a, d_b, d_info = gpu.put(a), gpu.put(b), gpu.put(np.full(1, -1, np.int32))
        device_bytes, host_bytes = cusolverDn.xpotrf_buffer_size(handle, params, lower, n, r64f, d_a, n, r64f)
        device_work, host_work = gpu.empty(device_bytes), np.empty(max(host_bytes, 1), np.uint8)
        cusolverDn.xpotrf(
            handle,
            params,
            lower,
            n,
            r64f,
            d_a,
            n,
            r64f,
            device_work,
            device_bytes,
            host_work.ctypes.data,
            host_bytes,
            d_info,
        )
        assert gpu.get(d_info, np.empty(1, np.int32))[0] == 0
        cusolverDn.xpotrs(handle, params, lower, n, nrhs, r64f, d_a, n, r64f, d_b, n, d_info)
        assert gpu.get(d_info, np.empty(1, np.int32))[0] == 0
        x = gpu.get(d_b, np.empty((n, nrhs), order="F"))
        np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-10, atol=1e-10)
        lwork = cusolverDn.dpotrf_buffer_size(handle, lower, n, d_a, n)
        assert isinstance(lwork, int) and lwork >= 0
    finally:
        cusolverDn.destroy_params(params)
        cusolverDn.destroy(handle)
    assert cusolver.get_version() >= 11000


def test_cublas_sgemm_matches_numpy(gpu) -> None:
    """A legacy-API cublas.sgemm with host scalars equals numpy's product."""
    rng = np.random.default_rng(4)
    a = np.asfortranarray(rng.standard_normal((8, 5), dtype=np.float32))
    b = np.asfortranarray(rng.standard_normal((5, 6), dtype=np.float32))
    handle = cublas.create()
    try:
        cublas.set_stream(handle, gpu.sptr)
        d_a, d_b, d_c = gpu.put(a), gpu.put(b), gpu.empty(8 * 6 * 4)
        alpha, beta = np.ones(1, np.float32), np.zeros(1, np.float32)
        op_n = cublas.Operation.N
        cublas.sgemm(handle, op_n, op_n, 8, 6, 5, alpha.ctypes.data, d_a, 8, d_b, 5, beta.ctypes.data, d_c, 8)
        np.testing.assert_allclose(
            gpu.get(d_c, np.empty((8, 6), np.float32, order="F")), a @ b, rtol=1e-4, atol=1e-4
        )
    finally:
        cublas.destroy(handle)
