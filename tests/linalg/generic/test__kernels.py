"""The expand kernel (symm / hemm / trmm as GEMM) on a GPU: the full matrix from one stored triangle."""

from __future__ import annotations

import numpy as np
import pytest

from nvmath._internal import streams
from nvmath.linalg.generic._kernels import MODES, expand

pytestmark = pytest.mark.gpu


def _reference(x: np.ndarray, lower: bool, mode: str, complex_: bool) -> np.ndarray:
    n = x.shape[0]
    tri = np.tril(x) if lower else np.triu(x)
    strict = np.tril(x, -1) if lower else np.triu(x, 1)
    if mode == "tr":
        return tri
    if mode == "tru":
        return strict + np.eye(n)
    herm = mode == "he" and complex_
    ref = tri + (strict.conj().T if herm else strict.T)
    if herm:
        ref[np.diag_indices(n)] = np.diag(ref).real
    return ref


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("mode", list(MODES))
def test_expand(torch_cuda, dtype, lower, mode):
    """dst (n x n, column-major) = the matrix whose ``uplo`` triangle src holds, by mode."""
    torch = torch_cuda
    n, ld = 37, 41
    tdt = getattr(torch, dtype)
    wide = torch.complex128 if dtype.startswith("complex") else torch.float64
    mem = torch.randn(n, ld, dtype=wide).to(tdt).cuda()  # row j of mem is column j of the matrix X
    x = mem[:, :n].T.cpu().numpy().astype(np.complex128)
    ref = _reference(x, lower, mode, dtype.startswith("complex"))
    dst = torch.empty(n * n, dtype=tdt, device="cuda")
    expand(
        dst.data_ptr(),
        mem.data_ptr(),
        n,
        ld,
        0 if lower else 1,
        mode,
        dtype,
        streams.current_stream(0, "torch"),
    )
    torch.cuda.synchronize()
    np.testing.assert_allclose(dst.view(n, n).T.cpu().numpy(), ref, rtol=1e-6)
