"""Train an MLP built from nvmath.torch.Linear layers; its loss follows torch.nn.Linear's step by step.

Both models start from the same weights (state dicts load both ways) and see the same batches. The
nvmath model fuses bias + GELU(tanh) into the forward GEMM and the bias gradient into the
weight-gradient GEMM; its planners are cached per shape, so after the first step no matmul is
planned again (the planner cache's stats show it).
"""

from nvmath._diagnostics.requirements import require

require("gpu", "torch")  # or exit 77 ("skipped") with a message saying what is missing

import torch

import nvmath.torch as nt

torch.manual_seed(0)
device, dtype = "cuda", torch.float32
torch.backends.cuda.matmul.allow_tf32 = False  # fp32 products on both sides, for a step-by-step comparison


sizes, acts = [(64, 256), (256, 256), (256, 1)], ["gelu", "relu", None]
ours = torch.nn.Sequential(
    *[nt.Linear(i, o, activation=a, device=device, dtype=dtype) for (i, o), a in zip(sizes, acts)]
)
torch_layers = []
for (i, o), a, layer in zip(sizes, acts, ours):
    lin = torch.nn.Linear(i, o, device=device, dtype=dtype)
    lin.load_state_dict(layer.state_dict())  # same parameter names and layout: state dicts load both ways
    torch_layers += [lin] + {
        "gelu": [torch.nn.GELU(approximate="tanh")],
        "relu": [torch.nn.ReLU()],
        None: [],
    }[a]
ref = torch.nn.Sequential(*torch_layers)

opt_ours = torch.optim.SGD(ours.parameters(), lr=0.05, momentum=0.9)
opt_ref = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
true_w = torch.randn(64, 1, device=device, dtype=dtype)

steps, worst, first = 300, 0.0, None
for step in range(steps):
    x = torch.randn(512, 64, device=device, dtype=dtype)
    y = torch.tanh(x @ true_w / 8)
    losses = []
    for model, opt in ((ours, opt_ours), (ref, opt_ref)):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    first = losses[1] if first is None else first
    rel = abs(losses[0] - losses[1]) / abs(losses[1])
    worst = max(worst, rel)
    if step % 50 == 0 or step == steps - 1:
        print(f"step {step:4d}  loss nvmath {losses[0]:.6f}  torch {losses[1]:.6f}  rel diff {rel:.2e}")
        assert rel < 1e-3, f"step {step}: losses differ by {rel:.2e}"

assert losses[0] < 0.5 * first, "the model did not learn"
print(f"worst relative loss difference over {steps} steps: {worst:.2e}")
print("planner cache:", nt.default_cache.stats)
assert nt.default_cache.stats.misses <= 16, "planners are reused across steps"
