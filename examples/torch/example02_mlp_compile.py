"""The same kind of model under torch.compile(fullgraph=True): nvmath's custom ops trace without breaks.

``nvmath.torch.Linear`` and ``nvmath.torch.MLP`` become ``torch.ops.nvmath.linear`` / ``mlp`` custom
ops with fake kernels and registered autograd, so dynamo captures the whole forward and backward.
The compiled model trains like the eager one.
"""

from nvmath._diagnostics.requirements import require

require("gpu", "torch")  # or exit 77 ("skipped") with a message saying what is missing

import torch
import torch._dynamo
from torch._dynamo.utils import counters

import nvmath.torch as nt

torch.manual_seed(0)
device, dtype = "cuda", torch.bfloat16


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nt.Linear(128, 256, activation="relu", device=device, dtype=dtype)
        self.mlp = nt.MLP(256, 1024, 256, activation="gelu", device=device, dtype=dtype)  # fused fwd + bwd
        self.out = nt.Linear(256, 8, device=device, dtype=dtype)

    def forward(self, x):
        h = self.inp(x)
        return self.out(h + self.mlp(h))


eager = Block()
compiled_model = Block()
compiled_model.load_state_dict(eager.state_dict())
compiled = torch.compile(compiled_model, fullgraph=True)
opts = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (eager, compiled_model)]

for step in range(100):
    x = torch.randn(256, 128, device=device, dtype=dtype)
    target = torch.randn(256, 8, device=device, dtype=dtype)
    losses = []
    for model, opt in zip((eager, compiled), opts):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x).float(), target.float())
        loss.backward()
        opt.step()
        losses.append(loss.item())
    if step % 25 == 0:
        print(f"step {step:3d}  eager {losses[0]:.4f}  compiled {losses[1]:.4f}")
        assert abs(losses[0] - losses[1]) <= 0.05 * abs(losses[0]), losses

breaks = sum(counters["graph_break"].values())
print("graph breaks:", breaks)
assert breaks == 0
