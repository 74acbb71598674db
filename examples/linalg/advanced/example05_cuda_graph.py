"""Capture Matmul.execute() in a CUDA graph and replay it on new data.
"""

from nvmath._diagnostics.requirements import require

require("gpu", "torch")  # or exit 77 ("skipped") with a message saying what is missing

import torch

from nvmath.linalg.advanced import Matmul

a = torch.randn(256, 128, device="cuda")
b = torch.randn(128, 64, device="cuda")
mm = Matmul(a, b)
mm.plan()

side = torch.cuda.Stream()  # warm up outside the capture (allocates the workspace)
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    mm.execute()
torch.cuda.current_stream().wait_stream(side)

graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    out = mm.execute()  # the result lives in the graph's memory pool

for _ in range(3):
    a.copy_(torch.randn_like(a))  # new data in the captured operand
    graph.replay()
    torch.testing.assert_close(out, a @ b, rtol=1e-4, atol=1e-4)
mm.free()
print("ok")
