"""GPU tests of the block-scale helpers: torch CUDA and cupy tensors give what CPU tensors give."""

from __future__ import annotations

import numpy as np
import pytest

from nvmath.linalg.advanced.helpers.matmul import (
    apply_mxfp8_scale,
    create_mxfp8_scale,
    expand_block_scale,
    quantize_to_fp4,
    to_block_scale,
    unpack_fp4,
)

pytestmark = pytest.mark.gpu


def test_torch_cuda_matches_cpu():
    """create (on a side stream), apply, expand and to_block_scale agree with the CPU results."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    x = (torch.randn(2, 128, 256) * 4).to(torch.float8_e4m3fn)
    exps = torch.randint(-20, 20, (2, 128, 8), dtype=torch.int32)
    x_gpu, exps_gpu = x.cuda(), exps.cuda()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())  # the inputs are ready before the side stream reads them
    gpu_scales = create_mxfp8_scale(x_gpu, exps_gpu, stream=stream)
    stream.synchronize()
    cpu_scales = create_mxfp8_scale(x, exps)
    assert gpu_scales.is_cuda and torch.equal(gpu_scales.cpu(), cpu_scales)
    assert torch.equal(apply_mxfp8_scale(x_gpu, gpu_scales).cpu(), apply_mxfp8_scale(x, cpu_scales))
    expanded = expand_block_scale(cpu_scales, x, "MXFP8", device="cuda")
    assert expanded.is_cuda and torch.equal(expanded.cpu(), expand_block_scale(cpu_scales, x, "MXFP8"))
    assert torch.equal(to_block_scale((exps + 127).to(torch.uint8).cuda(), x, "MXFP8").cpu(), cpu_scales)
    values = torch.randn(128, 64) * 3
    packed = quantize_to_fp4(values.cuda(), axis=-1)
    assert torch.equal(
        unpack_fp4(packed, axis=-1).cpu(), unpack_fp4(quantize_to_fp4(values, axis=-1), axis=-1)
    )


def test_cupy_matches_numpy():
    """cupy operands get cupy scales on their device, equal to numpy's."""
    cupy = pytest.importorskip("cupy")
    x = np.linspace(-8, 8, 128 * 128, dtype=np.float32).reshape(128, 128)
    exps = (np.arange(128 * 4, dtype=np.int32).reshape(128, 4) % 11) - 5
    scales = create_mxfp8_scale(cupy.asarray(x), cupy.asarray(exps))
    assert isinstance(scales, cupy.ndarray)
    assert np.array_equal(cupy.asnumpy(scales), create_mxfp8_scale(x, exps))
    got = apply_mxfp8_scale(cupy.asarray(x), scales)
    assert np.array_equal(cupy.asnumpy(got), apply_mxfp8_scale(x, cupy.asnumpy(scales)))
