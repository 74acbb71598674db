"""Eigenvalues of Hermitian matrices, the SVD and QR, on torch tensors (CPU here; CUDA tensors run on the GPU)."""

from nvmath._diagnostics.requirements import require

require("torch")  # or exit 77 ("skipped") with a message saying what is missing

import torch

from nvmath import linalg

torch.manual_seed(0)
a = torch.randn(8, 32, 32, dtype=torch.complex64)
h = (a + a.mH) / 2

w, v = linalg.eigh(h)  # eigenvalues ascending, eigenvectors in the columns
print("eigh residual:", (h @ v - v * w.unsqueeze(-2)).abs().max().item())

u, s, vh = linalg.svd(a, full_matrices=False)
print("svd residual:", (u * s.unsqueeze(-2).to(u.dtype) @ vh - a).abs().max().item())
print("singular values match:", torch.allclose(linalg.svdvals(a), s))

q, r = linalg.qr(a[:, :, :20])  # reduced: q is 32x20, r is 20x20
print("qr residual:", (q @ r - a[:, :, :20]).abs().max().item(), "shapes:", tuple(q.shape), tuple(r.shape))
