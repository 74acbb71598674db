"""The torch hot paths of the planner on the CPU fake GPU: torch CPU tensors posing as package-"torch" CUDA
tensors (``tools/torch_host_cost.py``), so ``Matmul.execute`` allocates its result itself on torch's
current stream (``ResultMaker.direct``), runs an in-place plan without ``_launch``, and routes operands
that require grad to nvmath.torch -- each giving float64 torch's values."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest
from fake_gpu import torch_read_as_gpu

torch = pytest.importorskip("torch")

import nvmath.linalg.advanced as adv  # noqa: E402
from nvmath._errors import InvalidMatmulState  # noqa: E402
from nvmath._internal import caches, streams  # noqa: E402
from nvmath.linalg.advanced import _results  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def as_torch(monkeypatch, request):
    """torch CPU tensors as torch CUDA tensors on the emulated cuBLASLt (flush-denormal restored after)."""
    request.addfinalizer(lambda: torch.set_flush_denormal(False))
    monkeypatch.setattr(streams, "_TORCH_RAW", None)  # looked up again: the tool's getter
    _tool("torch_host_cost").install(monkeypatch)
    adv.plan_cache.clear()
    yield
    caches.clear_all()


def _aligned(*shape: int, dtype=torch.float32, seed: int = 0):
    n = int(np.prod(shape))
    flat = torch.randn(n + 128, dtype=dtype, generator=torch.Generator().manual_seed(seed))
    skip = (-flat.data_ptr() % 256) // flat.element_size()
    return flat[skip : skip + n].view(*shape)


def _ref(a, b, c=None, alpha=1.0, beta=0.0):
    out = alpha * (a.double() @ b.double())
    return out if c is None else out + beta * c.double()


def test_execute_allocates_each_result_itself_on_the_current_stream(as_torch, monkeypatch):
    """Out of place on torch's current stream: every execute returns a new torch tensor of a @ b (the
    result maker's own ``new`` is not called)."""
    a, b = _aligned(8, 5, seed=1), _aligned(5, 6, seed=2)
    with adv.Matmul(a, b) as mm:
        mm.plan()
        assert mm.result_maker.direct is not None
        mm.execute()  # (memoises the current stream)
        monkeypatch.setattr(_results.ResultMaker, "new", lambda *args: pytest.fail("ResultMaker.new called"))
        outs = [mm.execute() for _ in range(3)]
    assert all(type(o) is torch.Tensor and o.shape == (8, 6) for o in outs)
    assert len({o.data_ptr() for o in outs}) == 3
    for o in outs:
        torch.testing.assert_close(o.double(), _ref(a, b), rtol=1e-5, atol=1e-6)


def test_execute_with_addend_and_after_reset_reads_the_new_operands(as_torch):
    """The direct path reads c and each reset's operands (not those of the plan)."""
    a, b, c = _aligned(7, 4, seed=3), _aligned(4, 3, seed=4), _aligned(7, 3, seed=5)
    with adv.Matmul(a, b, c, alpha=2.0, beta=0.5) as mm:
        mm.plan()
        first = mm.execute()
        a2, b2, c2 = _aligned(7, 4, seed=6), _aligned(4, 3, seed=7), _aligned(7, 3, seed=8)
        mm.reset_operands(a=a2, b=b2, c=c2)
        second = mm.execute()
    torch.testing.assert_close(first.double(), _ref(a, b, c, 2.0, 0.5), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(second.double(), _ref(a2, b2, c2, 2.0, 0.5), rtol=1e-5, atol=1e-6)


def test_other_streams_and_release_workspace_take_the_general_path(as_torch):
    """An explicit stream or ``release_workspace=True`` gives the same values through ``_launch``."""
    a, b = _aligned(6, 5, seed=9), _aligned(5, 4, seed=10)
    with adv.Matmul(a, b) as mm:
        mm.plan()
        outs = [mm.execute(stream=0), mm.execute(release_workspace=True), mm.execute()]
    for o in outs:
        torch.testing.assert_close(o.double(), _ref(a, b), rtol=1e-5, atol=1e-6)


def test_inplace_execute_writes_c_and_returns_it(as_torch):
    """In place: the result is c itself, overwritten with a @ b + beta * c on each call."""
    a, b, c = _aligned(5, 4, seed=11), _aligned(4, 3, seed=12), _aligned(5, 3, seed=13)
    c0 = c.clone()
    with adv.Matmul(a, b, c, beta=1.0, options={"inplace": True}) as mm:
        mm.plan()
        out = mm.execute()
        assert out is c
        torch.testing.assert_close(c.double(), _ref(a, b, c0, 1.0, 1.0), rtol=1e-5, atol=1e-6)
        mm.execute()
    torch.testing.assert_close(c.double(), _ref(a, b, c0, 1.0, 1.0) + _ref(a, b), rtol=1e-5, atol=1e-5)


def test_an_operand_requiring_grad_is_routed_to_nvmath_torch(as_torch, monkeypatch):
    """With grad mode on, an operand that requires grad sends execute to nvmath.torch; under no_grad,
    or once it no longer requires grad, the planner runs the call itself."""
    from nvmath._internal import torch_bridge

    routed = []
    route = lambda mm, **kw: routed.append(kw) or "routed"  # noqa: E731
    monkeypatch.setitem(torch_bridge._ROUTES, "advanced.execute", route)
    a, b = _aligned(4, 3, seed=14), _aligned(3, 2, seed=15)
    a.requires_grad_(True)
    with adv.Matmul(a, b) as mm:
        mm.plan()
        assert mm.execute() == "routed"
        with torch.no_grad():
            out = mm.execute()
        a.requires_grad_(False)
        out2 = mm.execute()
    assert routed == [{"algorithm": None, "release_workspace": False, "stream": None}]
    for o in (out, out2):
        torch.testing.assert_close(o.double(), _ref(a.detach(), b), rtol=1e-5, atol=1e-6)


def test_execute_after_free_still_raises(as_torch):
    """The direct path is dropped with the plan: execute after free() raises the state error."""
    a, b = _aligned(4, 3, seed=16), _aligned(3, 2, seed=17)
    mm = adv.Matmul(a, b)
    mm.plan()
    mm.execute()
    mm.free()
    with pytest.raises(InvalidMatmulState, match="free"):
        mm.execute()


def test_stateless_hits_allocate_directly_and_match(as_torch, monkeypatch):
    """Stateless hits on torch operands (read raw, posing as GPU 0) run by address into a result
    allocated on the current stream: each a new tensor equal to a @ b (+ c), served by the last-call
    memo from the third call on."""
    from nvmath._internal import stateless

    stateless.register_reader(torch.Tensor, torch_read_as_gpu)
    a, b, c = _aligned(6, 5, seed=18), _aligned(5, 4, seed=19), _aligned(6, 4, seed=20)
    outs = [adv.matmul(a, b) for _ in range(4)]
    assert adv.plan_cache.last[1] is not None
    monkeypatch.setattr(_results.ResultMaker, "new", lambda *args: pytest.fail("ResultMaker.new called"))
    outs += [adv.matmul(a, b) for _ in range(2)]
    assert len({o.data_ptr() for o in outs}) == len(outs)
    for o in outs:
        torch.testing.assert_close(o.double(), _ref(a, b), rtol=1e-5, atol=1e-6)
    for alpha, beta in ((2.0, 0.5), (None, 1.0), (1.5, 0.0)):
        out = adv.matmul(a, b, c, alpha=alpha, beta=beta)
        ref = _ref(a, b, c, 1.0 if alpha is None else alpha, beta)
        torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-6)
