"""A tensor-parallel linear layer on torch DTensors, its GEMMs on cuBLASMp, with autograd.

``x`` is replicated, the weight ``w`` (K x N) is split by columns (``Shard(1)``, a column-parallel
layer); ``nvmath.distributed.linalg.advanced.matmul`` returns a ``Shard(1)`` DTensor, and
``backward()`` runs the two distributed GEMMs of the gradients. Checked against torch on one GPU.

    python examples/distributed/example03_dtensor_autograd.py
    torchrun --nproc-per-node 2 examples/distributed/example03_dtensor_autograd.py
    mpirun -n 2 python examples/distributed/example03_dtensor_autograd.py
"""

from nvmath._diagnostics.requirements import require

require("gpu", "torch", "nccl", "cublasmp")

import _launch

torch, dist, nd, rank, nranks, device = _launch.start(["nccl"])

from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard

from nvmath.distributed.linalg.advanced import matmul

mesh = init_device_mesh("cuda", (nranks,))
tokens, k, n = 128, 256, 64 * nranks
gen = torch.Generator(device="cuda").manual_seed(0)
x_full = torch.randn(tokens, k, device="cuda", dtype=torch.float64, generator=gen)
w_full = torch.randn(k, n, device="cuda", dtype=torch.float64, generator=gen)

x_local = x_full.clone().requires_grad_()
w_local = w_full[:, rank * (n // nranks) : (rank + 1) * (n // nranks)].clone().requires_grad_()
x = DTensor.from_local(x_local, mesh, [Replicate()], run_check=False)
w = DTensor.from_local(w_local, mesh, [Shard(1)], run_check=False, shape=(k, n), stride=(n, 1))

y = matmul(x, w)  # a DTensor, Shard(1): this rank's columns of x @ w
assert y.placements == (Shard(1),)
(y.to_local() ** 2).sum().backward()

x_ref, w_ref = x_full.clone().requires_grad_(), w_full.clone().requires_grad_()
((x_ref @ w_ref) ** 2).sum().backward()
columns = slice(rank * (n // nranks), (rank + 1) * (n // nranks))
torch.testing.assert_close(y.to_local(), (x_full @ w_full)[:, columns])
torch.testing.assert_close(w_local.grad, w_ref.grad[:, columns])
# x is replicated, so its gradient is too: the whole loss's (summed over the ranks' columns)
torch.testing.assert_close(x_local.grad, x_ref.grad)

if rank == 0:
    print(f"tensor-parallel linear, forward and gradients, on {nranks} GPU(s): ok")
_launch.stop(dist, nd)
