"""The batched copy of an aux input shared by every batch entry (``_aux_broadcast``), on the fake GPU.

cuBLASLt does not honour an aux batch stride of 0 (a batched DRELU read garbage on the H200, silently),
so what matters is what reaches cuBLASLt: the fake records the descriptor's aux pointer, leading
dimension and batch stride of every call (and fails a batched backward epilog given a batch stride of
0), and these tests read the buffer behind that pointer. Results are checked against float64 numpy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import nvmath.linalg.advanced as adv
from nvmath.linalg.advanced import MatmulEpilog as E
from nvmath.linalg.advanced._aux_broadcast import copy_plan

import matmul_fakes as F  # (tests/linalg/advanced is on sys.path: see conftest.py)

BACKWARD = {E.DRELU: "relu", E.DRELU_BGRAD: "relu", E.DGELU: "gelu", E.DGELU_BGRAD: "gelu"}


def _rand(rng, shape):
    x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape)
    return F.aligned(x.astype(np.float32))


def _close(got, want, tol=1e-4):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    assert np.linalg.norm(got - want) <= tol * np.linalg.norm(want)


@pytest.mark.parametrize("count", [1, 2, 3, 5, 6, 8, 9, 17])
def test_copy_plan_fills_every_slot_in_log_steps(count):
    """Slot 0 from the user's matrix, then the filled slots doubled: every slot holds the matrix after
    1 + ceil(log2(count)) copies, none of which overlaps its source or leaves the buffer."""
    block, span = 24, 19
    user = np.arange(1, span + 1, dtype=np.uint8)
    buf = np.zeros(count * block, dtype=np.uint8)
    copies = copy_plan(count, block, span)
    assert len(copies) == 1 + math.ceil(math.log2(count))
    for dst, src, nbytes in copies:
        assert 0 <= dst and dst + nbytes <= buf.size
        data = user[:nbytes] if src < 0 else buf[src : src + nbytes].copy()
        assert src < 0 or src + nbytes <= dst  # (no overlap)
        buf[dst : dst + nbytes] = data
    for i in range(count):
        np.testing.assert_array_equal(buf[i * block : i * block + span], user)


def _forward(rng, kind, m=10, n=7, k=6):
    """An unbatched forward pass: (pre-activation in float64, its aux)."""
    a, b = _rand(rng, (m, k)), _rand(rng, (k, n))
    _, aux = adv.matmul(F.fake(a), F.fake(b), epilog=E.RELU_AUX if kind == "relu" else E.GELU_AUX)
    return a.astype(np.float64) @ b.astype(np.float64), aux[f"{kind}_aux"]


def _want(kind, pre, g, h):
    grad = (pre > 0) if kind == "relu" else F.gelu_tanh_grad(pre)
    return (g.astype(np.float64) @ h.astype(np.float64)) * grad


def _check_buffer(lt, aux, count):
    """The last call's aux pointer is a batched buffer (not the user's aux) holding ``aux`` in each slot."""
    ptr, ld_attr, stride_attr = lt.matmul_calls[-1]["aux"]
    arr = aux.array
    assert stride_attr != 0 and ptr != arr.__array_interface__["data"][0]
    bits = 8 if arr.dtype == np.uint8 else 1  # cuBLASLt counts the bit-mask's LD and stride in bits
    ld, stride = ld_attr // bits, stride_attr // bits
    rows, n = arr.shape[-2:]
    assert stride >= ld * n
    got = F._view(ptr, (count, rows, n), (stride, 1, ld), F.dtypes.numpy_dtype_name(arr.dtype))
    for i in range(count):
        np.testing.assert_array_equal(got[i], arr)


@pytest.mark.parametrize("epilog", list(BACKWARD), ids=lambda e: e.name)
def test_shared_aux_is_copied_into_every_batch_slot(lt, rng, epilog):
    """A batched DRELU / DGELU (and _BGRAD) given one unbatched aux: cuBLASLt reads a batched copy
    (nonzero batch stride, one copy per batch entry), and every batch entry is masked by that aux."""
    kind = BACKWARD[epilog]
    pre, aux = _forward(rng, kind)
    g, h = _rand(rng, (5, 10, 4)), _rand(rng, (5, 4, 7))
    out = adv.matmul(F.fake(g), F.fake(h), epilog=epilog, epilog_inputs={f"{kind}_aux": aux})
    want = _want(kind, pre, g, h)
    if epilog in (E.DRELU_BGRAD, E.DGELU_BGRAD):
        out, grads = out
        _close(grads[f"d{kind}_bgrad"].array[..., 0], want.sum(axis=-1))
    _close(out.array, want)
    _check_buffer(lt, aux, 5)


@pytest.mark.parametrize("kind", ["relu", "gelu"])
def test_stride_zero_batched_view_of_one_aux_is_copied_too(lt, rng, kind):
    """An aux of the batched shape whose batch strides are 0 (one matrix viewed per batch entry) is
    materialised the same way: never a 0 batch stride reaches cuBLASLt."""
    pre, aux = _forward(rng, kind)
    view = F.fake(np.broadcast_to(aux.array, (2, 3) + aux.array.shape))
    g, h = _rand(rng, (2, 3, 10, 4)), _rand(rng, (2, 3, 4, 7))
    epilog = E.DRELU if kind == "relu" else E.DGELU
    out = adv.matmul(F.fake(g), F.fake(h), epilog=epilog, epilog_inputs={f"{kind}_aux": view})
    _close(out.array, _want(kind, pre, g, h))
    _check_buffer(lt, aux, 6)


@pytest.mark.parametrize("kind", ["relu", "gelu"])
def test_buffer_follows_reset_and_in_place_updates_of_the_aux(lt, rng, kind):
    """The copy is refreshed before every execute: a new aux given to reset_operands, and an aux updated
    in place, are what the next execute uses; the descriptor keeps pointing at the planner's buffer."""
    pre, aux = _forward(rng, kind)
    pre2, aux2 = _forward(rng, kind)
    aux2 = F.fake(F.aligned(aux2.array.T).T)  # (as aligned as the planned aux: 256 bytes, column-major)
    g, h = _rand(rng, (3, 10, 4)), _rand(rng, (3, 4, 7))
    epilog = E.DRELU if kind == "relu" else E.DGELU
    with adv.Matmul(F.fake(g), F.fake(h)) as mm:
        mm.plan(epilog=epilog, epilog_inputs={f"{kind}_aux": aux})
        _close(mm.execute().array, _want(kind, pre, g, h))
        first = lt.matmul_calls[-1]["aux"][0]
        mm.reset_operands(epilog_inputs={f"{kind}_aux": aux2})
        _close(mm.execute().array, _want(kind, pre2, g, h))
        assert lt.matmul_calls[-1]["aux"][0] == first
        _check_buffer(lt, aux2, 3)
        aux2.array[...] = aux.array  # in place
        _close(mm.execute().array, _want(kind, pre, g, h))
        _check_buffer(lt, aux2, 3)


def test_autotune_times_with_the_copy_and_execute_stays_right(lt, rng, monkeypatch):
    """Autotuning a plan with a shared aux fills the copy before its timed runs (the fake refuses a 0
    batch stride and reads the buffer); the tuned plan's execute is right."""
    from nvmath.linalg.advanced import _autotune

    def tune(run, count, *args):  # every candidate runs once (no timing on the fake GPU)
        for i in range(count):
            run(i)
        return list(range(count)), [(1.0 + i, 0.1) for i in range(count)]

    monkeypatch.setattr(_autotune, "tune", tune)
    pre, aux = _forward(rng, "relu")
    g, h = _rand(rng, (4, 10, 4)), _rand(rng, (4, 4, 7))
    with adv.Matmul(F.fake(g), F.fake(h)) as mm:
        mm.plan(epilog=E.DRELU, epilog_inputs={"relu_aux": aux})
        before = len(lt.matmul_calls)
        mm.autotune(iterations=2)
        assert len(lt.matmul_calls) > before
        _check_buffer(lt, aux, 4)
        _close(mm.execute().array, _want("relu", pre, g, h))


def test_batched_aux_is_read_in_place(lt, rng):
    """A batched aux over a batched problem needs no copy: cuBLASLt reads the user's tensor."""
    g, h = _rand(rng, (3, 10, 4)), _rand(rng, (3, 4, 7))
    a, b = _rand(rng, (3, 10, 6)), _rand(rng, (3, 6, 7))
    _, aux = adv.matmul(F.fake(a), F.fake(b), epilog=E.RELU_AUX)
    out = adv.matmul(F.fake(g), F.fake(h), epilog=E.DRELU, epilog_inputs={"relu_aux": aux["relu_aux"]})
    assert lt.matmul_calls[-1]["aux"][0] == aux["relu_aux"].array.__array_interface__["data"][0]
    pre = a.astype(np.float64) @ b.astype(np.float64)
    _close(out.array, _want("relu", pre, g, h))
