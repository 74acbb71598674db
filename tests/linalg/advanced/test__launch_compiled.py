"""MatmulLaunch's compiled caller: it receives exactly the arguments the pure-Python caller does (the fake
cuBLASLt behind a real C function that records them), raises the binding's error class, and the launch
falls back to the pure caller when the binding calls a Python function (CPU only, fake GPU)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from fastcall_probes import FastCall, needs_extension

import nvmath.linalg.advanced as adv
from nvmath._internal import fastpath
from nvmath.bindings import cublasLt
from nvmath.bindings.cublasLt import cuBLASLtError
from nvmath.linalg.advanced import MatmulEpilog as E
from nvmath.linalg.advanced import _launch

import matmul_fakes as F  # (tests/linalg/advanced is on sys.path: see conftest.py)


class CFake:
    """The fake ``cublasLtMatmul`` behind a ctypes C function of 16 pointer-sized arguments that records
    each call's arguments and then runs the fake (so results are still computed)."""

    def __init__(self, monkeypatch, status: int = 0):
        self.calls: list[tuple[int, ...]] = []
        self.status = status
        current = cublasLt._p_cublasLtMatmul
        self._fake = getattr(current, "emulation", current)  # the fake GPU's Python emulation

        self.alphas: list[float] = []

        def record(*args: int) -> int:
            self.calls.append(args)
            self.alphas.append(ctypes.c_float.from_address(args[2]).value)  # (read while it is alive)
            return self.status or self._fake(*args)

        self._cfunc = ctypes.CFUNCTYPE(ctypes.c_int, *([ctypes.c_uint64] * 16))(record)
        self._cfunc.emulation = self._fake  # (a second CFake wraps the emulation, not this recorder)
        monkeypatch.setattr(cublasLt, "_p_cublasLtMatmul", self._cfunc)


def _rand(rng, shape, dtype=np.float32):
    return F.aligned(rng.uniform(-1, 1, shape).astype(dtype))


def _run(monkeypatch, factory, rng_seed, epilog):
    """One planner's plan + three executes with ``factory`` as the launch's caller factory: the recorded
    argument tuples (addresses made relative where they are per-run buffers) and the results."""
    monkeypatch.setattr(_launch, "make_caller", factory)
    probe = CFake(monkeypatch)
    rng = np.random.default_rng(rng_seed)
    a, b, bias = _rand(rng, (6, 5)), _rand(rng, (5, 4)), _rand(rng, (6,))
    results, callers = [], []
    with adv.Matmul(F.fake(a), F.fake(b), alpha=1.5) as mm:
        kw = {"epilog": E.BIAS, "epilog_inputs": {"bias": F.fake(bias)}} if epilog else {}
        mm.plan(**kw)
        callers.append(mm.launcher)
        for _ in range(3):
            results.append(mm.execute().array.copy())
        launch = mm.launcher
        lay = launch.plan.layouts
        fixed = (launch.plan.desc.ptr, lay.a.ptr, lay.b.ptr, lay.c.ptr, lay.d.ptr)
    return probe, results, fixed, a, b


@needs_extension
@pytest.mark.parametrize("epilog", [False, True], ids=["plain", "bias"])
def test_compiled_caller_gets_the_pure_callers_arguments(lt, monkeypatch, epilog):
    """Run for run, the compiled caller passes cublasLtMatmul the same 16 arguments as the pure caller
    would with that launch's descriptor/layouts (handle, descriptor, scalars, layouts, operands, algorithm,
    workspace, stream), and the products agree."""
    monkeypatch.setattr(fastpath, "_COMPILED", FastCall)
    probe_c, res_c, fixed_c, a, b = _run(monkeypatch, _launch.compiled_caller, 7, epilog)
    probe_p, res_p, fixed_p, _, _ = _run(monkeypatch, _launch.python_caller, 7, epilog)
    calls_c, calls_p = probe_c.calls, probe_p.calls
    assert probe_c.alphas == probe_p.alphas == [1.5] * 3
    assert len(calls_c) == len(calls_p) == 3
    for c_args, p_args, fx_c, fx_p in zip(calls_c, calls_p, [fixed_c] * 3, [fixed_p] * 3):
        # the two planners own different descriptors and buffers: compare each position's role
        assert (c_args[1], c_args[4], c_args[6], c_args[9], c_args[11]) == fx_c
        assert (p_args[1], p_args[4], p_args[6], p_args[9], p_args[11]) == fx_p
        assert c_args[14] == p_args[14] and c_args[15] == p_args[15]  # workspace size, stream
        assert (c_args[12] != 0) == (p_args[12] != 0) and (c_args[13] != 0) == (p_args[13] != 0)
        assert c_args[8] == c_args[10] or c_args[8] == 0  # c is d (or none) exactly as the pure path
        assert (c_args[8] == c_args[10]) == (p_args[8] == p_args[10])
    for rc, rp in zip(res_c, res_p):
        assert np.array_equal(rc, rp)
    if not epilog:
        np.testing.assert_allclose(res_c[0], 1.5 * a @ b, rtol=1e-5, atol=1e-6)


@needs_extension
def test_compiled_caller_is_a_fastcall_holding_the_fixed_arguments(lt, monkeypatch):
    """With a C function in the binding, the launch's caller is a FastCall whose fixed vector carries the
    plan's descriptor, scalars and layouts and whose slots are the per-call positions."""
    monkeypatch.setattr(fastpath, "_COMPILED", FastCall)
    CFake(monkeypatch)
    caller = _launch.compiled_caller(11, 12, 13, 14, 15, 16, 17)
    assert isinstance(caller, FastCall)
    assert caller.fixed[1:3] == (11, 12) and caller.fixed[4] == 13 and caller.fixed[6] == 14
    assert caller.fixed[7] == 15 and caller.fixed[9] == 16 and caller.fixed[11] == 17
    assert caller.slots == (0, 3, 5, 8, 10, 12, 13, 14, 15) and caller.error is cuBLASLtError


@pytest.mark.parametrize(
    "compiled", [pytest.param(True, marks=needs_extension), False], ids=["compiled", "pure"]
)
def test_failure_status_raises_the_bindings_error(lt, monkeypatch, rng, compiled):
    """A nonzero cublasLtMatmul status raises cuBLASLtError with that status on either path."""
    monkeypatch.setattr(fastpath, "_COMPILED", FastCall if compiled else None)
    probe = CFake(monkeypatch)
    with adv.Matmul(F.fake(_rand(rng, (4, 3))), F.fake(_rand(rng, (3, 2)))) as mm:
        mm.plan()
        assert isinstance(mm.launcher._call, FastCall) == compiled  # noqa: SLF001 - the seam under test
        probe.status = 15
        with pytest.raises(cuBLASLtError) as info:
            mm.execute()
        assert info.value.status == 15


def test_python_binding_keeps_the_pure_caller(lt, rng):
    """When the binding calls a Python function (the fake GPU as installed), the launch's caller is the
    pure one (which calls the binding), whatever path is active; the product is right."""
    a, b = _rand(rng, (4, 3)), _rand(rng, (3, 2))
    assert fastpath.bound_address("cublasLt", "cublasLtMatmul") is None
    with adv.Matmul(F.fake(a), F.fake(b)) as mm:
        mm.plan()
        np.testing.assert_allclose(mm.execute().array, a @ b, rtol=1e-5, atol=1e-6)
        assert FastCall is None or not isinstance(mm.launcher._call, FastCall)  # noqa: SLF001


def test_launch_keeps_the_scalars_owner(lt, rng):
    """The launch holds the planner's scalar buffer (its compiled caller holds raw addresses into it)."""
    with adv.Matmul(F.fake(_rand(rng, (4, 3))), F.fake(_rand(rng, (3, 2)))) as mm:
        mm.plan()
        base = mm.launcher._keep.ctypes.data  # noqa: SLF001
        assert ctypes.c_float.from_address(base).value == 1.0


def test_reset_scalars_go_through_the_planners_owner(lt, rng, monkeypatch):
    """reset_operands(alpha=, beta=) stores the checked scalars through Matmul's one writer of them
    (_commit_scalars), and the next execute uses them."""
    a, b, c = _rand(rng, (4, 3)), _rand(rng, (3, 2)), _rand(rng, (4, 2))
    seen = []
    original = adv.Matmul._commit_scalars  # noqa: SLF001 - the owner under test
    def recording(self, x, y):
        seen.append((x, y))
        original(self, x, y)

    monkeypatch.setattr(adv.Matmul, "_commit_scalars", recording)
    with adv.Matmul(F.fake(a), F.fake(b), c=F.fake(c), beta=1.0) as mm:
        mm.plan()
        mm.reset_operands(alpha=2.0, beta=0.5)
        assert seen[-1] == (2.0, 0.5)
        np.testing.assert_allclose(mm.execute().array, 2 * a @ b + 0.5 * c, rtol=1e-5, atol=1e-6)
