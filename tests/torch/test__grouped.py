"""GroupedLinear / grouped_linear (nvmath.torch._grouped): forward and backward equal a loop of
torch.nn.Linear (one per group) on the groups' tokens; counts checked before any launch; GPU: the same
on bf16 and against torch._grouped_mm where torch has it."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import nvmath.torch as nt
from nvmath.torch._grouped import check_counts


def loop_reference(layer, x, counts):
    """A loop of torch.nn.Linear over the groups (float64), its output and parameter/input grads."""
    outs = []
    w = layer.weight.detach().double().requires_grad_()
    b = None if layer.bias is None else layer.bias.detach().double().requires_grad_()
    xd = x.detach().double().requires_grad_()
    start = 0
    for g, c in enumerate(counts):
        outs.append(torch.nn.functional.linear(xd[start : start + c], w[g], None if b is None else b[g]))
        start += c
    return torch.cat(outs), xd, w, b


def rel(a, b):
    return float((a.double() - b.double()).norm() / max(float(b.double().norm()), 1e-30))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("counts", [[5, 0, 9, 2], [0, 0, 16, 0], [4, 4, 4, 4]], ids=["uneven", "one", "even"])
def test_forward_backward_equal_loop(dtype, bias, counts):
    """Output and gradients (x, weight, bias) equal a loop of nn.Linear (empty groups: zero grads)."""
    torch.manual_seed(0)
    layer = nt.GroupedLinear(4, 12, 7, bias=bias, dtype=dtype)
    x = torch.randn(sum(counts), 12, dtype=dtype, requires_grad=True)
    y = layer(x, torch.tensor(counts))
    g = torch.randn_like(y)
    y.backward(g)
    want, xd, w, b = loop_reference(layer, x, counts)
    want.backward(g.double())
    tol = 1e-2 if dtype == torch.bfloat16 else 1e-5
    assert y.dtype == dtype and y.shape == (sum(counts), 7)
    assert rel(y.detach(), want.detach()) < tol
    assert rel(x.grad, xd.grad) < tol and rel(layer.weight.grad, w.grad) < tol
    for k, c in enumerate(counts):
        if c == 0:
            assert not layer.weight.grad[k].any()
    if bias:
        assert rel(layer.bias.grad, b.grad) < tol


def test_parameters_and_init():
    """weight (G, out, in), bias (G, out), each group initialised within nn.Linear's bounds."""
    layer = nt.GroupedLinear(3, 8, 5)
    assert layer.weight.shape == (3, 5, 8) and layer.bias.shape == (3, 5)
    w, b = layer.weight.detach(), layer.bias.detach()
    assert float(w.abs().max()) <= 1 / 8**0.5 + 1e-6 and float(b.abs().max()) <= 1 / 8**0.5
    assert "num_groups=3" in repr(layer)
    with pytest.raises(ValueError, match="num_groups"):
        nt.GroupedLinear(0, 8, 5)


@pytest.mark.parametrize(
    "counts, exc, word",
    [(torch.tensor([1.0, 2.0]), TypeError, "integer tensor"), (torch.tensor([True, False]), TypeError, "integer"),
     ([1, 2.0], TypeError, "ints"), ("12", TypeError, "sequence"), ([3], ValueError, "one entry per group"),
     ([4, -1], ValueError, ">= 0"), ([1, 1], ValueError, "sum to 2 but the input has 3"),
     (torch.tensor([[1, 2]]), ValueError, "1-D")],
)  # fmt: skip
def test_bad_counts_raise_before_launch(counts, exc, word, monkeypatch):
    """Wrong dtype, length, sign or sum of the counts raises, naming it, and launches nothing."""
    from nvmath.torch import _grouped

    monkeypatch.setattr(_grouped, "_grouped_mm", lambda *a: pytest.fail("launched"))
    layer = nt.GroupedLinear(2, 4, 4)
    with pytest.raises(exc, match=word):
        layer(torch.randn(3, 4), counts)


def test_one_grouped_call_per_product(monkeypatch):
    """Forward, dgrad and wgrad are one sequence call each (one grouped launch on the GPU), over the
    groups that have tokens."""
    from nvmath.torch import _grouped

    calls = []
    real = _grouped._grouped_mm
    monkeypatch.setattr(
        _grouped, "_grouped_mm", lambda a, b, c, beta: (calls.append(len(a)), real(a, b, c, beta))
    )
    layer = nt.GroupedLinear(4, 8, 8)
    x = torch.randn(10, 8, requires_grad=True)
    layer(x, [3, 0, 7, 0]).sum().backward()
    assert calls == [2, 2, 2]


def test_bad_shapes_and_dtypes():
    """Input of the wrong width or rank, a mismatched dtype: RuntimeError naming the shapes/dtypes."""
    layer = nt.GroupedLinear(2, 4, 4)
    with pytest.raises(RuntimeError, match="does not fit"):
        layer(torch.randn(3, 5), [1, 2])
    with pytest.raises(RuntimeError, match="dtype"):
        layer(torch.randn(3, 4, dtype=torch.float64), [1, 2])
    assert check_counts((1, 2), 2, 3) == [1, 2]


def test_matches_torch_grouped_mm_cpu_if_available():
    """Where torch._grouped_mm runs (CPU bf16 in recent torch), the output equals it plus the bias."""
    gm = getattr(torch, "_grouped_mm", None)
    if gm is None:
        pytest.skip("this torch has no torch._grouped_mm")
    layer = nt.GroupedLinear(3, 16, 32, dtype=torch.bfloat16)
    counts = [8, 0, 24]
    x = torch.randn(32, 16, dtype=torch.bfloat16)
    try:
        want = gm(x, layer.weight.detach().transpose(-2, -1), offs=torch.tensor(counts).cumsum(0).int())
    except RuntimeError as exc:
        pytest.skip(f"torch._grouped_mm does not run here: {exc}")
    want = want + torch.repeat_interleave(layer.bias.detach(), torch.tensor(counts), dim=0)
    assert rel(layer(x, counts).detach(), want) < 1e-2


# ---------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_gpu_equal_loop_and_grouped_mm(dtype):
    """On the GPU (one grouped launch per product): equal to the loop of nn.Linear, and to torch._grouped_mm (bf16)."""
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    torch.manual_seed(0)
    counts = [300, 0, 17, 1024, 5, 200, 64, 438]
    layer = nt.GroupedLinear(8, 256, 512, device="cuda", dtype=dtype)
    x = torch.randn(sum(counts), 256, device="cuda", dtype=dtype, requires_grad=True)
    y = layer(x, torch.tensor(counts, device="cuda"))
    g = torch.randn_like(y)
    y.backward(g)
    want, xd, w, b = loop_reference(layer, x, counts)
    want.backward(g.double())
    tol = 1e-2 if dtype == torch.bfloat16 else 1e-5
    assert rel(y.detach(), want.detach()) < tol and rel(x.grad, xd.grad) < tol
    assert rel(layer.weight.grad, w.grad) < tol and rel(layer.bias.grad, b.grad) < tol
    gm = getattr(torch, "_grouped_mm", None)
    if gm is not None and dtype == torch.bfloat16 and torch.cuda.get_device_capability() >= (9, 0):
        ref = gm(
            x.detach(),
            layer.weight.detach().transpose(-2, -1),
            offs=torch.tensor(counts, device="cuda").cumsum(0).int(),
        )
        ref = ref + torch.repeat_interleave(layer.bias.detach(), torch.tensor(counts, device="cuda"), dim=0)
        assert rel(y.detach(), ref) < 1e-2


@pytest.mark.gpu
def test_gpu_training_steps_stay_equal_loop():
    """Several forward+backward steps on address-stable tensors (as in a training loop) stay equal to
    the loop of nn.Linear: the three grouped products' launches never run another's pointer arrays."""
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    torch.manual_seed(1)
    counts = [96, 32, 0, 160, 8, 64]
    layer = nt.GroupedLinear(6, 128, 96, device="cuda", dtype=torch.float32)
    x = torch.randn(sum(counts), 128, device="cuda", requires_grad=True)
    g = torch.randn(sum(counts), 96, device="cuda")
    want, xd, w, b = loop_reference(layer, x, counts)
    want.backward(g.double())
    for _ in range(4):
        got = torch.autograd.grad(layer(x, counts), [x, layer.weight, layer.bias], grad_outputs=g)
        assert rel(got[0], xd.grad) < 1e-5 and rel(got[1], w.grad) < 1e-5 and rel(got[2], b.grad) < 1e-5
