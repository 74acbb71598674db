"""Machine ceilings: device-to-device copy bandwidth and the bf16 GEMM rate.

These are the numbers every other suite is read against (TARGETS.md quotes about 4.3 TB/s for a
D2D copy, read + write, and about 790 TFLOP/s for bf16 8192^3 on an H200).
"""

from __future__ import annotations

from typing import Any

from benchmarks.registry import Case, Prepared, register
from benchmarks.suites._data import cupy_on_ctx_stream, require_gpu, rotate, torch_on_ctx_stream, torch_random

MiB = 1 << 20
GEMM_N = 8192


def _copy_torch(nbytes: int):
    def setup(ctx: Any):
        torch = torch_on_ctx_stream(ctx)
        n = nbytes // 4
        pairs = [
            (torch_random(torch, (n,), torch.float32), torch.empty(n, device="cuda"))
            for _ in range(ctx.rotation(2 * nbytes))
        ]
        return rotate([lambda s=s, d=d: d.copy_(s) for s, d in pairs])

    return setup


def _copy_cupy(nbytes: int):
    def setup(ctx: Any):
        cupy = cupy_on_ctx_stream(ctx)
        n = nbytes // 4
        pairs = [
            (cupy.random.random_sample(n, dtype=cupy.float32) + 0.5, cupy.empty(n, dtype=cupy.float32))
            for _ in range(ctx.rotation(2 * nbytes))
        ]
        return rotate([lambda s=s, d=d: cupy.copyto(d, s) for s, d in pairs])

    return setup


def _copy_core(nbytes: int):
    def setup(ctx: Any):
        require_gpu(ctx)
        from cuda.core import Device

        device, stream = Device(ctx.device_id), ctx.stream
        buffers = [
            (device.allocate(nbytes, stream=stream), device.allocate(nbytes, stream=stream))
            for _ in range(ctx.rotation(2 * nbytes))
        ]
        from cuda.bindings import driver

        for src, _ in buffers:  # never-zero bytes
            driver.cuMemsetD8Async(
                driver.CUdeviceptr(int(src.handle)), 0x3F, nbytes, driver.CUstream(ctx.stream_handle)
            )
        stream.sync()

        def teardown():
            for src, dst in buffers:
                src.close()
                dst.close()

        fn = rotate([lambda s=s, d=d: d.copy_from(s, stream=stream) for s, d in buffers])
        return Prepared(fn=fn, teardown=teardown)

    return setup


for _size in (1024 * MiB, 16 * MiB):
    register(
        Case(
            suite="ceilings",
            name=f"copy-d2d-{_size // MiB}MiB",
            setups={"torch": _copy_torch(_size), "cupy": _copy_cupy(_size), "cuda.core": _copy_core(_size)},
            bytes=2 * _size,
            quick=_size > 16 * MiB,
            description=f"device-to-device copy of {_size // MiB} MiB; GB/s counts read + write",
        )
    )


def _gemm_torch(ctx: Any):
    torch = torch_on_ctx_stream(ctx)
    n = GEMM_N
    a = torch_random(torch, (n, n), torch.bfloat16)
    b = torch_random(torch, (n, n), torch.bfloat16)
    c = torch.empty((n, n), device="cuda", dtype=torch.bfloat16)
    return lambda: torch.matmul(a, b, out=c)


register(
    Case(
        suite="ceilings",
        name=f"gemm-bf16-{GEMM_N}",
        setups={"torch": _gemm_torch},
        flops=2.0 * GEMM_N**3,
        description=f"torch bf16 {GEMM_N}^3 matmul, random data",
    )
)
