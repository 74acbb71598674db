"""Self-test checks of the cuBLASLt matmul (``nvmath.linalg.advanced``)."""

from __future__ import annotations

import numpy as np

from nvmath._diagnostics.selftest import Context, check


@check("matmul: bad input is refused before any GPU work")
def _matmul_errors(ctx: Context) -> str:
    from nvmath.linalg.advanced import Matmul

    try:
        Matmul(np.ones((4, 3)), np.ones((4, 5)))
    except ValueError as exc:
        if "contract" not in str(exc):
            raise AssertionError(f"unexpected message: {exc}") from exc
        return "mismatched K -> ValueError"
    raise AssertionError("a K mismatch was accepted")


@check("matmul: float64 product, RELU_BIAS epilog and a cached stateless call", gpu=True)
def _matmul_gpu(ctx: Context) -> str:
    from nvmath.linalg.advanced import MatmulEpilog, MatmulOptions, matmul, plan_cache

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((33, 17)), rng.standard_normal((17, 9))
    bias = rng.standard_normal(33)
    options = MatmulOptions(device_id=ctx.device_id)
    out = matmul(a, b, alpha=0.5, options=options)
    if not np.allclose(out, 0.5 * a @ b, rtol=1e-12, atol=1e-12):
        raise AssertionError("float64 product differs from numpy")
    fused = matmul(a, b, epilog=MatmulEpilog.RELU_BIAS, epilog_inputs={"bias": bias}, options=options)
    if not np.allclose(fused, np.maximum(a @ b + bias[:, None], 0), rtol=1e-12, atol=1e-12):
        raise AssertionError("RELU_BIAS differs from numpy")
    hits = plan_cache.stats.hits
    matmul(a, b, alpha=0.5, options=options)
    if plan_cache.stats.hits != hits + 1:
        raise AssertionError("a repeated stateless call did not hit the plan cache")
    return "33x17 @ 17x9 float64, fused bias + ReLU, cache hit"
