"""The distributed matmul on the real cuBLASMp (GPU lane; skipped without a GPU or without the
``[distributed]`` wheels: cuBLASMp, NCCL >= 2.29.2).

One process, one rank (cuBLASMp runs a local GEMM at one rank): float32 / float64 / complex64 /
bfloat16, Fortran and C local orders, transposes, in place and not, against numpy's float64 result
and torch's matmul. Each check runs in a fresh subprocess with NVLink multicast off, so an engine
crash fails the test instead of the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[4]
ENV = {"NVSHMEM_REMOTE_TRANSPORT": "none", "NVSHMEM_DISABLE_NVLS": "1", "NCCL_NVLS_ENABLE": "0",
       "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}  # fmt: skip

PRELUDE = """
from nvmath._errors import LibraryNotFoundError
from nvmath.bindings import _loader
for lib in ("nccl", "cublasmp"):
    try:
        _loader.library_info(lib)
    except LibraryNotFoundError as exc:
        print("SKIP: the [distributed] wheels are not installed here:", exc)
        raise SystemExit(0)
import numpy as np, torch
import nvmath.distributed as nd
import nvmath.distributed.linalg.advanced as dla
from nvmath.distributed.distribution import BlockNonCyclic, ProcessGrid, Slab

class OneRank(nd.ProcessGroup):
    rank, nranks = 0, 1
    def broadcast_buffer(self, array, *, root=0): pass
    def allreduce_buffer(self, array, *, op): pass

torch.cuda.init()
nd.initialize(0, OneRank(), backends=["nccl"])
"""


def _run(code: str) -> str:
    env = {**os.environ, **ENV, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-c", PRELUDE + textwrap.dedent(code)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    if "SKIP:" in done.stdout:
        pytest.skip(done.stdout.split("SKIP:", 1)[1].strip())
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "bfloat16"])
@pytest.mark.parametrize(
    ("order_a", "order_b", "order_c"), [("F", "F", "F"), ("C", "C", "C"), ("C", "F", "F")]
)
def test_one_rank_matches_numpy_and_torch(dtype, order_a, order_b, order_c):
    """alpha a @ b + beta c in place at one rank equals numpy's float64 result and torch.matmul."""
    _run(f"""
    dtype = getattr(torch, "{dtype}")
    def make(shape, order):
        x = torch.randn(shape, dtype=torch.float64 if dtype.is_floating_point else torch.complex128)
        x = x.to(dtype).cuda()
        return x if order == "C" else x.t().contiguous().t()
    a, b, c = make((64, 48), "{order_a}"), make((48, 80), "{order_b}"), make((64, 80), "{order_c}")
    ref = (1.5 * a.cpu().to(torch.complex128 if dtype.is_complex else torch.float64)
           @ b.cpu().to(torch.complex128 if dtype.is_complex else torch.float64)
           + 0.5 * c.cpu().to(torch.complex128 if dtype.is_complex else torch.float64)).numpy()
    tq = (1.5 * (a @ b) + 0.5 * c).cpu().to(torch.complex128 if dtype.is_complex else torch.float64).numpy()
    d = dla.matmul(a, b, c, distributions=[Slab.X, Slab.Y, Slab.X], alpha=1.5, beta=0.5)
    torch.cuda.synchronize()
    assert d.data_ptr() == c.data_ptr()
    got = d.cpu().to(torch.complex128 if dtype.is_complex else torch.float64).numpy()
    tol = {{"float32": 1e-4, "float64": 1e-12, "complex64": 1e-4, "bfloat16": 3e-2}}["{dtype}"]
    scale = np.abs(ref).max()
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * scale)
    np.testing.assert_allclose(got, tq, rtol=tol, atol=tol * scale)
    nd.finalize()
    print("ok")
    """)


def test_one_rank_transposed_not_in_place_and_lifecycle():
    """op(a) = a.T through qualifiers into a new result on a 1x1 block grid; a Matmul reused with
    reset_operands; finalize refuses while it is alive."""
    _run("""
    grid = BlockNonCyclic(ProcessGrid(shape=(1, 1)))
    a = torch.randn(30, 20, dtype=torch.float64, device="cuda")
    b = torch.randn(30, 10, dtype=torch.float64, device="cuda")
    q = np.zeros(2, dtype=[("is_transpose", "<i4"), ("is_conjugate", "<i4")]); q[0]["is_transpose"] = 1
    mm = dla.Matmul(a, b, distributions=[grid] * 3, qualifiers=q, options={"inplace": False})
    mm.plan()
    d = mm.execute()
    torch.cuda.synchronize()
    np.testing.assert_allclose(d.cpu().numpy(), (a.T @ b).cpu().numpy(), rtol=1e-12, atol=1e-10)
    a2 = torch.randn(30, 20, dtype=torch.float64, device="cuda")
    mm.reset_operands(a=a2)
    d = mm.execute()
    torch.cuda.synchronize()
    np.testing.assert_allclose(d.cpu().numpy(), (a2.T @ b).cpu().numpy(), rtol=1e-12, atol=1e-10)
    try:
        nd.finalize()
    except RuntimeError:
        pass
    else:
        raise AssertionError("finalize with a live Matmul succeeded")
    mm.free()
    nd.finalize()
    print("ok")
    """)
