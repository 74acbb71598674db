"""One unbatched relu_aux / gelu_aux given to a batched backward epilog, on a GPU (``_aux_broadcast``).

On the H200 (cuBLASLt 13.1) an aux batch stride of 0 gave a batched FP8 DRELU the wrong mask for every
batch entry but the first (relative error 0.16, no error status); the planner now copies the one aux
into every slot of a batched buffer. These tests run every backward epilog (DRELU, DGELU and their
_BGRAD forms) for bfloat16 and float32 -- FP8 is in tests/compat/test_compat_matmul_fp8_gpu.py --
against float64 references. Operands are quarters, so the float32 accumulator holds the forward
pre-activation exactly and the ReLU mask has no rounding-dependent sign; a bias of 1/32 keeps it off 0.
"""

from __future__ import annotations

import math

import pytest

import nvmath.linalg.advanced as adv
from nvmath.linalg.advanced import MatmulEpilog as E

pytestmark = pytest.mark.gpu

KIND = {E.DRELU: "relu", E.DRELU_BGRAD: "relu", E.DGELU: "gelu", E.DGELU_BGRAD: "gelu"}
TOL = {"bfloat16": 2e-2, "float32": 1e-5}


@pytest.fixture(scope="module")
def torch():
    """torch with CUDA (skip otherwise)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    return torch


def quarters(torch, shape, seed, dtype):
    """Quarters in [-1, 1] (exact in bfloat16) on the GPU."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randint(-4, 5, shape, generator=g, device="cuda", dtype=torch.int32).double() / 4
    return x.to(getattr(torch, dtype))


def rel_err(torch, got, want):
    return float(torch.linalg.norm(got.double() - want) / torch.linalg.norm(want))


def forward(torch, kind, dtype, m=50, n=40, k=32, seed=1):
    """One unbatched forward pass: (its aux, the float64 pre-activation as the aux holds it)."""
    x, w = quarters(torch, (m, k), seed, dtype), quarters(torch, (k, n), seed + 1, dtype)
    # a bias of 1/32 keeps every pre-activation off 0 (sums of quarter products are sixteenths): the
    # ReLU mask has no ties, whose derivative convention is cuBLASLt's own
    bias = torch.full((m,), 1 / 32, device="cuda", dtype=getattr(torch, dtype))
    epilog = E.RELU_AUX_BIAS if kind == "relu" else E.GELU_AUX_BIAS
    _, aux = adv.matmul(x, w, epilog=epilog, epilog_inputs={"bias": bias})
    pre = x.double() @ w.double() + 1 / 32
    return aux[f"{kind}_aux"], (pre if kind == "relu" else pre.to(getattr(torch, dtype)).double())


def grad(torch, kind, pre):
    """d act / d pre in float64 (ReLU; GELU, tanh approximation)."""
    if kind == "relu":
        return (pre > 0).double()
    u = math.sqrt(2 / math.pi) * (pre + 0.044715 * pre**3)
    th = torch.tanh(u)
    du = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * pre**2)
    return 0.5 * (1 + th) + 0.5 * pre * (1 - th**2) * du


@pytest.mark.parametrize("batch", [(3,), (2, 3), (5,)], ids=str)
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("epilog", list(KIND), ids=lambda e: e.name)
def test_unbatched_aux_masks_every_batch_entry(torch, epilog, dtype, batch):
    """A batched backward epilog with the aux of one unbatched forward pass: every batch entry is
    multiplied by that aux's derivative (and the bias gradient is its row sum), as in float64."""
    kind = KIND[epilog]
    aux, pre = forward(torch, kind, dtype)
    g, h = quarters(torch, (*batch, 50, 8), 3, dtype), quarters(torch, (*batch, 8, 40), 4, dtype)
    out = adv.matmul(g, h, epilog=epilog, epilog_inputs={f"{kind}_aux": aux})
    want = (g.double() @ h.double()) * grad(torch, kind, pre)
    if epilog in (E.DRELU_BGRAD, E.DGELU_BGRAD):
        out, grads = out
        assert rel_err(torch, grads[f"d{kind}_bgrad"].squeeze(-1), want.sum(-1)) < 3 * TOL[dtype]
    assert out.shape == (*batch, 50, 40)
    gs, hs = g.reshape(-1, 50, 8), h.reshape(-1, 8, 40)
    for i in range(math.prod(batch)):  # every entry, not only the first
        assert rel_err(torch, out.reshape(-1, 50, 40)[i], want.reshape(-1, 50, 40)[i]) < TOL[dtype]
        single = adv.matmul(gs[i], hs[i], epilog=epilog, epilog_inputs={f"{kind}_aux": aux})
        single = single[0] if isinstance(single, tuple) else single
        assert torch.equal(out.reshape(-1, 50, 40)[i], single)  # exact sums: the same as one unbatched call


@pytest.mark.parametrize("kind", ["relu", "gelu"])
def test_expanded_view_of_one_aux(torch, kind):
    """An aux of the batched shape that is one matrix viewed per entry (``expand``: batch stride 0)."""
    aux, pre = forward(torch, kind, "float32")
    view = aux.expand(4, *aux.shape)
    g, h = quarters(torch, (4, 50, 8), 3, "float32"), quarters(torch, (4, 8, 40), 4, "float32")
    epilog = E.DRELU if kind == "relu" else E.DGELU
    out = adv.matmul(g, h, epilog=epilog, epilog_inputs={f"{kind}_aux": view})
    assert rel_err(torch, out, (g.double() @ h.double()) * grad(torch, kind, pre)) < 1e-5


@pytest.mark.parametrize("kind", ["relu", "gelu"])
def test_reset_and_in_place_update_of_the_shared_aux(torch, kind):
    """A planned Matmul re-reads the shared aux on every execute: after reset_operands with another aux,
    and after an in-place update of it."""
    aux, pre = forward(torch, kind, "float32")
    aux2, pre2 = forward(torch, kind, "float32", seed=7)
    g, h = quarters(torch, (3, 50, 8), 3, "float32"), quarters(torch, (3, 8, 40), 4, "float32")
    gh = g.double() @ h.double()
    epilog = E.DRELU if kind == "relu" else E.DGELU
    with adv.Matmul(g, h) as mm:
        mm.plan(epilog=epilog, epilog_inputs={f"{kind}_aux": aux})
        assert rel_err(torch, mm.execute(), gh * grad(torch, kind, pre)) < 1e-5
        mm.reset_operands(epilog_inputs={f"{kind}_aux": aux2})
        assert rel_err(torch, mm.execute(), gh * grad(torch, kind, pre2)) < 1e-5
        aux2.copy_(aux)
        assert rel_err(torch, mm.execute(), gh * grad(torch, kind, pre)) < 1e-5
