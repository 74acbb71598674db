"""Fast entries of cached single GEMMs: chosen only for the kinds they handle, and numerically the
same as the general path (alpha, beta, c, conjugate qualifiers, torch CPU operands)."""

from __future__ import annotations

import numpy as np
import pytest

import nvmath.linalg as la
from nvmath.linalg.generic import plan_cache


@pytest.fixture(autouse=True)
def fresh_cache():
    plan_cache.clear()
    yield
    plan_cache.clear()


def _planned(*args, **kwargs):
    mm = la.Matmul(*args, **kwargs)
    mm.plan()
    return mm


def test_entry_choice():
    """A plain CPU GEMM gets the fast entry; structured, in-place, sequences and thread limits do not."""
    a, c = np.ones((3, 3)), np.ones((3, 3))
    q = np.array([la.SymmetricMatrixQualifier.create(), la.GeneralMatrixQualifier.create()])
    assert _planned(a, a)._fast is not None
    assert _planned(a, a, c, beta=1.0)._fast is not None
    assert _planned(a, a, qualifiers=q)._fast is None
    assert _planned(a, a, c, beta=1.0, options={"inplace": True})._fast is None
    assert _planned([a], [a])._fast is None
    assert _planned(a, a, execution=la.ExecutionCPU(num_threads=1))._fast is None


def test_fast_numerics():
    """Repeated stateless calls (the fast entry) give alpha * a @ b + beta * c with per-call scalars."""
    rng = np.random.default_rng(0)
    a, b, c = rng.standard_normal((2, 5, 4)), rng.standard_normal((4, 3)), rng.standard_normal((2, 5, 3))
    for alpha, beta in ((None, 1.0), (2.0, 0.0), (-1, 3)):
        out = la.matmul(a, b, c, alpha=alpha, beta=beta)
        np.testing.assert_allclose(out, (1 if alpha is None else alpha) * (a @ b) + beta * c)
    with pytest.raises(ValueError, match="complex"):
        la.matmul(a, b, c, alpha=1j, beta=1.0)


def test_fast_conjugate_and_torch(torch):
    """Conjugate qualifiers and torch CPU operands through the fast entry."""
    a = torch.randn(4, 4, dtype=torch.complex128)
    q = np.array([la.GeneralMatrixQualifier.create(conjugate=True), la.GeneralMatrixQualifier.create()])
    for _ in range(2):
        torch.testing.assert_close(la.matmul(a, a, qualifiers=q), a.conj().resolve_conj() @ a)
    for _ in range(2):
        out = la.matmul(a, a, alpha=2.0)
        assert isinstance(out, torch.Tensor)
        torch.testing.assert_close(out, 2 * (a @ a))


def test_fast_torch_requires_grad(torch):
    """torch CPU tensors that require grad: under no_grad a plain result (the fast path); with grad mode on,
    nvmath.torch makes the result differentiable (issue #12)."""
    a = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    for _ in range(2):
        with torch.no_grad():
            out = la.matmul(a, a)
        torch.testing.assert_close(out, (a @ a).detach())
        assert not out.requires_grad
    out = la.matmul(a, a)
    assert out.requires_grad
    torch.testing.assert_close(out, a @ a)


def _torch_entry(torch, monkeypatch, mm, blocking=False):
    """``torch_gemm``'s entry for planned ``mm`` with torch's CUDA allocation and current stream stubbed
    (results are CPU tensors, so the fake cuBLAS computes into them at their raw addresses)."""
    import sys
    import types

    from nvmath._internal import streams
    from nvmath.linalg.generic import _fast

    handle = types.SimpleNamespace(ptr=0, device_id=0, mortal=False, ctx=None, package="torch")
    monkeypatch.setattr(streams, "current_stream", lambda device_id, package: handle)
    monkeypatch.setattr(streams, "_TORCH_RAW", lambda device_id: 0)
    stub = types.SimpleNamespace(
        device=lambda *args: None,
        empty=lambda shape, dtype, device: torch.empty(shape, dtype=dtype),
        empty_strided=lambda shape, strides, dtype, device: torch.empty_strided(shape, strides, dtype=dtype),
        **{name: getattr(torch, name) for name in ("float32", "float64", "complex64", "complex128")},
    )
    workspace = types.SimpleNamespace(ensure=lambda nbytes, stream: 0x1000)
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "torch", stub)
        return _fast.torch_gemm(
            mm._problems[0], mm._programs[0], 0, blocking, lambda: (workspace, None), mm._check_scalars
        )


def test_torch_gpu_entry_numerics(torch, fake_gpu, monkeypatch):
    """The torch CUDA entry passes the operands in cuBLAS order with the call's alpha / beta (and c),
    on non-square shapes and repeated calls (fake cuBLAS computing at the tensors' addresses)."""
    import cublas_fakes

    rng = np.random.default_rng(3)
    a, b, c = rng.standard_normal((5, 3)), rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    ta, tb, tc = (torch.from_numpy(x) for x in (a, b, c))
    plain = _planned(cublas_fakes.fake(a), cublas_fakes.fake(b))
    run = _torch_entry(torch, monkeypatch, plain)
    for alpha in (None, 2.0, -1, -1, None, 2.0):  # (the host scalars are rewritten only on a change)
        out = run(ta, tb, None, alpha, None, None)
        np.testing.assert_allclose(out.numpy(), (1 if alpha is None else alpha) * (a @ b), rtol=1e-12)
    with_c = _planned(cublas_fakes.fake(a), cublas_fakes.fake(b), cublas_fakes.fake(c), beta=1.0)
    run = _torch_entry(torch, monkeypatch, with_c)
    for alpha, beta in ((1.0, 1.0), (0.5, -2.0), (0.5, 0.0), (1.0, 1.0)):
        out = run(ta, tb, tc, alpha, beta, None)
        np.testing.assert_allclose(out.numpy(), alpha * (a @ b) + beta * c, rtol=1e-12)
    with pytest.raises(ValueError, match="complex"):
        run(ta, tb, tc, 1j, 1.0, None)


@pytest.mark.parametrize("current", [None, 0, 1])
def test_torch_gpu_entry_switches_context_only_off_the_current_device(torch, fake_gpu, monkeypatch, current):
    """The torch CUDA entry launches without entering the device's context when torch's current device is
    the plan's (``current`` 0: torch keeps that primary context current), and enters it otherwise (another
    current device, or no device getter); the results are the same either way (alpha, repeated calls)."""
    import contextlib

    import cublas_fakes

    from nvmath._internal import devices, streams

    entered = []

    def spy(device_id):
        entered.append(device_id)
        return contextlib.nullcontext()

    monkeypatch.setattr(devices, "device_ctx", spy)
    getter = None if current is None else (lambda: current)
    monkeypatch.setattr(streams, "torch_device_getter", lambda: getter)
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((6, 3)), rng.standard_normal((3, 2))
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    run = _torch_entry(torch, monkeypatch, _planned(cublas_fakes.fake(a), cublas_fakes.fake(b)))
    for alpha in (None, 3.0):
        out = run(ta, tb, None, alpha, None, None)
        np.testing.assert_allclose(out.numpy(), (1 if alpha is None else alpha) * (a @ b), rtol=1e-12)
    assert entered == ([] if current == 0 else [0, 0])


def test_torch_gpu_entry_blocking_and_batched(torch, fake_gpu, monkeypatch):
    """A blocking plan (the general launch, then a synchronize) and a batched product (a strided-batched
    launch) through the torch CUDA entry give numpy's results with the call's alpha."""
    import cublas_fakes

    from nvmath._internal import streams

    synced = []
    monkeypatch.setattr(streams, "synchronize", lambda handle: synced.append(handle))
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((3, 5, 4)), rng.standard_normal((3, 4, 2))
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    for blocking in (True, False):
        run = _torch_entry(torch, monkeypatch, _planned(cublas_fakes.fake(a), cublas_fakes.fake(b)), blocking)
        for alpha in (None, 2.0):
            out = run(ta, tb, None, alpha, None, None)
            np.testing.assert_allclose(out.numpy(), (1 if alpha is None else alpha) * (a @ b), rtol=1e-12)
    assert len(synced) == 2  # (the blocking plan's two calls)


@pytest.mark.parametrize("conjugate", [False, True], ids=["row-major result", "column-major result"])
def test_torch_gpu_entry_results_have_the_planned_layout(torch, fake_gpu, monkeypatch, conjugate):
    """The torch CUDA entry's results (made by new_empty_strided of a template) have the planned shape,
    strides and dtype -- a row-major result, or a column-major one (a conjugated ``a`` is computed in
    column order) -- are fresh on every call, and hold numpy's product."""
    import cublas_fakes

    rng = np.random.default_rng(6)
    a = rng.standard_normal((4, 3)) + 1j * rng.standard_normal((4, 3))
    b = rng.standard_normal((3, 5)) + 1j * rng.standard_normal((3, 5))
    q = np.array([la.GeneralMatrixQualifier.create(conjugate), la.GeneralMatrixQualifier.create()])
    mm = _planned(cublas_fakes.fake(a), cublas_fakes.fake(b), qualifiers=q)
    traits = mm._problems[0].traits
    assert traits.order == ("col" if conjugate else "row")
    run = _torch_entry(torch, monkeypatch, mm)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    outs = [run(ta, tb, None, None, None, None) for _ in range(2)]
    for out in outs:
        assert tuple(out.shape) == tuple(traits.result_shape) and out.stride() == tuple(traits.result_strides)
        assert out.dtype == torch.complex128 and not out.requires_grad
        np.testing.assert_allclose(out.numpy(), (a.conj() if conjugate else a) @ b, rtol=1e-12)
    assert outs[0].data_ptr() != outs[1].data_ptr()
