"""FP8 block scaling on Hopper, DeepSeek-style: activations in 1 x 128 blocks, weights in 128 x 128 blocks.

The scaling mode comes from the scale shapes: ``a``'s scale ``(M, K/128)`` is VEC128_32F, ``b``'s
``(K/128, N/128)`` is BLK128x128_32F. Scales in cuBLASLt's own layout are used in place (so
updating them in place is seen by the next ``execute()``); others are copied when given.
"""

from nvmath._diagnostics.requirements import require

require("gpu", "torch")  # or exit 77 ("skipped") with a message saying what is missing

import sys

import torch

import nvmath
from nvmath.bindings import cublasLt
from nvmath.linalg.advanced import Matmul

if torch.cuda.get_device_capability() < (9, 0) or cublasLt.get_version() < 120900:
    print("FP8 block scaling needs compute capability 9.0 and cuBLASLt 12.9; skipping")
    sys.exit(77)

tokens, fin, fout = 512, 1024, 768
x = torch.randn(tokens, fin, device="cuda")
w = torch.randn(fout, fin, device="cuda") / fin**0.5
fmax = torch.finfo(torch.float8_e4m3fn).max

# activations: one scale per token and 128 input features (M x K/128)
xs = x.view(tokens, fin // 128, 128).abs().amax(-1) / fmax
xq = (x.view(tokens, fin // 128, 128) / xs[..., None]).view(tokens, fin).to(torch.float8_e4m3fn)
# weights: one scale per 128 x 128 block (N/128 x K/128)
ws = w.view(fout // 128, 128, fin // 128, 128).abs().amax((1, 3)) / fmax
wq = (
    (w.view(fout // 128, 128, fin // 128, 128) / ws[:, None, :, None]).view(fout, fin).to(torch.float8_e4m3fn)
)

# cuBLASLt's layouts: a's scale contiguous along M, b's contiguous along K (here K/128 = 8, a
# multiple of 4, so ws.T of the C-contiguous ws needs no padding): both are used in place
xs_lt = xs.T.contiguous().T
scales = {"a": xs_lt, "b": ws.T}
bf16 = {"result_type": nvmath.CudaDataType.CUDA_R_16BF}
with Matmul(xq, wq.T, quantization_scales=scales, options=bf16) as mm:
    mm.plan()
    y = mm.execute()
    want = x @ w.T
    err = float((y.float() - want).norm() / want.norm())
    print(f"y = x @ w.T in FP8 with block scales: {tuple(y.shape)} {y.dtype}, relative error {err:.3f}")
    assert err < 0.08, err

    # the next batch of activations: new data and scales, same plan (in place: no copies)
    x2 = torch.randn(tokens, fin, device="cuda")
    xs2 = x2.view(tokens, fin // 128, 128).abs().amax(-1) / fmax
    xq2 = (x2.view(tokens, fin // 128, 128) / xs2[..., None]).view(tokens, fin).to(torch.float8_e4m3fn)
    xs_lt.copy_(xs2)  # same tensor, cuBLASLt's layout: seen by the next execute()
    mm.reset_operands(a=xq2)
    y2 = mm.execute()
    err2 = float((y2.float() - x2 @ w.T).norm() / (x2 @ w.T).norm())
    print(f"second batch: relative error {err2:.3f}")
    assert err2 < 0.08, err2
