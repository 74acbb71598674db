"""Self-test checks of the dense solvers for ``python -m nvmath`` (CPU and GPU).

Each check solves a small random problem (no diagonal boost) and compares a residual with a
float64 bound; GPU checks also exercise one batched and one looped kernel family.
"""

from __future__ import annotations

import numpy as np

from nvmath._diagnostics.selftest import Context, check


def _problem(batch: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    a = rng.standard_normal((batch, n, n))
    spd = a @ a.transpose(0, 2, 1) + n * np.eye(n)
    return a, spd, rng.standard_normal((batch, n, 2))


def _bound(value: float, limit: float, what: str) -> str:
    if not value < limit:
        raise AssertionError(f"{what}: residual {value:.2e} exceeds {limit:.0e}")
    return f"{what} {value:.1e}"


def _residuals(execution: str | None, algorithm: str = "auto") -> str:
    import nvmath.linalg._solvers as S

    a, spd, b = _problem(8, 24)
    opts = {"algorithm": algorithm, "check": True}
    x = S.solve(a, b, options=opts, execution=execution)
    out = [_bound(float(np.abs(a @ x - b).max() / np.abs(b).max()), 1e-10, "solve")]
    factor = S.cholesky(spd, options=opts, execution=execution)
    out.append(_bound(float(np.abs(factor @ factor.transpose(0, 2, 1) - spd).max() / 24), 1e-12, "cholesky"))
    w, v = S.eigh(spd, options=opts, execution=execution)
    out.append(_bound(float(np.abs(spd @ v - v * w[:, None, :]).max() / np.abs(spd).max()), 1e-12, "eigh"))
    q, r = S.qr(a, options=opts, execution=execution)
    out.append(_bound(float(np.abs(q @ r - a).max()), 1e-12, "qr"))
    u, s, vh = S.svd(a, full_matrices=False, options=opts, execution=execution)
    out.append(_bound(float(np.abs((u * s[:, None, :]) @ vh - a).max()), 1e-12, "svd"))
    return ", ".join(out)


@check("solvers: solve, cholesky, eigh, qr, svd on the CPU match their definitions", requires=("scipy",))
def _cpu_solvers(ctx: Context) -> str:
    return _residuals("cpu")


@check("solvers: a non-positive-definite matrix is named by LinAlgError", requires=("scipy",))
def _cpu_info(ctx: Context) -> str:
    import nvmath
    import nvmath.linalg._solvers as S

    a = np.stack([np.eye(3), np.diag([1.0, -1.0, 1.0])])
    try:
        S.cholesky(a, options={"check": True})
    except nvmath.LinAlgError as err:
        if err.indices != ((1,),) or err.info != (2,):
            raise AssertionError(f"wrong report: {err.indices}, {err.info}") from err
        return str(err)
    raise AssertionError("no LinAlgError for an indefinite matrix")


@check("solvers: batched cuSOLVER/cuBLAS kernels on the GPU", gpu=True)
def _gpu_batched(ctx: Context) -> str:
    return _residuals({"name": "cuda", "device_id": ctx.device_id}, "batched")


@check("solvers: looped 64-bit cuSOLVER kernels on the GPU", gpu=True)
def _gpu_looped(ctx: Context) -> str:
    return _residuals({"name": "cuda", "device_id": ctx.device_id}, "looped")
