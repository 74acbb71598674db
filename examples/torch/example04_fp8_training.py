"""Train a transformer MLP block in bf16 and in FP8 (both recipes) on generated data; compare the losses.

The block is ``x + MLP(LayerNorm(x))`` (GELU, 4x hidden) learning a fixed random "teacher" block.
Five runs from the same initial weights and batches:

* ``bf16``: ``nvmath.torch.MLP`` in bfloat16 (on the GPU; a CPU run uses torch's own bf16 layers);
* ``fp8-delayed``: ``nvmath.torch.MLP(fp8=DelayedScaling())`` -- e4m3 forward, e5m2 gradients,
  scales from an amax history;
* ``fp8-current``: ``nvmath.torch.MLP(fp8=CurrentScaling())`` -- scales from each tensor's own amax;
* ``torch-bf16``: torch's own ``nn.Linear`` / ``nn.GELU`` layers in bfloat16, a reference for the
  ``bf16`` run (two bf16 implementations differ by rounding only: their gap is the scale below which
  a recipe's gap means nothing);
* ``torch-fp32``: torch's layers in float32 throughout: how far bf16 rounding itself is from the
  loss the block can reach (a recipe between bf16 and fp32 loses nothing to bf16).

The optimizer step goes through ``nvmath.torch.fp8.optimizer_step``: a step whose FP8 scaling saw a
non-finite amax is skipped (none is expected here). The final losses (mean of the last 10% of steps)
are printed with their gap to bf16; with matplotlib installed the curves (of the first seed) are saved
as ``fp8_loss_curves.png`` in ``$OUT`` (or the temporary directory).

``--seeds N`` repeats the runs with N seeds (each seed draws its own initial weights and batches;
the teacher stays the same) and prints each recipe's gap to bf16 per seed, their mean and their
standard deviation between seeds: a one-seed gap within that deviation is noise, not a property of
the recipe.

Usage: ``python example04_fp8_training.py [--steps N] [--seeds N]`` (default: 1000 steps on a GPU of
compute capability 8.9+, 30 on the CPU, where the FP8 layers emulate the same quantized arithmetic
through torch; one seed).
"""

from nvmath._diagnostics.requirements import require

require("torch")  # or exit 77 ("skipped") with a message saying what is missing

import argparse
import importlib.util
import os
import tempfile

import torch

import nvmath.torch as nt
from nvmath.torch import fp8

gpu = torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9)
device = "cuda" if gpu else "cpu"
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--steps", type=int, default=1000 if gpu else 30)
parser.add_argument("--seeds", type=int, default=1)
args = parser.parse_args()
steps, seeds = args.steps, args.seeds
if steps < 1 or seeds < 1:
    parser.error(f"--steps and --seeds must be at least 1 (got {steps} and {seeds})")
d, tokens = (512, 4096) if gpu else (32, 64)


class Block(torch.nn.Module):
    """``x + MLP(LayerNorm(x))``; ``recipe`` None: bf16; ``"torch"``/``"torch-fp32"``: torch's own layers."""

    def __init__(self, recipe):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        if recipe in ("torch", "torch-fp32") or (recipe is None and not gpu):  # (nvmath's bf16 layers: GPU)
            self.mlp = torch.nn.Sequential(
                torch.nn.Linear(d, 4 * d), torch.nn.GELU("tanh"), torch.nn.Linear(4 * d, d)
            )
        else:
            self.mlp = nt.MLP(d, 4 * d, d, activation="gelu", fp8=recipe)

    def forward(self, x):
        return x + self.mlp(self.norm(x))


def mlp_state(block):
    """The block's parameters under nvmath.torch.MLP's names (fc1/fc2), without FP8 state."""
    names = {"mlp.0.": "mlp.fc1.", "mlp.2.": "mlp.fc2."}
    out = {}
    for k, v in block.state_dict().items():
        if "fp8_state" in k:
            continue
        for a, b in names.items():
            k = k.replace(a, b)
        out[k] = v
    return out


def load(block, state):
    """Load ``state`` (fc1/fc2 names) into ``block`` whatever its MLP's naming; keep its FP8 state."""
    own = block.state_dict()
    renamed = {}
    for k in own:
        if "fp8_state" in k:
            renamed[k] = own[k]
            continue
        key = k.replace("mlp.0.", "mlp.fc1.").replace("mlp.2.", "mlp.fc2.")
        renamed[k] = state[key]
    block.load_state_dict(renamed)


torch.manual_seed(0)
teacher_mlp = torch.nn.Sequential(torch.nn.LayerNorm(d), torch.nn.Linear(d, 4 * d), torch.nn.GELU("tanh"),
                                  torch.nn.Linear(4 * d, d)).to(device)  # fmt: skip

runs = {
    "bf16": None,
    "torch-bf16": "torch",
    "torch-fp32": "torch-fp32",
    "fp8-delayed": fp8.DelayedScaling(amax_history_len=16),
    "fp8-current": fp8.CurrentScaling(),
}
tail = max(1, steps // 10)


def train(name, recipe, init, seed):
    """``steps`` AdamW steps of a block from ``init`` on seed ``seed``'s batches; the losses."""
    torch.manual_seed(1000 * seed + 1)  # the same batches for every recipe of one seed
    model = Block(recipe)
    load(model, init)
    dtype = torch.float32 if recipe == "torch-fp32" else torch.bfloat16
    model = model.to(device, dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses, skipped = [], 0
    for _ in range(steps):
        x = torch.randn(tokens, d, device=device)
        with torch.no_grad():
            target = x + teacher_mlp(x) * 0.5
        loss = torch.nn.functional.mse_loss(model(x.to(dtype)).float(), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        skipped += not fp8.optimizer_step(opt, model)
        losses.append(float(loss.detach()))
    final = sum(losses[-tail:]) / tail
    print(f"seed {seed} {name:12s} first loss {losses[0]:.4f}  final loss {final:.5f}  skipped steps {skipped}")
    assert final < losses[0], f"{name} did not learn"
    return losses


curves, finals = {}, {name: [] for name in runs}
for seed in range(seeds):
    if seed:  # (seed 0 draws its initial weights right after the teacher's, as runs of one seed always did)
        torch.manual_seed(1000 * seed)
    init = mlp_state(Block(fp8.CurrentScaling()))
    for name, recipe in runs.items():
        losses = train(name, recipe, init, seed)
        curves.setdefault(name, losses)
        finals[name].append(sum(losses[-tail:]) / tail)

for name in ("torch-bf16", "torch-fp32", "fp8-delayed", "fp8-current"):
    gaps = [f / b - 1 for f, b in zip(finals[name], finals["bf16"])]
    mean = sum(gaps) / seeds
    spread = ""
    if seeds > 1:
        sd = (sum((g - mean) ** 2 for g in gaps) / (seeds - 1)) ** 0.5
        spread = f" (mean of {seeds} seeds: {', '.join(f'{g:+.2%}' for g in gaps)}; standard deviation {sd:.2%})"
    print(f"{name}: final loss {mean:+.2%} against bf16{spread}")
    if name != "torch-fp32":  # (a reference, not a bf16 run: its gap is what it measures)
        assert abs(mean) < 0.10, f"{name}'s final loss is {mean:+.2%} off bf16's"

if importlib.util.find_spec("matplotlib") is not None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, losses in curves.items():
        ax.plot(losses, label=name, linewidth=1)
    ax.set(xlabel="step", ylabel="MSE loss", yscale="log", title=f"MLP block, {device}, {steps} steps")
    ax.legend()
    path = os.path.join(os.environ.get("OUT") or tempfile.gettempdir(), "fp8_loss_curves.png")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    print(f"loss curves: {path}")
else:
    print("matplotlib is not installed: no plot")
