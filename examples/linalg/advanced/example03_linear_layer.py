"""A Linear + GELU layer: forward with GELU_AUX_BIAS, backward with DGELU_BGRAD, checked with autograd.

The bias runs along the output features (``x @ W.T + b``, torch.nn.Linear's convention); nvmath
fuses it by planning the transposed product, so the aux output and bias gradient are those of
``(x @ W.T).T``.
"""

from nvmath._diagnostics.requirements import require

require("gpu", "torch")  # or exit 77 ("skipped") with a message saying what is missing

import torch

from nvmath.linalg.advanced import MatmulEpilog, matmul

batch, fin, fout = 256, 512, 384
x = torch.randn(batch, fin, device="cuda")
w = torch.randn(fout, fin, device="cuda") / fin**0.5
b = torch.randn(fout, device="cuda")

# forward: y = gelu(x @ W.T + b), keeping the pre-activation for the backward pass
y, aux = matmul(x, w.T, epilog=MatmulEpilog.GELU_AUX_BIAS, epilog_inputs={"bias": b})
gelu = torch.nn.functional.gelu
torch.testing.assert_close(
    y, gelu(torch.nn.functional.linear(x, w, b), approximate="tanh"), rtol=1e-4, atol=1e-4
)

# backward of the activation: dZ^T = (dY^T) * gelu'(Z^T), and the bias gradient, in one matmul
grad_y = torch.randn(batch, fout, device="cuda")
eye = torch.eye(batch, device="cuda")
dz_t, grads = matmul(
    grad_y.T, eye, epilog=MatmulEpilog.DGELU_BGRAD, epilog_inputs={"gelu_aux": aux["gelu_aux"]}
)

z = torch.nn.functional.linear(x, w, b).requires_grad_(True)
gelu(z, approximate="tanh").backward(grad_y)
torch.testing.assert_close(dz_t.T, z.grad, rtol=1e-4, atol=1e-4)
torch.testing.assert_close(grads["dgelu_bgrad"], z.grad.sum(0), rtol=1e-4, atol=1e-3)
print("ok")
