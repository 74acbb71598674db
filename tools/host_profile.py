"""Per-step host cost of nvmath's hot calls, with torch's equivalents in the same run.

For each row the tool measures the host time per call of a back-to-back loop (best of a few rounds,
one synchronisation per round), then runs the loop once more under :mod:`cProfile` and splits that
time into steps by where it was spent (each profiled function's own time goes to the step of its
module and name, see :data:`STEPS`): argument checks, operand wrapping (and the stateless key),
stream resolution, context, output allocation, the library call, the done-event rule, plan-cache
lookup, and the rest of our layers. The shares come from the profiled run and are scaled to the
unprofiled time per call (the profiler slows Python code more than C calls: read the shares as a map
of where the time goes, the total as the measurement).

Rows: ``Matmul.execute``, ``Matmul`` create + ``plan()`` + ``free()`` (also on an int stream, which
is "mortal" as the benchmark harness's external stream is), the stateless advanced ``matmul`` hit, the generic ``matmul`` hit,
``nvmath.torch.linear`` forward and forward+backward, ``FFT.execute``, the stateless ``fft`` hit and
an ``ifft`` of an ``fft`` (both stateless hits), and the torch references (``torch.matmul``,
``torch.mm(out=)``, ``F.linear``, ``torch.fft.fft``, and ``torch.fft.ifft`` of ``torch.fft.fft``
unnormalized as nvmath's). Two GPU rows call the compiled FFT hit alone (``FFTHit.run``), of the
``FFT`` row's plan and of the stateless cache's plan: the C call both FFT rows make, without their Python.
A Linear training step is also split: the forward with grad, the backward alone (``bwd (retained
graph)``: one graph's backward run again and again, for nvmath and for ``F.linear``) and a Python
``torch.autograd.Function`` around torch's products (``Python Function(F.linear)``). A decode-shaped
bf16 ``Linear`` (4096 -> 14336 on 8 tokens, ``no_grad``) is timed as ``nvmath.torch.Linear`` and as
``torch.nn.Linear`` (the host side of the benchmark suite's event-timed decode rows; on the compiled
path nvmath's runs its compiled Linear hit, whose steps cProfile cannot see: they count as
``nvmath``). A GroupedLinear
step of 8 groups (``nvmath.torch.grouped_linear fwd+bwd``) has a torch loop of ``F.linear`` beside it
(``F.linear loop fwd+bwd``): the host cost of one launch per group (from ``--size 1024`` on, where
each group's product reaches ``MIN_FLOPS_PER_GROUP``; smaller sizes run the grouped launch). On CUDA tensors
torch runs a Python backward on its autograd device thread: the profiled shares then mix that thread
with the calling thread's wait (on Python 3.12+ cProfile sees every thread); read the totals.

On the GPU machine (torch with CUDA)::

    PYTHONPATH=. python3 tools/host_profile.py [--size 64] [--calls 2000] [--json] [--files]
        [--rows SUBSTR[,...]] [--stream default|pooled|external] [--interleave]

``--interleave`` times the selected rows in turn (row 1, row 2, ..., then again; best of 7 rounds)
instead of one after the other: on a noisy machine nvmath's row and torch's then meet the same slow
phases, which a comparison of the two needs (the split into steps is profiled per row as before).

``--stream`` picks torch's current stream for every row: ``default`` (the legacy default stream, as
before), ``pooled`` (a ``torch.cuda.Stream`` of torch's pool) or ``external`` (a
``torch.cuda.ExternalStream`` over a stream torch does not own, as the benchmark harness sets: nvmath
treats it as one its owner may destroy, a *mortal* stream, see ``nvmath._internal.streams``).

``--bench SUITE:CASES`` profiles the benchmark harness's own host rows instead (``python -m benchmarks``:
its context, stream and setups; ``CASES`` a glob, e.g. ``matmul:host-64-*``), nvmath's and torch's
setup of each case, so a harness row and this tool's row of the same call can be told apart step by step.

On the GPU each row also gets its GPU time per call (column ``GPU us``, :func:`gpu_per_call`): a row
whose GPU time reaches its host time is bound by the GPU, and its host-time steps say little.

``--files`` lists, per row, the package files whose Python code one call runs (``sys.setprofile``).

On a machine without a GPU, ``--fake`` runs the matmul and ``nvmath.torch`` rows on the CPU fake GPU
of ``tools/torch_host_cost.py`` (torch CPU tensors posing as CUDA tensors, ``cublasLtMatmul`` a C no-op):
the pure-Python cost of our layers; the FFT rows (``FFT.execute``, ``fft.fft (hit)``) run on the fake of
``tools/fft_host_cost.py`` (cufftXtExec a C no-op, no context switch), the generic matmul hits on the fake
of ``tools/generic_host_cost.py`` (the cuBLAS calls C no-ops). The generic rows with grad and the
torch-CUDA rows need a GPU.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pathlib
import pstats
import sys
import time
from collections.abc import Callable
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]

#: Step name -> (path fragments, function-name fragments): a profiled function belongs to the first
#: step one of whose path fragments is in its file and, when names are given, one of whose name
#: fragments is in its name. Built-in (C) functions are matched by their names.
STEPS: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("library call", ("bindings/_unchecked", "_cufft_plan"), ()),
    ("library call", ("advanced/_launch.py",), ("call",)),
    ("library call", ("<ctypes", "CFuncPtr", "_no_op_matmul"), ()),
    # the compiled FFT hit (nvmath._fastcall.FFTHit.run) and Matmul.execute's (MatmulExecuteHit.run): the
    # result allocation and the launch in one call
    ("library call", ("FFTHit", "MatmulExecuteHit"), ()),
    ("argument checks", ("_nvm_guarded",), ()),
    ("fake GPU stubs", ("tests/", "torch_host_cost", "fft_host_cost"), ()),
    ("done-event rule", ("_internal/streams",), ("record_done", "mark_done", "_own_event")),
    ("done-event rule", ("_internal/event_record",), ()),
    ("stream resolution", ("_internal/streams",), ()),
    ("context", ("_internal/devices",), ("context_ctx", "__enter__", "__exit__", "primary_context")),
    ("output allocation", ("_results.py", "_internal/memory", "empty_strided", "empty"), ()),
    ("plan-cache lookup", ("_internal/stateless", "_internal/plan_cache", "_stateless.py"), ()),
    ("operand wrapping", ("_internal/tensors",), ()),
    ("argument checks", ("_validation", "_internal/state", "torch_bridge", "_internal/options"), ()),
    ("argument checks", ("_traits.py",), ("check",)),
    ("nvmath (rest)", ("nvmath/",), ()),
    ("torch", ("torch/", "<built-in method torch", "torch._C"), ()),
]
ORDER = [
    "argument checks", "operand wrapping", "plan-cache lookup", "stream resolution", "context",
    "output allocation", "library call", "done-event rule", "nvmath (rest)", "torch", "fake GPU stubs",
    "other",
]  # fmt: skip


def classify(filename: str, name: str) -> str:
    """The step of a profiled function (``filename``, ``name`` as :mod:`pstats` gives them)."""
    where = filename.replace("\\", "/")
    for step, paths, names in STEPS:
        hit = any(p in where or p in name for p in paths)
        if hit and (not names or any(n in name for n in names)):
            return step
    return "other"


def measure(fn: Callable[[], Any], sync: Callable[[], None], calls: int, rounds: int = 5) -> float:
    """Best us per call over ``rounds`` loops of ``calls`` calls (one ``sync`` after each loop)."""
    best = float("inf")
    for _ in range(rounds):
        sync()
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        sync()
        best = min(best, (time.perf_counter_ns() - t0) / calls / 1e3)
    return best


def measure_interleaved(
    fns: dict[str, Callable[[], Any]], sync: Callable[[], None], calls: int, rounds: int = 5
) -> dict[str, float]:
    """:func:`measure` of every row, with the rows' loops taken in turn in each round (row 1, row 2, ...,
    row 1, ...): a slow phase of a shared machine then hits every row of the round, not one row, so rows
    read against each other (nvmath's against torch's) compare under the same conditions."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            sync()
            t0 = time.perf_counter_ns()
            for _ in range(calls):
                fn()
            sync()
            best[name] = min(best[name], (time.perf_counter_ns() - t0) / calls / 1e3)
    return best


def gpu_per_call(fn: Callable[[], Any], calls: int = 200) -> float | None:
    """GPU time per call (us) on torch's current stream: ``calls`` calls queued behind a ~50 ms spin
    kernel, timed with CUDA events, so the events see the calls' kernels back to back, not the host's
    gaps. A row whose GPU time reaches its host time is bound by the GPU, not by its host work.
    ``None`` without torch's CUDA (the fake rows) or without ``torch.cuda._sleep``."""
    torch = sys.modules.get("torch")
    spin = getattr(getattr(torch, "cuda", None), "_sleep", None)
    if torch is None or spin is None or not torch.cuda.is_available():
        return None
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    spin(100_000_000)  # ~50 ms of clock cycles: longer than queueing the calls takes
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / calls


def breakdown(
    fn: Callable[[], Any], sync: Callable[[], None], calls: int, rounds: int = 3
) -> dict[str, float]:
    """Share of profiled self time per step (fractions summing to 1): per function the least self time
    of ``rounds`` profiled loops (a shared machine's stalls land in one round, not in all)."""
    least: dict[tuple, float] = {}
    for _ in range(rounds):
        prof = cProfile.Profile()
        sync()
        prof.enable()
        for _ in range(calls):
            fn()
        prof.disable()
        sync()
        for key, row in pstats.Stats(prof).stats.items():  # type: ignore[attr-defined]
            least[key] = min(least.get(key, row[2]), row[2])
    totals: dict[str, float] = {}
    for (filename, line, name), spent in least.items():
        if name == "<lambda>" and filename.endswith("host_profile.py"):
            continue  # a row's own lambda: the loop, not the call
        step = classify(filename, name)
        totals[step] = totals.get(step, 0.0) + spent
    whole = sum(totals.values()) or 1.0
    return {k: v / whole for k, v in totals.items()}


# ------------------------------------------------------------------------------------------ rows
def _python_function_linear() -> Any:
    """``F.linear`` (no bias gradient) as a Python ``torch.autograd.Function`` whose backward is two
    ``torch.mm`` calls: what any Python-level autograd node costs around torch's own products (on CUDA
    tensors torch runs a Python backward on its autograd device thread, which takes the GIL)."""
    import torch

    class TorchLinearFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, w: Any, b: Any) -> Any:
            ctx.save_for_backward(x, w)
            return torch.nn.functional.linear(x, w, b)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            x, w = ctx.saved_tensors
            return torch.mm(g, w), torch.mm(g.t(), x), None

    return TorchLinearFn.apply


def _backward_rows(prefix: str, y: Any, gy: Any) -> dict[str, Callable[[], Any]]:
    """The backward alone, run again and again on one retained graph of ``y`` (gradients accumulate)."""
    return {f"{prefix} bwd (retained graph)": lambda: y.backward(gy, retain_graph=True)}


def use_stream(kind: str) -> Any:
    """Make torch's current stream on GPU 0 the ``kind`` of ``--stream``; return what keeps it alive."""
    import torch

    if kind == "default":
        return None
    own = torch.cuda.Stream(device=0)
    dev = torch.device("cuda", 0)
    stream = own if kind == "pooled" else torch.cuda.ExternalStream(own.cuda_stream, device=dev)
    torch.cuda.set_stream(stream)
    return own, stream


def gpu_rows(size: int, stream: str = "default") -> tuple[dict[str, Callable[[], Any]], Callable[[], None]]:
    """Row name -> a no-argument call, on torch CUDA tensors (each run once before timing), with torch's
    current stream of kind ``stream`` (see ``--stream``)."""
    import torch

    import nvmath
    import nvmath.torch as nt

    keep = use_stream(stream)
    dev = torch.device("cuda", 0)
    a, b = torch.randn(size, size, device=dev), torch.randn(size, size, device=dev)
    out = torch.empty(size, size, device=dev)
    w, bias = torch.randn(size, size, device=dev), torch.randn(size, device=dev)
    xg = torch.randn(size, size, device=dev, requires_grad=True)
    wg = torch.randn(size, size, device=dev, requires_grad=True)
    gy = torch.ones(size, size, device=dev)
    sig = torch.randn(size * size, dtype=torch.complex64, device=dev)
    mm = nvmath.linalg.advanced.Matmul(a, b)
    mm.plan()
    inplace = nvmath.linalg.advanced.Matmul(a, b, out, beta=0.0, options={"inplace": True})
    inplace.plan()
    fft = nvmath.fft.FFT(sig)
    fft.plan()
    ext = torch.cuda.Stream().cuda_stream  # an int stream: a "mortal" one, as the harness's external stream
    rows = {
        "Matmul.execute": mm.execute,
        "Matmul.execute inplace": inplace.execute,
        "Matmul create+plan+free": _create_plan_free(nvmath.linalg.advanced.Matmul, a, b),
        "Matmul create+plan+free (int stream)": _create_plan_free(nvmath.linalg.advanced.Matmul, a, b, ext),
        "advanced.matmul (hit)": lambda: nvmath.linalg.advanced.matmul(a, b),
        "generic matmul (hit)": lambda: nvmath.linalg.matmul(a, b),
        "nvmath.torch.linear fwd": lambda: nt.linear(a, w, bias),
        "nvmath.torch.linear fwd+bwd": lambda: nt.linear(xg, wg, bias).backward(gy),
        "FFT.execute": fft.execute,
        "fft.fft (hit)": lambda: nvmath.fft.fft(sig),
        "fft then ifft (hits)": lambda: nvmath.fft.ifft(nvmath.fft.fft(sig)),
        **_fft_hit_rows(nvmath, fft, sig),
        "torch.matmul": lambda: torch.matmul(a, b),
        "torch.mm(out=)": lambda: torch.mm(a, b, out=out),
        "F.linear": lambda: torch.nn.functional.linear(a, w, bias),
        "F.linear fwd+bwd": lambda: torch.nn.functional.linear(xg, wg, bias).backward(gy),
        "torch.fft.fft": lambda: torch.fft.fft(sig),
        "torch.fft.fft then ifft": lambda: torch.fft.ifft(torch.fft.fft(sig), norm="forward"),
    }
    rows.update(_training_rows(nt, xg, wg, bias, gy))
    rows.update(_decode_rows(nt, torch, dev))
    rows["generic matmul (grad)"] = lambda: nvmath.linalg.matmul(xg, wg)
    rows["torch.matmul (grad)"] = lambda: torch.matmul(xg, wg)
    rows.update(_grouped_rows(nt, size))

    def sync() -> None:
        assert keep is not None or stream == "default"  # (the closure holds the stream alive)
        torch.cuda.synchronize()

    return rows, sync


def _fft_hit_rows(nvmath: Any, fft: Any, sig: Any) -> dict[str, Callable[[], Any]]:
    """The compiled FFT hit's call alone (``FFTHit.run``: raw stream, allocation, launch), of the ``FFT``
    row's plan and of the stateless cache's plan of the same transform: the same C code on two plans, so a
    difference between these rows is the plans' (cuFFT's), and one between ``FFT.execute`` and ``fft.fft
    (hit)`` beyond their Python is the run's noise or the profile's attribution."""
    ptr, forward = sig.data_ptr(), nvmath.fft.FFTDirection.FORWARD
    nvmath.fft.fft(sig)
    nvmath.fft.fft(sig)  # (the cache's last call: its plan's entry)
    cached = nvmath.fft.plan_cache.last[2]
    planner = fft.hit_entry()
    return {
        "FFTHit.run (FFT's plan)": lambda: planner(sig, ptr, None, None, None),
        "FFTHit.run (cached plan)": lambda: cached(sig, ptr, sig, forward, None),
    }


def _decode_rows(nt: Any, torch: Any, dev: Any) -> dict[str, Callable[[], Any]]:
    """One bf16 ``Linear`` layer (4096 -> 14336, bias) on 8 tokens under ``no_grad``, nvmath's and
    torch's module: the host side of the event-timed decode rows of ``benchmarks/suites/torch.py``."""
    ours = nt.Linear(4096, 14336, device=dev, dtype=torch.bfloat16)
    theirs = torch.nn.Linear(4096, 14336, device=dev, dtype=torch.bfloat16)
    x = torch.randn(8, 4096, device=dev, dtype=torch.bfloat16)

    def no_grad(layer: Any) -> Callable[[], Any]:
        def run() -> Any:
            with torch.no_grad():
                return layer(x)

        return run

    return {
        "nvmath.torch.Linear m=8 bf16 no_grad": no_grad(ours),
        "torch.nn.Linear m=8 bf16 no_grad": no_grad(theirs),
    }


def _create_plan_free(matmul: Any, a: Any, b: Any, stream: Any = None) -> Callable[[], None]:
    """One ``Matmul(a, b)`` + ``plan()`` + ``free()`` (on ``stream``: the operands' current one by default)."""

    def cycle() -> None:
        mm = matmul(a, b, stream=stream)
        mm.plan(stream=stream)
        mm.free()

    return cycle


def _grouped_rows(nt: Any, size: int, groups: int = 8) -> dict[str, Callable[[], Any]]:
    """A GroupedLinear training step of ``groups`` groups of ``size`` tokens (size x size weights):
    nvmath's (per-group cuBLASLt products once planned, at the counts' second call) against a torch
    loop of ``F.linear`` (split, per-group Linear, cat)."""
    import torch

    dev = torch.device("cuda", 0)
    x = torch.randn(groups * size, size, device=dev, requires_grad=True)
    w = torch.randn(groups, size, size, device=dev, requires_grad=True)
    b = torch.randn(groups, size, device=dev, requires_grad=True)
    gy = torch.ones(groups * size, size, device=dev)
    counts = [size] * groups
    linear = torch.nn.functional.linear

    def loop() -> Any:
        return torch.cat([linear(xg, w[i], b[i]) for i, xg in enumerate(x.split(counts))])

    def grouped() -> Any:
        return nt.grouped_linear(x, w, b, counts)

    return {
        f"nvmath.torch.grouped_linear fwd+bwd ({groups} groups)": lambda: grouped().backward(gy),
        f"F.linear loop fwd+bwd ({groups} groups)": lambda: loop().backward(gy),
    }


def _training_rows(
    nt: Any, xg: Any, wg: Any, bias: Any, gy: Any, *, torch_rows: bool = True
) -> dict[str, Callable[[], Any]]:
    """Where a Linear training step's time goes: the forward with grad alone, the backward alone (on a
    retained graph) and, with ``torch_rows``, torch's backward alone and a Python autograd node around
    torch's products (the floor of any Python backward)."""
    import torch

    rows = {
        "nvmath.torch.linear fwd (grad)": lambda: nt.linear(xg, wg, bias),
        **_backward_rows("nvmath.torch.linear", nt.linear(xg, wg, bias), gy),
    }
    if torch_rows:
        py_linear = _python_function_linear()
        rows.update(_backward_rows("F.linear", torch.nn.functional.linear(xg, wg, bias), gy))
        rows["Python Function(F.linear) fwd+bwd"] = lambda: py_linear(xg, wg, bias).backward(gy)
    return rows


def fake_rows(size: int, mp: Any) -> tuple[dict[str, Callable[[], Any]], Callable[[], None]]:
    """The rows that run on the CPU fake GPU (see the module notes)."""
    import torch
    import torch_host_cost

    from nvmath._internal import streams

    mp.setattr(streams, "_TORCH_RAW", None)  # looked up again under the fake (and restored after)
    nt = torch_host_cost.install(mp)
    import nvmath.linalg.advanced as adv
    from nvmath.bindings import cublasLt as lt

    # a C no-op before planning: the launches' compiled callers (and nvmath.torch's compiled Linear hit)
    # call it as they call cuBLASLt on the GPU (without the extension: a ctypes no-op, the pure path)
    mp.setattr(lt, "_p_cublasLtMatmul", torch_host_cost.c_no_op(16))

    def aligned(*shape: int) -> Any:
        n = 1
        for e in shape:
            n *= e
        flat = torch.randn(n + 128, dtype=torch.float32)
        skip = (-flat.data_ptr() % 256) // 4
        return flat[skip : skip + n].view(*shape)

    a, b, w, bias = aligned(size, size), aligned(size, size), aligned(size, size), aligned(size)
    xg, wg = a.clone().requires_grad_(), w.clone().requires_grad_()
    gy = torch.ones(size, size)
    mm = adv.Matmul(a, b)
    mm.plan()
    inplace = adv.Matmul(a, b, aligned(size, size), beta=0.0, options={"inplace": True})
    inplace.plan()
    rows = {
        "Matmul.execute": mm.execute,
        "Matmul.execute inplace": inplace.execute,
        "Matmul create+plan+free": _create_plan_free(adv.Matmul, a, b),
        "advanced.matmul (hit)": lambda: adv.matmul(a, b),
        "nvmath.torch.linear fwd": lambda: nt.linear(a, w, bias),
        "nvmath.torch.linear fwd+bwd": lambda: nt.linear(xg, wg, bias).backward(gy),
        "torch.mm(out=) (CPU compute)": lambda: torch.mm(a, b, out=torch.empty(size, size)),
    }
    rows.update(_training_rows(nt, xg, wg, bias, gy, torch_rows=False))  # (torch's would compute on the CPU)
    import fft_host_cost

    fft_host_cost.install(mp)  # FFT rows: cuFFT planned by a fake, cufftXtExec a C no-op
    rows.update({k: v for k, v in fft_host_cost.rows(1024).items() if k.startswith(("FFT", "fft"))})
    import generic_host_cost

    generic_host_cost.install(mp)  # the generic matmul's GPU route: cuBLAS planned by a fake, C no-ops
    rows.update(generic_host_cost.rows(size))
    mp.setattr(lt, "_p_cublasLtMatmul", torch_host_cost.c_no_op(16))  # (again: the installs above reset it)
    for fn in rows.values():
        fn()  # plan on the emulated cuBLASLt
    return rows, lambda: None


def bench_rows(
    spec: str, closers: list[Callable[[], Any]]
) -> tuple[dict[str, Callable[[], Any]], Callable[[], None]]:
    """The host rows ``SUITE:CASES`` of the benchmark harness, made by its own setups (nvmath and torch) on
    its own context; what must run after the measurement is appended to ``closers``.

    Raises:
        SystemExit: no row could be set up (the message lists each case's reason, e.g. no GPU).
    """
    import fnmatch

    from benchmarks.context import Settings, make_context
    from benchmarks.registry import Prepared, Skip, load_suite

    suite, _, pattern = spec.partition(":")
    ctx = make_context(Settings.for_run(quick=False))
    closers.append(ctx.close)
    ctx.mode = "host"
    rows: dict[str, Callable[[], Any]] = {}
    skipped: list[str] = []
    for case in load_suite(suite):
        if case.mode != "host" or not fnmatch.fnmatch(case.name, pattern or "*"):
            continue
        for lib in ("nvmath", "torch"):
            setup = case.setups.get(lib)
            if setup is None:
                continue
            try:
                made = setup(ctx)
            except Skip as exc:
                skipped.append(f"{case.name} [{lib}]: {exc}")
                continue
            prepared = made if isinstance(made, Prepared) else Prepared(fn=made)
            rows[f"{case.name} [{lib}]"] = prepared.fn
            if prepared.teardown is not None:
                closers.insert(0, prepared.teardown)
    if not rows:
        why = "; ".join(skipped) or "no such case"
        raise SystemExit(f"no host row of {spec!r} could be set up: {why}")
    return rows, ctx.sync


# ------------------------------------------------------------------------------------------ main
def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Measure every selected row; one dict per row (``us``, ``steps``: step -> us)."""
    from _pytest.monkeypatch import MonkeyPatch

    mp = MonkeyPatch()
    closers: list[Callable[[], Any]] = []
    try:
        if args.bench:
            rows, sync = bench_rows(args.bench, closers)
        else:
            rows, sync = fake_rows(args.size, mp) if args.fake else gpu_rows(args.size, args.stream)
        if args.rows:
            rows = {k: v for k, v in rows.items() if any(_row_matches(k, p) for p in args.rows.split(","))}
        timed: dict[str, float] = {}
        if args.interleave:
            for fn in rows.values():
                for _ in range(20):
                    fn()  # plan, warm caches
            timed = measure_interleaved(rows, sync, args.calls, rounds=7)
        results = []
        for name, fn in rows.items():
            if name not in timed:
                for _ in range(20):
                    fn()  # plan, warm caches
            us = timed[name] if name in timed else measure(fn, sync, args.calls)
            shares = breakdown(fn, sync, max(args.calls // 4, 50))
            steps = {k: round(us * shares.get(k, 0.0), 2) for k in ORDER if shares.get(k)}
            row = {"row": name, "us": round(us, 2), "steps": steps, "files": files_touched(fn)}
            gpu = None if args.fake else gpu_per_call(fn)
            if gpu is not None:
                row["gpu_us"] = round(gpu, 2)
            results.append(row)
        return results
    finally:
        for close in closers:
            close()
        if args.fake:  # free the planners made on the fake while it is installed (none outlives it)
            import fft_host_cost

            from nvmath._internal import caches

            fft_host_cost.free_planners()
            caches.clear_all()
            sys.modules["torch"].set_flush_denormal(False)  # (torch_host_cost.install turns it on)
        mp.undo()


def _row_matches(name: str, part: str) -> bool:
    """Whether row ``name`` is selected by ``part`` of ``--rows``: a substring, or ``=NAME`` exactly."""
    return name == part[1:] if part.startswith("=") else part in name


def files_touched(fn: Callable[[], Any]) -> list[str]:
    """The package files whose Python code one call of ``fn`` runs (traced with :func:`sys.setprofile`)."""
    seen: set[str] = set()

    def tracer(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            seen.add(frame.f_code.co_filename)

    sys.setprofile(tracer)
    try:
        fn()
    finally:
        sys.setprofile(None)
    root = str(ROOT / "nvmath")
    return sorted("nvmath" + f[len(root) :] for f in seen if f.startswith(root))


def render(results: list[dict[str, Any]]) -> str:
    """A text table: one row per call, one column per step (us), the total first."""
    steps = [s for s in ORDER if any(s in r["steps"] for r in results)]
    width = max(len(r["row"]) for r in results) + 2
    short = {s: s.split(" (")[0][:10] for s in steps}
    gpu = any("gpu_us" in r for r in results)  # the GPU time per call next to the host time
    head = f"{'row':{width}s}{'us/call':>9s}" + (f"{'GPU us':>9s}" if gpu else "")
    lines = [head + "".join(f"{short[s]:>12s}" for s in steps)]
    for r in results:
        cells = "".join(f"{r['steps'].get(s, 0.0):12.2f}" for s in steps)
        g = (f"{r['gpu_us']:9.2f}" if "gpu_us" in r else f"{'-':>9s}") if gpu else ""
        lines.append(f"{r['row']:{width}s}{r['us']:9.2f}{g}{cells}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64, help="square operand size (default 64)")
    parser.add_argument("--calls", type=int, default=2000, help="calls per timed loop")
    parser.add_argument(
        "--rows", default=None, help="rows whose name contains one of these (comma-separated); =NAME: exactly"
    )
    parser.add_argument("--fake", action="store_true", help="the CPU fake GPU (no GPU needed)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument(
        "--interleave", action="store_true", help="time the selected rows in turn (best of 7 rounds of each)"
    )
    parser.add_argument("--files", action="store_true", help="also list the package files each row runs")
    parser.add_argument("--bench", default=None, help="SUITE:CASES: the benchmark harness's host rows")
    parser.add_argument(
        "--stream", choices=("default", "pooled", "external"), default="default",
        help="torch's current stream for the GPU rows (default: the legacy default stream)",
    )
    args = parser.parse_args(argv)
    results = run(args)
    meta = {
        "size": args.size, "calls": args.calls, "fake": args.fake, "stream": args.stream,
        "interleave": args.interleave, "unit": "us per call",
    }  # fmt: skip
    if args.json:
        print(json.dumps({"meta": meta, "rows": results}, indent=1))
        return
    print(render(results))
    if args.files:
        for r in results:
            print(f"\n{r['row']}: {len(r['files'])} files\n  " + "\n  ".join(r["files"]))


if __name__ == "__main__":
    main()
