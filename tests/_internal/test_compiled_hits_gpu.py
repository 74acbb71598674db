"""The stateless matmuls' compiled hits on the GPU (``nvmath._internal.compiled_hits``): a plain
``matmul(a, b)`` of torch CUDA tensors is served by the table from its fifth call on (no Python path),
on torch's default and on a side stream, each result equal bit for bit to the same cache's Python path
(the table switched off) and to ``torch.matmul`` within rounding; a call with ``alpha`` between served
calls leaves them right. (Skipped without a GPU; built extension needed: ``make ext``.)"""

from __future__ import annotations

import pytest
from compiled_hit_helpers import force_compiled_path, on_python_path, spy_python
from fastcall_probes import needs_extension

import nvmath
from nvmath.linalg.advanced import _matmul_hit as advanced_hit
from nvmath.linalg.advanced import _stateless as advanced_stateless
from nvmath.linalg.generic import _matmul_hit as generic_hit
from nvmath.linalg.generic import _stateless as generic_stateless

pytestmark = [needs_extension, pytest.mark.gpu]

APIS = {
    "advanced": (nvmath.linalg.advanced.matmul, advanced_hit.hits, advanced_stateless),
    "generic": (nvmath.linalg.matmul, generic_hit.hits, generic_stateless),
}


@pytest.fixture(params=sorted(APIS))
def api(request, torch_cuda, monkeypatch):
    """``(matmul, its StatelessHits, python_calls)`` with the compiled path on (also under
    ``NVMATH_PURE_PYTHON=1``: this file tests the compiled hit) and a new table; ``python_calls`` counts
    the calls that reach the Python path."""
    _, hits, module = APIS[request.param]
    matmul = force_compiled_path(module, hits, monkeypatch)
    module.plan_cache.clear()
    yield matmul, hits, spy_python(module, monkeypatch)
    module.plan_cache.clear()


def _python(matmul, hits, a, b):
    return on_python_path(hits, matmul, a, b)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "complex64"])
@pytest.mark.parametrize("shape", [(64, 64, 64), (1, 4096, 1024), (8, 96, 40)], ids=str)
def test_gpu_plain_calls_are_served_and_equal_torch(torch_cuda, api, dtype, shape):
    """64^3, a decode-shaped and an odd-shaped product: served by the table, bit-identical to the
    Python path, close to ``torch.matmul``."""
    torch = torch_cuda
    matmul, hits, python = api
    dt = getattr(torch, dtype)
    m, k, n = shape
    a, b = torch.randn(m, k, device="cuda", dtype=dt), torch.randn(k, n, device="cuda", dtype=dt)
    warm = [matmul(a, b) for _ in range(4)]
    before = len(python)
    served = [matmul(a, b) for _ in range(3)]
    assert len(python) == before, "the compiled hit did not serve the plain calls"
    ref = _python(matmul, hits, a, b)
    for y in (*warm, *served):
        assert torch.equal(y, ref)
    want = torch.matmul(a.to(torch.complex128 if dt.is_complex else torch.float64),
                        b.to(torch.complex128 if dt.is_complex else torch.float64))  # fmt: skip
    err = ((ref.to(want.dtype) - want).norm() / want.norm()).item()
    assert err < (1e-5 if dt != torch.bfloat16 else 1e-2)
    torch.testing.assert_close(ref, torch.matmul(a, b), rtol=2e-2 if dt == torch.bfloat16 else 1e-4,
                               atol=2e-1 if dt == torch.bfloat16 else 1e-3)  # fmt: skip


def test_gpu_side_stream_and_alpha_between_served_calls(torch_cuda, api):
    """On a side ``torch.cuda.Stream`` the table serves the calls on that stream (an entry of its own);
    a call with ``alpha`` between served calls is run by the Python path and the next plain calls are
    right (not scaled)."""
    torch = torch_cuda
    matmul, hits, python = api
    a, b = torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda")
    want = torch.matmul(a, b)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        ys = [matmul(a, b) for _ in range(6)]
        scaled = matmul(a, b, alpha=2.0)
        after = [matmul(a, b) for _ in range(4)]
    side.synchronize()
    assert sum(e.hits for e in hits.table.entries()) >= 2
    for y in (*ys, *after):
        torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(scaled, 2 * want, rtol=1e-4, atol=1e-3)


def test_gpu_entries_check_the_current_context(torch_cuda, api):
    """A served entry checks the driver's current context (not torch's device getter): with no context
    current on the thread the table misses (the Python path decides), and with the device's primary
    context current again it serves, right."""
    from nvmath._internal import devices

    torch = torch_cuda
    matmul, hits, python = api
    a, b = torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda")
    for _ in range(4):
        matmul(a, b)
    (made,) = hits.table.entries()
    assert made.device_id == 0
    ctx = devices.current_context()
    assert ctx == devices.primary_context(torch.cuda.current_device())
    devices.set_current_context(0)
    try:
        assert hits.table(a, b, None, None) is None
    finally:
        devices.set_current_context(ctx)
    before = len(python)
    y = matmul(a, b)
    assert len(python) == before and torch.equal(y, _python(matmul, hits, a, b))
