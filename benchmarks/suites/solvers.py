"""Dense solvers: the TARGETS.md table (cholesky, LU solve, eigh, qr, svd at n/batch 4096/1,
1024/16, 256/256 and 32/8192, float32 and float64) against torch.linalg, cupy.linalg and
nvmath-python's DirectSolver (LU solve only; it has no other dense solver).

Every library runs on the harness stream on the same random inputs (SPD for cholesky, symmetric for
eigh, plain random otherwise); ours and nvmath-python's are planned once in the setup and the timed
call is the execution (``execute()``, or ``factorize(); solve()`` for the LU solve). Small inputs
rotate among several copies so that a round touches more than twice the L2.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.registry import Case, Prepared, Skip, register
from benchmarks.suites._data import cupy_on_ctx_stream, rotate, torch_on_ctx_stream, torch_random

SIZES: tuple[tuple[int, int], ...] = ((4096, 1), (1024, 16), (256, 256), (32, 8192))
OPS: tuple[str, ...] = ("cholesky", "lu_solve", "eigh", "qr", "svd")
DTYPES: tuple[str, ...] = ("float32", "float64")


def _kind(op: str) -> str:
    return {"cholesky": "spd", "eigh": "sym"}.get(op, "general")


def _torch_inputs(ctx: Any, op: str, n: int, batch: int, dtype: str) -> list[tuple[Any, Any]]:
    """``(a, b)`` pairs (``b`` for the LU solve) as torch CUDA tensors on the harness stream."""
    torch = torch_on_ctx_stream(ctx)
    tdt = getattr(torch, dtype)
    shape = (batch, n, n)
    nbytes = batch * n * n * tdt.itemsize
    sets = []
    for _ in range(ctx.rotation(2 * nbytes, max_sets=8)):
        a = torch_random(torch, shape, tdt)
        if _kind(op) == "spd":
            a = a @ a.mT + n * torch.eye(n, device="cuda", dtype=tdt)
        elif _kind(op) == "sym":
            a = (a + a.mT) / 2
        b = torch_random(torch, (batch, n, 1), tdt) if op == "lu_solve" else None
        sets.append((a.contiguous(), b))
    torch.cuda.current_stream().synchronize()
    return sets


def _torch(op: str, n: int, batch: int, dtype: str) -> Callable[[Any], Any]:
    def setup(ctx: Any) -> Any:
        torch = torch_on_ctx_stream(ctx)
        la = torch.linalg
        fns = {
            "cholesky": lambda a, b: la.cholesky(a),
            "lu_solve": lambda a, b: la.solve(a, b),
            "eigh": lambda a, b: la.eigh(a),
            "qr": lambda a, b: la.qr(a),
            "svd": lambda a, b: la.svd(a, full_matrices=False),
        }
        return rotate([lambda a=a, b=b: fns[op](a, b) for a, b in _torch_inputs(ctx, op, n, batch, dtype)])

    return setup


def _cupy(op: str, n: int, batch: int, dtype: str) -> Callable[[Any], Any]:
    def setup(ctx: Any) -> Any:
        cupy = cupy_on_ctx_stream(ctx)
        la = cupy.linalg
        pairs = [
            (cupy.asarray(a), None if b is None else cupy.asarray(b))
            for a, b in _torch_inputs(ctx, op, n, batch, dtype)
        ]
        fns = {
            "cholesky": lambda a, b: la.cholesky(a),
            "lu_solve": lambda a, b: la.solve(a, b),
            "eigh": lambda a, b: la.eigh(a),
            "qr": lambda a, b: la.qr(a),
            "svd": lambda a, b: la.svd(a, full_matrices=False),
        }
        try:
            fns[op](*pairs[0])  # cupy rejects some batched shapes: report as a skip
        except Exception as exc:
            raise Skip(f"cupy.linalg: {type(exc).__name__}: {exc}") from exc
        return rotate([lambda a=a, b=b: fns[op](a, b) for a, b in pairs])

    return setup


def _ours(op: str, n: int, batch: int, dtype: str) -> Callable[[Any], Any]:
    def setup(ctx: Any) -> Any:
        import nvmath.linalg._solvers as S

        makers = {
            "cholesky": lambda a, b: S.Cholesky(a),
            "lu_solve": lambda a, b: S.DirectSolver(a, b),
            "eigh": lambda a, b: S.Eigh(a),
            "qr": lambda a, b: S.QR(a),
            "svd": lambda a, b: S.SVD(a, full_matrices=False),
        }
        planners, calls = [], []
        for a, b in _torch_inputs(ctx, op, n, batch, dtype):
            p = makers[op](a, b)
            p.plan()
            planners.append(p)
            calls.append((lambda p=p: (p.factorize(), p.solve())) if op == "lu_solve" else p.execute)
        choice = planners[0]._gpu.choice
        note = f"{choice.kernel} ({choice.algorithm})"
        return Prepared(fn=rotate(calls), teardown=lambda: [p.free() for p in planners], note=note)

    return setup


def _peer(n: int, batch: int, dtype: str) -> Callable[[Any], Any]:
    def setup(ctx: Any) -> Any:
        try:
            from nvmath.linalg import DirectSolver
        except ImportError as exc:
            raise Skip(f"nvmath-python has no dense DirectSolver: {exc}") from exc
        solvers = []
        for a, b in _torch_inputs(ctx, "lu_solve", n, batch, dtype):
            s = DirectSolver(a, b)
            s.plan()
            solvers.append(s)
        return Prepared(
            fn=rotate([lambda s=s: (s.factorize(), s.solve()) for s in solvers]),
            teardown=lambda: [s.free() for s in solvers],
        )

    return setup


def _register() -> None:
    for op in OPS:
        for dtype in DTYPES:
            for n, batch in SIZES:
                setups = {
                    "nvmath": _ours(op, n, batch, dtype),
                    "torch": _torch(op, n, batch, dtype),
                    "cupy": _cupy(op, n, batch, dtype),
                }
                if op == "lu_solve":
                    setups["nvmath-python"] = _peer(n, batch, dtype)
                register(
                    Case(
                        suite="solvers",
                        name=f"{op}-{dtype}-{n}x{batch}",
                        setups=setups,
                        quick=dtype == "float32",
                        description=f"{op} of {batch} {dtype} {n}x{n} matrices (ms per call)",
                        tags=(op, dtype),
                    )
                )


_register()
