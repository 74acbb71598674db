"""A distributed matmul on cuBLASMp, with a fused bias + ReLU epilog, checked against one GPU.

``a`` (M x K) is split by rows over the ranks and ``b`` (K x N) by columns; the result is split by
columns like ``b`` (cuBLASMp gathers ``a`` while it multiplies). Each rank's bias holds the rows of
the result it has (here all M rows, since the result is split by columns).

    python examples/distributed/example02_matmul.py
    torchrun --nproc-per-node 2 examples/distributed/example02_matmul.py
    mpirun -n 2 python examples/distributed/example02_matmul.py
"""

from nvmath._diagnostics.requirements import require

require("gpu", "torch", "nccl", "cublasmp")

import _launch

torch, dist, nd, rank, nranks, device = _launch.start(["nccl"])

from nvmath.distributed.distribution import Slab
from nvmath.distributed.linalg.advanced import Matmul, MatmulAlgoType, MatmulEpilog

m, k, n = 256 * nranks, 512, 128 * nranks
gen = torch.Generator(device="cuda").manual_seed(0)  # every rank makes the same global matrices
a = torch.randn(m, k, device="cuda", generator=gen)
b = torch.randn(k, n, device="cuda", generator=gen)
bias = torch.randn(m, device="cuda", generator=gen)

rows, cols = m // nranks, n // nranks
a_mine = a[rank * rows : (rank + 1) * rows]  # Slab.X: this rank's rows (C order locally is fine)
b_mine = b[:, rank * cols : (rank + 1) * cols].contiguous()  # Slab.Y: this rank's columns

options = {"inplace": False, "algo_type": MatmulAlgoType.SPLIT_P2P}  # overlapped, peer to peer
with Matmul(a_mine, b_mine, distributions=[Slab.X, Slab.Y, Slab.Y], options=options) as mm:
    mm.plan(epilog=MatmulEpilog.RELU_BIAS, epilog_inputs={"bias": bias})
    d_mine = mm.execute()
    torch.cuda.synchronize()

reference = torch.relu(a @ b + bias[:, None])
torch.testing.assert_close(d_mine, reference[:, rank * cols : (rank + 1) * cols], rtol=1e-3, atol=1e-2)
parts = [torch.empty_like(d_mine.contiguous()) for _ in range(nranks)]
dist.all_gather(parts, d_mine.contiguous())
torch.testing.assert_close(torch.cat(parts, dim=1), reference, rtol=1e-3, atol=1e-2)

if rank == 0:
    print(f"distributed matmul {m}x{k} @ {k}x{n} + bias, ReLU on {nranks} GPU(s): ok")
_launch.stop(dist, nd)
