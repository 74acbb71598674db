"""A stateful Matmul with a fused bias + ReLU epilog, reused for new data with reset_operands().
"""

from nvmath._diagnostics.requirements import require

require("gpu", "torch")  # or exit 77 ("skipped") with a message saying what is missing

import torch

from nvmath.linalg.advanced import Matmul, MatmulEpilog

m, k, n = 4096, 1024, 4096
a = torch.randn(m, k, device="cuda", dtype=torch.float16)
b = torch.randn(k, n, device="cuda", dtype=torch.float16)
bias = torch.randn(m, device="cuda", dtype=torch.float16)  # one value per row of the result

with Matmul(a, b) as mm:
    algorithms = mm.plan(epilog=MatmulEpilog.RELU_BIAS, epilog_inputs={"bias": bias})
    print(f"{len(algorithms)} algorithms; first: {algorithms[0]}")
    out = mm.execute()
    torch.testing.assert_close(out, torch.relu(a @ b + bias[:, None]), rtol=1e-2, atol=1e-1)

    for step in range(3):  # new data, same layout: no re-planning
        a.copy_(torch.randn_like(a))
        bias.normal_()
        mm.reset_operands(a=a, epilog_inputs={"bias": bias})
        out = mm.execute()
        torch.testing.assert_close(out, torch.relu(a @ b + bias[:, None]), rtol=1e-2, atol=1e-1)
print("ok")
