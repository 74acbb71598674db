"""A 3-D distributed FFT on cuFFTMp, checked against torch.fft.fftn of the whole array on one GPU.

Each rank holds a slab (``Slab.X``: a range of the first index; the first ``64 % P`` ranks get one
more) in symmetric memory, transforms in place, and gets its slab of the result back.

    python examples/distributed/example01_fft.py                       # one process
    torchrun --nproc-per-node 2 examples/distributed/example01_fft.py  # two GPUs
    mpirun -n 2 python examples/distributed/example01_fft.py           # the same with MPI
"""

from nvmath._diagnostics.requirements import require

require("gpu", "torch", "nvshmem_host", "cufftMp")

import _launch

torch, dist, nd, rank, nranks, device = _launch.start(["nvshmem"])

from nvmath.distributed.distribution import Slab
from nvmath.distributed.fft import allocate_operand, fft

shape = (64, 48, 32)
gen = torch.Generator(device="cuda").manual_seed(0)  # every rank makes the same global array
x = torch.randn(shape, dtype=torch.complex64, device="cuda", generator=gen)

# this rank's slab, on the NVSHMEM symmetric heap (cuFFTMp exchanges data there)
local_shape = Slab.X.shape(rank, shape)
start = sum(Slab.X.shape(r, shape)[0] for r in range(rank))
mine = allocate_operand(local_shape, torch, input_dtype=torch.complex64, distribution=Slab.X)
mine.copy_(x[start : start + local_shape[0]])

result = fft(mine, distribution=Slab.X)  # in place; the result is in Slab.X too (redistribute=True)
reference = torch.fft.fftn(x)[start : start + local_shape[0]]
torch.testing.assert_close(result, reference, rtol=1e-4, atol=1e-3)

# every rank's slab, gathered, is the whole transform
parts = [torch.empty((Slab.X.shape(r, shape)[0], *shape[1:]), dtype=torch.complex64, device="cuda")
         for r in range(nranks)]  # fmt: skip
dist.all_gather(parts, result.contiguous())
torch.testing.assert_close(torch.cat(parts), torch.fft.fftn(x), rtol=1e-4, atol=1e-3)

nd.free_symmetric_memory(mine)
if rank == 0:
    print(f"distributed FFT of {shape} on {nranks} GPU(s): ok")
_launch.stop(dist, nd)
