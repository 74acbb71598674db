"""A mixture-of-experts layer with 8 experts and uneven token counts on nvmath.torch.GroupedLinear.

A router sends each token to its top expert; the tokens are sorted by expert, the per-expert counts
come from ``torch.bincount``, and two ``GroupedLinear`` layers (up and down projections, GELU
between) run every expert's tokens on the GPU as per-expert cuBLASLt GEMMs into slices of one output
once the counts repeat, else one grouped GEMM launch per product (the CPU runs a loop of torch
matmuls). The output and the gradients are checked against
a loop of ``torch.nn.Linear`` per expert, then the layer trains a few steps on generated data.
"""

from nvmath._diagnostics.requirements import require

require("torch")  # or exit 77 ("skipped") with a message saying what is missing

import torch

import nvmath.torch as nt

device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = torch.bfloat16 if device == "cuda" else torch.float32
torch.manual_seed(0)
experts, d, hidden, tokens = (8, 256, 512, 4096) if device == "cuda" else (8, 64, 128, 1024)


class MoE(torch.nn.Module):
    """Top-1 routed experts: ``down_e(gelu(up_e(x)))`` for each token's expert ``e``, gated by its probability."""

    def __init__(self):
        super().__init__()
        self.router = torch.nn.Linear(d, experts, bias=False)
        self.up = nt.GroupedLinear(experts, d, hidden)
        self.down = nt.GroupedLinear(experts, hidden, d)

    def forward(self, x):
        probs = self.router(x).softmax(-1)
        gate, expert = probs.max(-1)
        order = torch.argsort(expert, stable=True)  # tokens grouped by expert
        counts = torch.bincount(expert, minlength=experts)
        h = torch.nn.functional.gelu(self.up(x[order], counts), approximate="tanh")
        y = torch.empty_like(x)
        y[order] = self.down(h, counts)
        return y * gate[:, None], counts, gate, expert


moe = MoE().to(device, dtype)
# skew the router so the experts get uneven loads
with torch.no_grad():
    moe.router.weight.mul_(torch.linspace(0.2, 3.0, experts, device=device, dtype=dtype)[:, None])

x = torch.randn(tokens, d, device=device, dtype=dtype)
y, counts, gate, expert = moe(x)
print("tokens per expert:", counts.tolist())
assert len(set(counts.tolist())) > 1, "expected uneven counts"

# the same computation as a loop of torch.nn.Linear, one per expert
g = torch.randn_like(y)
y.backward(g)
xs = x.detach().double().requires_grad_()
w_up, b_up = moe.up.weight.detach().double().requires_grad_(), moe.up.bias.detach().double().requires_grad_()
w_dn, b_dn = (
    moe.down.weight.detach().double().requires_grad_(),
    moe.down.bias.detach().double().requires_grad_(),
)
gate = gate.detach().double()  # the model's routing (a float64 router could break near-ties differently)
ref = torch.zeros_like(xs)
for e in range(experts):
    rows = (expert == e).nonzero().squeeze(1)
    h = torch.nn.functional.gelu(torch.nn.functional.linear(xs[rows], w_up[e], b_up[e]), approximate="tanh")
    ref[rows] = torch.nn.functional.linear(h, w_dn[e], b_dn[e])
ref = ref * gate[:, None]
ref.backward(g.double())


def rel(a, b):
    return float((a.double() - b).norm() / b.norm())


tol = 3e-2 if dtype == torch.bfloat16 else 1e-5
errors = {"output": rel(y.detach(), ref.detach()), "up.weight.grad": rel(moe.up.weight.grad, w_up.grad),
          "down.weight.grad": rel(moe.down.weight.grad, w_dn.grad), "down.bias.grad": rel(moe.down.bias.grad, b_dn.grad)}  # fmt: skip
for name, err in errors.items():
    print(f"{name:18s} relative error against the per-expert loop: {err:.2e}")
    assert err < tol, name

# a few training steps: the experts learn a random linear map
target_map = torch.randn(d, d, device=device, dtype=dtype) / d**0.5
opt = torch.optim.Adam(moe.parameters(), lr=1e-3)
losses = []
for step in range(20):
    x = torch.randn(tokens, d, device=device, dtype=dtype)
    loss = torch.nn.functional.mse_loss(moe(x)[0].float(), (x @ target_map).float())
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    losses.append(float(loss.detach()))
print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}")
assert losses[-1] < losses[0]
