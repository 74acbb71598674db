"""The real engines on one GPU, one process (GPU lane; skipped without a GPU or without the
``[distributed]`` wheels): the bindings load and report versions, and the runtime bootstraps NVSHMEM
and NCCL at one rank, allocates a symmetric torch tensor, frees it and finalizes.

Each check runs in a fresh subprocess with NVLink multicast off and a small symmetric heap
(``NVSHMEM_REMOTE_TRANSPORT=none``, ``NVSHMEM_SYMMETRIC_SIZE``), so an engine crash fails the test
instead of the suite.
"""

from __future__ import annotations

import gpu_child
import pytest

pytestmark = pytest.mark.gpu


def _run(code: str) -> str:
    """``code`` in a child with the hang-proof harness of ``gpu_child`` (NVLink multicast off, a
    1 GiB heap)."""
    return gpu_child.run_child(code)


PRELUDE = """
from nvmath._errors import LibraryNotFoundError
from nvmath.bindings import _loader
for lib in {libs!r}:
    try:
        _loader.library_info(lib)
    except LibraryNotFoundError as exc:
        print("SKIP: the [distributed] wheels are not installed here:", exc)
        raise SystemExit(0)
"""


def test_engine_bindings_load_and_report_versions():
    """nccl, nvshmem, cublasMp and cufftMp load from their wheels; their versions match the header majors."""
    out = _run(PRELUDE.format(libs=("nccl", "nvshmem_host", "cublasmp", "cufftMp")) + """
from nvmath.bindings import cublasMp, cufftMp, nccl, nvshmem
from nvmath.distributed import _engines
print("nvshmem host", _engines.nvshmem_host_version(), "libraries", _loader.loaded_libraries())
print("nccl", nccl.get_version(), "cublasmp", cublasMp.get_version(), "cufftmp", cufftMp.get_version())
assert nccl.get_version() >= 22902, "cuBLASMp needs NCCL >= 2.29.2"
assert nvshmem.init_status() == 0
""")
    print(out)


def test_one_rank_runtime_and_symmetric_tensor():
    """initialize at one rank (both engines), a symmetric complex64 torch tensor written and read,
    free, finalize."""
    _run(PRELUDE.format(libs=("nccl", "nvshmem_host")) + """
import numpy as np, torch
import nvmath.distributed as nd

class OneRank(nd.ProcessGroup):
    rank, nranks = 0, 1
    def broadcast_buffer(self, array, *, root=0): pass
    def allreduce_buffer(self, array, *, op): pass

torch.cuda.init()
STEP("initialize")
nd.initialize(0, OneRank())
ctx = nd.get_context()
assert ctx.nvshmem_available and ctx.nccl_comm
STEP("allocate")
x = nd.allocate_symmetric_memory((16, 32), torch, dtype=torch.complex64)
assert x.is_cuda and x.shape == (16, 32) and x.dtype == torch.complex64
ref = torch.randn(16, 32, dtype=torch.complex64)
x.copy_(ref.cuda())
assert torch.equal(x.cpu(), ref)
STEP("free and finalize")
nd.free_symmetric_memory(x)
nd.finalize()
""")
