"""The mirror kernel (symm / hemm as GEMM) on a GPU: the full matrix from one stored triangle."""

from __future__ import annotations

import numpy as np
import pytest

from nvmath._internal import streams
from nvmath.linalg.generic._kernels import mirror

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("hermitian", [False, True])
def test_mirror(torch_cuda, dtype, lower, hermitian):
    """dst (n x n, column-major) = the symmetric / Hermitian matrix whose ``uplo`` triangle src holds."""
    torch = torch_cuda
    n, ld = 37, 41
    tdt = getattr(torch, dtype)
    mem = torch.randn(n, ld, dtype=torch.complex128 if dtype.startswith("complex") else torch.float64)
    mem = mem.to(tdt).cuda()  # row j of mem is column j of the column-major matrix X
    x = mem[:, :n].T.cpu().numpy().astype(np.complex128)
    tri = np.tril(x) if lower else np.triu(x)
    strict = np.tril(x, -1) if lower else np.triu(x, 1)
    herm = hermitian and dtype.startswith("complex")
    ref = tri + (strict.conj().T if herm else strict.T)
    if herm:
        ref[np.diag_indices(n)] = np.diag(ref).real
    dst = torch.empty(n * n, dtype=tdt, device="cuda")
    sh = streams.current_stream(0, "torch")
    mirror(dst.data_ptr(), mem.data_ptr(), n, ld, 0 if lower else 1, hermitian, dtype, sh)
    torch.cuda.synchronize()
    out = dst.view(n, n).T.cpu().numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-6)
