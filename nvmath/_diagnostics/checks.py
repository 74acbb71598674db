"""The self-test checks, one small function per feature; each area appends its own."""

from __future__ import annotations

import importlib

import numpy as np

from nvmath._diagnostics.selftest import Context, check

PUBLIC_MODULES = ("nvmath", "nvmath.memory", "nvmath.bindings", "nvmath.linalg", "nvmath.linalg.advanced", "nvmath.fft")


@check("import public modules")
def _imports(ctx: Context) -> str:
    for name in PUBLIC_MODULES:
        importlib.import_module(name)
    return f"{len(PUBLIC_MODULES)} modules"


@check("bindings: load cuBLASLt, cuBLAS, cuFFT, cuSOLVER")
def _libraries(ctx: Context) -> str:
    from nvmath.bindings import cublas, cublasLt, cufft, cusolver

    versions = (cublasLt.get_version(), cufft.get_version(), cusolver.get_version())
    cublas.get_property(cublas.LibraryPropertyType.MAJOR_VERSION)
    return "versions " + ", ".join(str(v) for v in versions)


@check("bindings: cuBLASLt descriptor create/set/get/destroy")
def _lt_descriptor(ctx: Context) -> str:
    from nvmath.bindings import cublasLt

    desc = cublasLt.matmul_desc_create(cublasLt.ComputeType.COMPUTE_32F, cublasLt.CudaDataType.R_32F)
    try:
        attr = cublasLt.MatmulDescAttribute.EPILOGUE
        value = np.array([cublasLt.Epilogue.RELU_BIAS], dtype=cublasLt.get_matmul_desc_attribute_dtype(attr))
        cublasLt.matmul_desc_set_attribute(desc, attr, value.ctypes.data, value.nbytes)
        out = np.zeros_like(value)
        cublasLt.matmul_desc_get_attribute(desc, attr, out.ctypes.data, out.nbytes)
        if out[0] != cublasLt.Epilogue.RELU_BIAS:
            raise AssertionError(f"epilogue read back as {out[0]}")
    finally:
        cublasLt.matmul_desc_destroy(desc)
    return "EPILOGUE round-trips"


@check("tensors: numpy and torch-CPU adapters see shape, strides, dtype")
def _wrap_host(ctx: Context) -> str:
    from nvmath._internal.tensors import wrap

    a = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]
    op = wrap(a)
    if (tuple(op.shape), tuple(op.strides), op.dtype) != ((4, 3), (6, 2), "float32"):
        raise AssertionError(f"numpy view wrapped as {op.shape}, {op.strides}, {op.dtype}")
    try:
        import torch
    except ImportError:
        return "numpy (torch not installed)"
    t = wrap(torch.ones(3, 5, dtype=torch.bfloat16).t())
    if (tuple(t.shape), tuple(t.strides), t.dtype) != ((5, 3), (1, 5), "bfloat16"):
        raise AssertionError(f"torch view wrapped as {t.shape}, {t.strides}, {t.dtype}")
    return "numpy, torch"


@check("tensors: numpy -> GPU -> numpy round trip on a library stream", gpu=True)
def _device_round_trip(ctx: Context) -> str:
    from nvmath._internal import streams
    from nvmath._internal.tensors import wrap

    host = np.random.default_rng(0).standard_normal((64, 33)).astype(np.float64)
    stream = streams.get_stream(None, device_id=ctx.device_id, package="numpy")
    dev = wrap(host).to(ctx.device_id, stream)
    back = dev.to("cpu", stream).unwrap(stream)
    if not np.array_equal(back, host):
        raise AssertionError("data changed on the round trip")
    return f"{host.nbytes} bytes"
