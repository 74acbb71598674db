"""CUDA graphs: planned nvmath calls capture and replay; capture-unsafe planning is refused with the fix.

Decided behaviour for planners: a ``Matmul`` executed inside a captured graph keeps working eagerly,
and ``reset_operands`` after the capture changes what later *eager* calls read, never what the graph
replays (the graph holds the pointers it captured; feed it by copying into the captured tensors).
"""

from __future__ import annotations

import pytest


def test_cpu_tensors_are_never_capturing(torch, nt):
    """capturing() is False for CPU tensors (no CUDA query at all)."""
    from nvmath.torch._capture import capturing

    assert capturing(torch.ones(1)) is False


def _warm_up(torch, fn, n=2):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(n):
            fn()
    torch.cuda.current_stream().wait_stream(side)


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 8, 64])
def test_linear_inference_captures_and_replays(torch_cuda, nt, m):
    """A decode-shaped Linear(gelu) stack captured in a CUDA graph replays correctly for new inputs."""
    torch = torch_cuda
    torch.manual_seed(1)
    layers = torch.nn.Sequential(
        nt.Linear(512, 1024, activation="gelu", device="cuda", dtype=torch.bfloat16),
        nt.Linear(1024, 512, device="cuda", dtype=torch.bfloat16),
    )
    static_x = torch.randn(m, 512, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        _warm_up(torch, lambda: layers(static_x))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = layers(static_x)
        for _ in range(3):
            static_x.copy_(torch.randn_like(static_x))
            graph.replay()
            ref = layers(static_x)  # eager, same planners
            torch.testing.assert_close(static_y, ref)
            x64 = static_x.double()
            l1, l2 = layers
            r64 = torch.nn.functional.gelu(x64 @ l1.weight.double().T + l1.bias.double(), approximate="tanh")
            r64 = r64 @ l2.weight.double().T + l2.bias.double()
            assert ((static_y.double() - r64).norm() / r64.norm()).item() < 2e-2


@pytest.mark.gpu
def test_training_step_captures_and_replays(torch_cuda, nt):
    """Forward and backward of an nvmath MLP captured in one graph give eager's gradients on replay."""
    torch = torch_cuda
    torch.manual_seed(2)
    mlp = nt.MLP(256, 512, 128, device="cuda", dtype=torch.float32)
    params = list(mlp.parameters())
    static_x = torch.randn(64, 256, device="cuda", requires_grad=True)

    def step():
        return torch.autograd.grad(mlp(static_x).square().sum(), [static_x, *params])

    _warm_up(torch, step)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_grads = step()
    with torch.no_grad():
        static_x.copy_(torch.randn_like(static_x))
    graph.replay()
    for g, r in zip(static_grads, step()):
        torch.testing.assert_close(g, r)


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore:The CUDA Graph is empty")  # the refused capture records nothing
def test_first_use_inside_a_capture_is_refused(torch_cuda, nt):
    """A shape never run before raises CaptureError inside the capture, naming the fix (warm up first)."""
    torch = torch_cuda
    lin = nt.Linear(64, 32, device="cuda", cache=nt.PlannerCache(4))
    x = torch.randn(3, 64, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with (
        pytest.raises(nt.CaptureError, match="once before the capture"),
        torch.no_grad(),
        torch.cuda.graph(graph),
    ):
        lin(x)
    with torch.no_grad():
        torch.testing.assert_close(lin(x), torch.nn.functional.linear(x, lin.weight, lin.bias))


@pytest.mark.gpu
def test_planner_captured_then_reset_keeps_graph_pointers(torch_cuda):
    """Matmul.execute() captured in a graph replays on the captured operands; reset_operands afterwards
    only changes eager calls (documented behaviour)."""
    import nvmath.linalg.advanced as adv

    torch = torch_cuda
    a, b = torch.randn(128, 64, device="cuda"), torch.randn(64, 32, device="cuda")
    mm = adv.Matmul(a, b)
    try:
        mm.plan()
        _warm_up(torch, mm.execute)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = mm.execute()
        a2 = torch.randn_like(a)
        mm.reset_operands(a=a2)
        torch.testing.assert_close(mm.execute(), a2 @ b, rtol=1e-4, atol=1e-4)
        a.copy_(torch.randn_like(a))
        graph.replay()
        torch.testing.assert_close(out, a @ b, rtol=1e-4, atol=1e-4)
    finally:
        torch.cuda.synchronize()
        mm.free()


def test_capturing_now_settles_on_first_call(torch, nt, monkeypatch):
    """capturing_now() answers False outside a capture and from its first call on is torch's C query
    itself; where the query fails (a CUDA build of torch without a GPU) it becomes ``bool`` (False)."""
    from nvmath.torch import _capture

    monkeypatch.setattr(_capture, "capturing_now", _capture._first_query)
    assert _capture.capturing_now() is False
    assert _capture.capturing_now in (getattr(torch._C, "_cuda_isCurrentStreamCapturing", None), bool)
    assert _capture.capturing_now() is False

    def no_gpu():
        raise RuntimeError("Found no NVIDIA driver on your system")

    monkeypatch.setattr(torch._C, "_cuda_isCurrentStreamCapturing", no_gpu, raising=False)
    monkeypatch.setattr(_capture, "capturing_now", _capture._first_query)
    assert _capture.capturing_now() is False and _capture.capturing_now is bool
