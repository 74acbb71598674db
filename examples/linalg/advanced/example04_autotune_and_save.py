"""Autotuning (never slower than the heuristic's first choice), a persistent autotune cache, and
saving an algorithm with numpy for later runs.
"""

from nvmath._diagnostics.requirements import require

require("gpu", "torch")  # or exit 77 ("skipped") with a message saying what is missing

import io
import tempfile
from pathlib import Path

import numpy as np
import torch

import nvmath.linalg.advanced as adv

a = torch.randn(64, 4096, device="cuda")
b = torch.randn(4096, 14336, device="cuda")

with tempfile.TemporaryDirectory() as tmp:
    adv.autotune_cache.enable(Path(tmp) / "matmul-autotune.json")  # or NVMATH_AUTOTUNE_CACHE=path
    with adv.Matmul(a, b) as mm:
        first = mm.plan()[0]
        mm.autotune(iterations=10)
        best = mm.algorithms[0]
        print(f"heuristic's first choice: {first.algorithm_id}, autotuned: {best.algorithm_id}")
        buf = io.BytesIO()
        np.save(buf, best.as_numpy())
    with adv.Matmul(a, b) as mm:  # a second planner (or process) finds the winner in the cache
        mm.plan()
        mm.autotune()
        print("autotune cache:", adv.autotune_cache)
    adv.autotune_cache.disable()

buf.seek(0)
saved = adv.Algorithm.from_numpy(np.load(buf))
with adv.Matmul(a, b) as mm:
    mm.plan(algorithms=[saved])  # no heuristic query
    torch.testing.assert_close(mm.execute(), a @ b, rtol=1e-3, atol=1e-2)
print("ok")
