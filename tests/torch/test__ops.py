"""The ``torch.ops.nvmath.*`` custom ops: ``opcheck``, and ``torch.compile(fullgraph=True)`` without breaks.

On the CPU the ops' real kernels run the planner on the emulated cuBLASLt (torch tensors posing as
GPU tensors) and the compile tests use the ``aot_eager`` backend (dynamo + AOTAutograd, no code
generation); on the GPU they use the default (inductor) backend and ``mode="reduce-overhead"``.
"""

from __future__ import annotations

import pytest


def _f64(torch, *shape, grad=True, gen=None):
    return torch.randn(*shape, dtype=torch.float64, generator=gen).requires_grad_(grad)


@pytest.mark.parametrize("activation", ["", "relu", "gelu"])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_op_opcheck(torch, fake_gpu, activation, bias):
    """opcheck (schema, fake kernel, autograd registration, AOT dispatch) passes for nvmath::linear."""
    gen = torch.Generator().manual_seed(1)
    x, w = _f64(torch, 2, 3, 4, gen=gen), _f64(torch, 6, 4, gen=gen)
    b = _f64(torch, 6, gen=gen) if bias else None
    torch.library.opcheck(torch.ops.nvmath.linear.default, (x, w, b, activation, True))


@pytest.mark.parametrize("hidden", [6, 8])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_mlp_op_opcheck(torch, fake_gpu, activation, hidden):
    """opcheck passes for nvmath::mlp (aux kept for the fused backward, its padding zeroed: deterministic)."""
    gen = torch.Generator().manual_seed(2)
    args = (_f64(torch, 5, 4, gen=gen), _f64(torch, hidden, 4, gen=gen), _f64(torch, hidden, gen=gen),
            _f64(torch, 3, hidden, gen=gen), _f64(torch, 3, gen=gen), activation, True)  # fmt: skip
    torch.library.opcheck(torch.ops.nvmath.mlp.default, args)


@pytest.mark.parametrize("epilog", [1, 4, 6, 164])
def test_matmul_op_opcheck(torch, fake_gpu, epilog):
    """opcheck passes for nvmath::matmul with DEFAULT, BIAS, RELU_BIAS and GELU_AUX_BIAS."""
    gen = torch.Generator().manual_seed(3)
    a, b = _f64(torch, 3, 4, gen=gen), _f64(torch, 4, 5, gen=gen)
    bias = _f64(torch, 3, gen=gen) if epilog != 1 else None
    torch.library.opcheck(torch.ops.nvmath.matmul.default, (a, b, None, bias, epilog, 1.0, 0.0))


def test_linear_op_gradcheck(torch, fake_gpu):
    """gradcheck passes through the custom op's registered autograd (the compiled path's backward)."""
    gen = torch.Generator().manual_seed(4)
    x, w, b = _f64(torch, 3, 4, gen=gen), _f64(torch, 5, 4, gen=gen), _f64(torch, 5, gen=gen)
    assert torch.autograd.gradcheck(
        lambda x, w, b: torch.ops.nvmath.linear(x, w, b, "gelu", True)[0], (x, w, b)
    )


class _Model:
    @staticmethod
    def build(torch, nt, **kw):
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nt.Linear(4, 8, activation="gelu", **kw)
                self.mlp = nt.MLP(8, 16, 8, activation="relu", **kw)
                self.fc2 = nt.Linear(8, 3, **kw)

            def forward(self, x):
                return self.fc2(self.mlp(self.fc1(x)))

        return Net()


def _graph_breaks():
    from torch._dynamo.utils import counters

    return sum(counters["graph_break"].values())


def test_compile_fullgraph_model_without_graph_breaks(torch, nt, fake_gpu):
    """A model of nvmath Linear/MLP layers compiles with fullgraph=True, no graph break, same values and grads."""
    import torch._dynamo

    torch._dynamo.reset()
    torch.manual_seed(5)
    model = _Model.build(torch, nt, dtype=torch.float64)
    x = _f64(torch, 5, 4)
    ref = model(x)
    ref_grads = torch.autograd.grad(ref.sum(), [x, *model.parameters()])
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    out = compiled(x)
    grads = torch.autograd.grad(out.sum(), [x, *model.parameters()])
    assert _graph_breaks() == 0
    torch.testing.assert_close(out, ref)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r)


def test_compile_traces_the_advanced_matmul(torch, nt, fake_gpu):
    """A function calling nvmath.linalg.advanced.matmul (GELU_BIAS) compiles fullgraph into nvmath::matmul."""
    import torch._dynamo

    import nvmath.linalg.advanced as adv

    torch._dynamo.reset()

    def f(a, b, bias):
        return adv.matmul(a, b, epilog=adv.MatmulEpilog.GELU_BIAS, epilog_inputs={"bias": bias}).sin()

    a, b, bias = _f64(torch, 3, 4), _f64(torch, 4, 5, grad=False), _f64(torch, 3)
    out = torch.compile(f, fullgraph=True, backend="aot_eager")(a, b, bias)
    torch.testing.assert_close(out, f(a, b, bias))
    ga = torch.autograd.grad(out.sum(), [a, bias])
    gr = torch.autograd.grad(f(a, b, bias).sum(), [a, bias])
    for g, r in zip(ga, gr):
        torch.testing.assert_close(g, r)
    assert _graph_breaks() == 0


def _generic_or_skip():
    import nvmath.linalg as la

    if not hasattr(la, "matmul"):
        pytest.skip("the generic matmul (nvmath.linalg.matmul) is not in this tree")
    return la.matmul


@pytest.mark.parametrize("with_c", [False, True])
def test_generic_matmul_op_opcheck_cpu(torch, nt, with_c):
    """opcheck passes for nvmath::generic_matmul on CPU tensors (the generic matmul's CPU execution)."""
    _generic_or_skip()
    gen = torch.Generator().manual_seed(7)
    a, b = _f64(torch, 2, 3, 4, gen=gen), _f64(torch, 4, 5, gen=gen)
    c = _f64(torch, 2, 3, 5, gen=gen) if with_c else None
    torch.library.opcheck(torch.ops.nvmath.generic_matmul.default, (a, b, c, 0.5, 2.0 if with_c else 0.0))


def test_compile_traces_the_generic_matmul_cpu(torch, nt):
    """A function calling nvmath.linalg.matmul compiles fullgraph (inductor, CPU tensors) with its gradients."""
    import torch._dynamo

    matmul = _generic_or_skip()
    torch._dynamo.reset()

    def f(a, b, c):
        return matmul(a, b, c, alpha=0.5, beta=2.0).relu().sum()

    gen = torch.Generator().manual_seed(8)
    a, b, c = _f64(torch, 3, 4, gen=gen), _f64(torch, 4, 5, gen=gen), _f64(torch, 3, 5, gen=gen)
    out = torch.compile(f, fullgraph=True)(a, b, c)
    grads = torch.autograd.grad(out, [a, b, c])
    ref = (0.5 * (a @ b) + 2.0 * c).relu().sum()
    torch.testing.assert_close(out, ref)
    for g, r in zip(grads, torch.autograd.grad(ref, [a, b, c])):
        torch.testing.assert_close(g, r)
    assert _graph_breaks() == 0


# ---------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_compile_fullgraph_gpu(torch_cuda, nt, mode):
    """On the GPU, the model compiles (inductor, and reduce-overhead = CUDA graphs) without graph breaks and
    matches eager over several training steps."""
    import torch._dynamo

    torch = torch_cuda
    torch._dynamo.reset()
    torch.manual_seed(6)
    model = _Model.build(torch, nt, device="cuda", dtype=torch.float32)
    compiled = torch.compile(model, fullgraph=True, mode=mode)
    for _ in range(4):  # reduce-overhead records its graph after warm-up runs
        x = torch.randn(64, 4, device="cuda", requires_grad=True)
        out = compiled(x)
        grads = torch.autograd.grad(out.square().sum(), [x, *model.parameters()])
        ref = model(x)
        ref_grads = torch.autograd.grad(ref.square().sum(), [x, *model.parameters()])
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
        for g, r in zip(grads, ref_grads):
            torch.testing.assert_close(g, r, rtol=1e-3, atol=1e-3)
    assert _graph_breaks() == 0


@pytest.mark.gpu
@pytest.mark.parametrize("activation", ["", "relu", "gelu"])
def test_linear_op_opcheck_gpu(torch_cuda, activation):
    """On the GPU, opcheck passes for nvmath::linear and nvmath::mlp in float32."""
    torch = torch_cuda
    import nvmath.torch  # noqa: F401

    mk = lambda *s: torch.randn(*s, device="cuda").requires_grad_()
    torch.library.opcheck(
        torch.ops.nvmath.linear.default, (mk(2, 16, 32), mk(48, 32), mk(48), activation, True)
    )
    if activation:
        args = (mk(16, 32), mk(64, 32), mk(64), mk(24, 64), mk(24), activation, True)
        torch.library.opcheck(torch.ops.nvmath.mlp.default, args)


@pytest.mark.gpu
def test_compile_reduce_overhead_advanced_matmul_gpu(torch_cuda, nt):
    """A function calling nvmath.linalg.advanced.matmul (GELU_BIAS) runs under reduce-overhead (CUDA graph
    trees) with gradients matching eager over several steps, without graph breaks."""
    import torch._dynamo

    import nvmath.linalg.advanced as adv

    torch = torch_cuda
    torch._dynamo.reset()

    def f(a, b, bias):
        return (
            adv.matmul(a, b, epilog=adv.MatmulEpilog.GELU_BIAS, epilog_inputs={"bias": bias}).square().sum()
        )

    compiled = torch.compile(f, fullgraph=True, mode="reduce-overhead")
    b = torch.randn(32, 48, device="cuda")
    for _ in range(4):
        a = torch.randn(64, 32, device="cuda", requires_grad=True)
        bias = torch.randn(64, device="cuda", requires_grad=True)
        out = compiled(a, b, bias)
        grads = torch.autograd.grad(out, [a, bias])
        ref = f(a, b, bias)
        ref_grads = torch.autograd.grad(ref, [a, bias])
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-3)
        for g, r in zip(grads, ref_grads):
            torch.testing.assert_close(g, r, rtol=1e-3, atol=1e-3)
    assert _graph_breaks() == 0
