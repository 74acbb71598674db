"""The stateful Matmul: plan once, execute many times with new operands of the same kind.

Uses torch CPU tensors (exits with status 77, skipped, without torch).
"""

from nvmath._diagnostics.requirements import require

require("torch")  # or exit 77 ("skipped") with a message saying what is missing

import torch

import nvmath.linalg as la

a = torch.randn(128, 64, dtype=torch.float64)
b = torch.randn(64, 32, dtype=torch.float64)
c = torch.zeros(128, 32, dtype=torch.float64)

with la.Matmul(a, b, c, alpha=1.0, beta=1.0) as mm:
    mm.plan()
    acc = c
    for step in range(3):
        acc = mm.execute()  # a @ b + c
        mm.reset_operands(c=acc)  # feed the result back as c
    torch.testing.assert_close(acc, 3 * (a @ b))
    mm.reset_operands(a=torch.randn(128, 64, dtype=torch.float64), alpha=2.0)
    mm.release_operands()  # drop the references; execute() now raises until operands are reset
    try:
        mm.execute()
    except ValueError as exc:
        print("as expected:", exc)
print("ok")
