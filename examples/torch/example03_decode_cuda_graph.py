"""A decode loop (M = 1..64 tokens) of 32 nvmath Linear layers, captured once per M in a CUDA graph.

Every shape is planned in a warm-up pass (the planner cache keeps one planned matmul per shape), then
captured: replays launch the 32 cuBLASLt kernels with no host work at all. Planning a new shape
inside a capture would be refused with ``nvmath.torch.CaptureError`` (it says to warm up first).
"""

from nvmath._diagnostics.requirements import require

require("gpu", "torch")  # or exit 77 ("skipped") with a message saying what is missing

import torch

import nvmath.torch as nt

torch.manual_seed(0)
device, dtype, hidden, ffn = "cuda", torch.bfloat16, 1024, 3584
layers = torch.nn.Sequential(
    *[
        nt.Linear(hidden, ffn, activation="gelu", device=device, dtype=dtype)
        if i % 2 == 0
        else nt.Linear(ffn, hidden, device=device, dtype=dtype)
        for i in range(32)
    ]
)
graphs = {}
with torch.no_grad():
    for m in (1, 8, 64):
        static_x = torch.randn(m, hidden, device=device, dtype=dtype)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up: plans every shape outside the capture
            layers(static_x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = layers(static_x)
        graphs[m] = (graph, static_x, static_y)

    for step in range(6):  # the "decode" loop: new tokens copied into the captured input, then replay
        for m, (graph, static_x, static_y) in graphs.items():
            static_x.copy_(torch.randn_like(static_x) * 0.1)
            graph.replay()
            torch.testing.assert_close(static_y, layers(static_x))  # the same planners, eagerly
    print("replayed", len(graphs), "graphs; planner cache:", nt.default_cache.stats)

    try:
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            layers(torch.randn(3, hidden, device=device, dtype=dtype))  # M = 3 was never planned
    except nt.CaptureError as exc:
        print("refused as expected:", str(exc).split(".")[0])
    else:
        raise AssertionError("planning inside a capture should be refused")
