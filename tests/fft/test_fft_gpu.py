"""GPU FFTs (cuFFT) against numpy.fft in float64: types x dtypes x ranks x axes x batches x views.

Run on the GPU machine: ``PYTHONPATH=. python3 -m pytest tests/fft -q -p no:cacheprovider``.
Tolerances: float64 1e-12, float32 1e-5, half 2e-2, each times log2(N) (relative L2 error).
"""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nvmath.fft as nf
from nvmath.fft import FFT, ExecutionCUDA, FFTDirection, UnsupportedLayoutError

pytestmark = pytest.mark.gpu

TOL = {"single": 1e-5, "double": 1e-12, "half": 2e-2}


def rel_err(got, ref) -> float:
    """Relative L2 error in float64; NaN never passes."""
    got, ref = np.asarray(got, dtype=np.complex128), np.asarray(ref, dtype=np.complex128)
    err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    return err if math.isfinite(err) else math.inf


def to_device(pkg: str, host: np.ndarray):
    """A contiguous device copy of ``host`` in ``pkg`` (torch or cupy)."""
    if pkg == "torch":
        import torch

        return torch.from_numpy(np.ascontiguousarray(host)).cuda()
    import cupy

    return cupy.asarray(host)


def to_host(x) -> np.ndarray:
    """A numpy copy of a torch / cupy / numpy array (complex32 widened to complex64)."""
    if type(x).__module__.startswith("torch"):
        import torch

        if x.dtype == torch.complex32:
            x = x.to(torch.complex64)
        return x.cpu().numpy()
    if type(x).__module__.startswith("cupy"):
        return x.get()
    return np.asarray(x)


def strided_view(pkg: str, host: np.ndarray, perm, step: int):
    """A device view with the values of ``host``, laid out with axes in ``perm`` order, every ``step``-th."""
    big = [host.shape[p] * step for p in perm]
    base = np.full(big, 7, dtype=host.dtype)
    sl = tuple(slice(None, None, step) for _ in perm)
    inv = tuple(int(i) for i in np.argsort(perm))
    base[sl].transpose(inv)[...] = host
    dev = to_device(pkg, base)[sl]
    view = dev.permute(*inv) if pkg == "torch" else dev.transpose(inv)
    np.testing.assert_array_equal(to_host(view), host)
    return view


def signal(rng, shape, kind: str) -> np.ndarray:
    """Random never-zero float64 ('real') or complex128 data."""
    x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
    if kind == "complex":
        x = x + 1j * rng.uniform(0.5, 1.5, shape)
    return x


DTYPES = {
    ("single", "real"): np.float32,
    ("single", "complex"): np.complex64,
    ("double", "real"): np.float64,
    ("double", "complex"): np.complex128,
}


@st.composite
def gpu_problems(draw):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 9 if ndim <= 2 else 5), min_size=ndim, max_size=ndim)))
    axes = tuple(draw(st.permutations(range(ndim)))[: draw(st.integers(1, ndim))])
    return {
        "pkg": draw(st.sampled_from(["torch", "cupy"])),
        "shape": shape,
        "axes": axes,
        "perm": draw(st.permutations(range(ndim))),
        "step": draw(st.sampled_from([1, 1, 2])),
        "kind": draw(st.sampled_from(["fft", "ifft", "rfft", "irfft"])),
        "precision": draw(st.sampled_from(["single", "double"])),
        "layout": draw(st.sampled_from(["optimized", "natural"])),
        "fallback": draw(st.sampled_from(["error", "copy"])),
        "inplace": draw(st.booleans()),
        "stateful": draw(st.booleans()),
    }


def _operand_and_reference(p, rng):
    """The host operand (before upload), the numpy reference and N (points per transform)."""
    shape, axes, kind = p["shape"], p["axes"], p["kind"]
    n = math.prod(shape[a] for a in axes)
    if kind == "irfft":
        s = signal(rng, shape, "real")
        return np.fft.rfftn(s, axes=axes), s * n, n
    x = signal(rng, shape, "real" if kind == "rfft" else "complex")
    dt = DTYPES[(p["precision"], "real" if kind == "rfft" else "complex")]
    x = x.astype(dt).astype(np.complex128 if kind != "rfft" else np.float64)
    ref = {
        "fft": lambda: np.fft.fftn(x, axes=axes),
        "ifft": lambda: np.fft.ifftn(x, axes=axes, norm="forward"),
        "rfft": lambda: np.fft.rfftn(x, axes=axes),
    }[kind]()
    return x, ref, n


def _run(p, operand):
    kind, axes = p["kind"], p["axes"]
    options = {"result_layout": p["layout"], "layout_fallback": p["fallback"]}
    if kind in ("fft", "ifft") and p["inplace"]:
        options["inplace"] = True
    if kind == "irfft" and p["shape"][axes[-1]] % 2:
        options["last_axis_parity"] = "odd"
    if not p["stateful"]:
        return getattr(nf, kind)(operand, axes=axes, options=options)
    options["fft_type"] = {"fft": "C2C", "ifft": "C2C", "rfft": "R2C", "irfft": "C2R"}[kind]
    with FFT(operand, axes=axes, options=options) as f:
        f.plan()
        direction = FFTDirection.INVERSE if kind in ("ifft", "irfft") else FFTDirection.FORWARD
        return f.execute(direction=direction)


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(gpu_problems())
def test_gpu_matches_numpy(p):
    """Every transform type, precision, rank, axes placement, batch and strided view equals numpy."""
    if p["pkg"] == "torch":
        pytest.importorskip("torch")
    else:
        pytest.importorskip("cupy")
    rng = np.random.default_rng(11)
    host, ref, n = _operand_and_reference(p, rng)
    real = p["kind"] == "rfft"
    host = host.astype(DTYPES[(p["precision"], "real" if real else "complex")])
    operand = strided_view(p["pkg"], host, p["perm"], p["step"])
    try:
        out = _run(p, operand)
    except UnsupportedLayoutError:
        assert p["fallback"] == "error" or p["inplace"]
        return
    if p["inplace"] and p["kind"] in ("fft", "ifft"):
        assert out is operand
    got = to_host(out)
    assert got.shape == ref.shape
    assert rel_err(got, ref) < TOL[p["precision"]] * max(1.0, math.log2(n))


@pytest.mark.parametrize("shape, axes", [((16,), None), ((4, 8), None), ((2, 4, 8), (1, 2)), ((8, 4), (0,))])
@pytest.mark.parametrize("kind", ["fft", "rfft", "irfft"])
def test_gpu_half_precision(torch_cuda, shape, axes, kind):
    """fp16 / complex32 transforms with power-of-two sizes are within 2e-2 of float64."""
    torch = torch_cuda
    rng = np.random.default_rng(3)
    ax = tuple(range(len(shape))) if axes is None else axes
    n = math.prod(shape[a] for a in ax)
    if kind == "irfft":
        s = signal(rng, shape, "real")
        x = torch.from_numpy(np.fft.rfftn(s, axes=ax).astype(np.complex64)).cuda().to(torch.complex32)
        ref, out = s * n, nf.irfft(x, axes=axes, options={"layout_fallback": "copy"})
        assert out.dtype == torch.float16
    else:
        h = signal(rng, shape, "real" if kind == "rfft" else "complex")
        x = torch.from_numpy(h.astype(np.float32 if kind == "rfft" else np.complex64)).cuda()
        x = x.half() if kind == "rfft" else x.to(torch.complex32)
        ref = np.fft.rfftn(h, axes=ax) if kind == "rfft" else np.fft.fftn(h, axes=ax)
        out = getattr(nf, kind)(x, axes=axes, options={"layout_fallback": "copy"})
        assert out.dtype == torch.complex32
    assert rel_err(to_host(out), ref) < TOL["half"]


def test_gpu_repeated_c2r_keeps_operand(torch_cuda):
    """C2R (1-D, 3-D and 4-D composed) executes repeatedly with the same result; the operand is untouched."""
    torch = torch_cuda
    rng = np.random.default_rng(5)
    for shape in [(64,), (8, 6, 10), (3, 4, 5, 6)]:
        s = signal(rng, shape, "real")
        x = torch.from_numpy(np.fft.rfftn(s)).cuda()
        keep = x.clone()
        with FFT(x, options={"fft_type": "C2R"}) as f:
            f.plan()
            outs = [f.execute() for _ in range(3)]
        torch.cuda.synchronize()
        assert torch.equal(x, keep)
        for out in outs:
            assert rel_err(to_host(out), s * s.size) < 1e-12 * math.log2(s.size)
        for _ in range(2):
            assert rel_err(to_host(nf.irfft(x)), s * s.size) < 1e-12 * math.log2(s.size)
        assert torch.equal(x, keep)


@pytest.mark.parametrize("pkg", ["torch", "cupy"])
def test_gpu_inplace(pkg, request):
    """In place, the operand object is returned holding the transform (also for a transposed view)."""
    request.getfixturevalue("torch_cuda" if pkg == "torch" else "cupy")
    rng = np.random.default_rng(6)
    h = signal(rng, (12, 20), "complex")
    x = strided_view(pkg, h, (1, 0), 1)
    assert nf.fft(x, options={"inplace": True}) is x
    assert rel_err(to_host(x), np.fft.fftn(h)) < 1e-12 * 8
    y = nf.ifft(x, axes=[0], options={"inplace": True})
    assert y is x and rel_err(to_host(x), np.fft.fft(h, axis=1) * 12) < 1e-12 * 8


def test_gpu_reset_release(torch_cuda):
    """reset_operand swaps data, rejects mismatches, and release/reset cycles work on the GPU."""
    torch = torch_cuda
    a = torch.randn(32, 64, dtype=torch.complex64, device="cuda")
    b = torch.randn(32, 64, dtype=torch.complex64, device="cuda")
    with FFT(a, axes=[1]) as f:
        f.plan()
        torch.testing.assert_close(f.execute(), torch.fft.fft(a, dim=1), rtol=1e-4, atol=1e-4)
        f.reset_operand(b)
        torch.testing.assert_close(f.execute(), torch.fft.fft(b, dim=1), rtol=1e-4, atol=1e-4)
        with pytest.raises(ValueError, match="strides"):
            f.reset_operand(b.t().contiguous().t())
        f.release_operand()
        f.reset_operand(a)
        torch.testing.assert_close(f.execute(), torch.fft.fft(a, dim=1), rtol=1e-4, atol=1e-4)


def test_gpu_stream_ordering(torch_cuda):
    """Work is queued on the caller's stream, after the work already there (None = current stream)."""
    torch = torch_cuda
    x = torch.randn(256, 4096, dtype=torch.complex64, device="cuda")
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(20_000_000)
        x.mul_(2)
        y_current = nf.fft(x, axes=[1])
        y_explicit = nf.fft(x, axes=[1], stream=s)
        y_int = nf.fft(x, axes=[1], stream=s.cuda_stream)
    s.synchronize()
    ref = torch.fft.fft(x, dim=1)
    for y in (y_current, y_explicit, y_int):
        torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-3)


def test_gpu_alternating_streams(torch_cuda):
    """One planner executed on two streams in turn re-binds and stays correct."""
    torch = torch_cuda
    x = torch.randn(64, 1024, dtype=torch.complex64, device="cuda")
    ref = torch.fft.fft(x, dim=1)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda.synchronize()
    with FFT(x, axes=[1]) as f:
        f.plan()
        outs = [f.execute(stream=s) for s in (s1, s2, s1, s2)]
        torch.cuda.synchronize()
    for out in outs:
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-3)


def test_gpu_cupy_stream(cupy):
    """cupy operands run on a cupy stream object."""
    x = cupy.asarray(signal(np.random.default_rng(2), (16, 128), "complex"))
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        y = nf.fft(x, stream=s)
    s.synchronize()
    assert rel_err(y.get(), np.fft.fftn(x.get())) < 1e-12 * 11


def test_gpu_cross_space(cupy):
    """numpy on the GPU (execution='cuda') returns numpy; cupy on the CPU returns cupy; both block."""
    rng = np.random.default_rng(8)
    h = signal(rng, (8, 30), "complex")
    y = nf.fft(h, execution=ExecutionCUDA(device_id=0))
    assert isinstance(y, np.ndarray) and rel_err(y, np.fft.fftn(h)) < 1e-12 * 8
    r = nf.irfft(np.fft.rfftn(h.real), execution="cuda")
    assert rel_err(r, h.real * 240) < 1e-12 * 8
    with FFT(h, execution="cuda", options={"inplace": True}) as f:
        f.plan()
        z = h.copy()
        f.reset_operand(z)
        assert f.execute() is z and rel_err(z, np.fft.fftn(h)) < 1e-12 * 8
    c = cupy.asarray(h)
    w = nf.fft(c, execution="cpu")
    assert type(w) is type(c) and rel_err(w.get(), np.fft.fftn(h)) < 1e-12 * 8


def test_gpu_unsupported_layout_and_fallback(torch_cuda):
    """A layout cuFFT cannot describe raises; layout_fallback='copy' computes it."""
    torch = torch_cuda
    base = torch.randn(8, 12, dtype=torch.complex128, device="cuda")
    x = base[:, ::5]
    with pytest.raises(UnsupportedLayoutError) as info:
        nf.fft(x)
    y = nf.fft(x, options={"layout_fallback": "copy"})
    assert rel_err(to_host(y), np.fft.fftn(to_host(x))) < 1e-12 * 5
    fixed = x.permute(*info.value.permutation).contiguous()
    assert rel_err(to_host(nf.fft(fixed, axes=info.value.axes)), np.fft.fftn(to_host(x))) < 1e-12 * 5


def test_gpu_looped_and_composed_layouts(torch_cuda):
    """Batch axes around the transformed axis (looped launches) and 5-axis transforms are correct."""
    torch = torch_cuda
    x = torch.randn(3, 50, 7, dtype=torch.complex128, device="cuda")
    assert rel_err(to_host(nf.fft(x, axes=[1])), np.fft.fft(to_host(x), axis=1)) < 1e-12 * 6
    z = torch.randn(2, 3, 4, 5, 6, dtype=torch.complex128, device="cuda")
    assert rel_err(to_host(nf.fft(z)), np.fft.fftn(to_host(z))) < 1e-12 * 10
    r = torch.randn(2, 3, 4, 6, dtype=torch.float64, device="cuda")
    assert rel_err(to_host(nf.rfft(r)), np.fft.rfftn(to_host(r))) < 1e-12 * 10


def test_gpu_workspace_release_and_estimate(torch_cuda):
    """release_workspace frees the workspace; estimates match the planned size."""
    torch = torch_cuda
    x = torch.randn(1 << 20, dtype=torch.complex64, device="cuda")
    key = FFT.create_key(x)
    with FFT(x) as f:
        f.plan()
        planned = f._plan.workspace_size
        f.execute(release_workspace=True)
        assert f._plan.workspace.size == 0
        torch.testing.assert_close(f.execute(), torch.fft.fft(x), rtol=1e-3, atol=1e-2)
    assert nf.estimate_workspace_size(key, technique="refined") == planned
    assert nf.estimate_workspace_size(key) >= 0


def test_gpu_plan_cache_counts_and_bounds_workspace_bytes(torch_cuda):
    """The FFT plan cache counts the cuFFT workspace bytes its plans hold and keeps them within max_bytes
    (the newest plan always stays)."""
    torch = torch_cuda
    nf.plan_cache.clear()
    budget = nf.plan_cache.max_bytes
    try:
        shapes = [(64, 4096), (32, 2048, 3), (4096, 96)]
        for shape in shapes:
            x = torch.randn(*shape, dtype=torch.complex64, device="cuda")
            got = nf.fft(x, axes=[0])
            torch.testing.assert_close(got, torch.fft.fft(x, dim=0), rtol=1e-4, atol=1e-3)
        held = [nf.plan_cache.get(k).planner.workspace_bytes for k in nf.plan_cache.keys()]
        stats = nf.plan_cache.stats
        assert stats.nbytes == sum(held) and stats.max_bytes == budget
        nf.plan_cache.max_bytes = 0
        assert len(nf.plan_cache) == 1 or nf.plan_cache.stats.nbytes == 0
        assert sum(held) == 0 or len(nf.plan_cache) < len(shapes)
    finally:
        nf.plan_cache.max_bytes = budget
        nf.plan_cache.clear()


def test_gpu_plan_cache_threads(torch_cuda):
    """Threads on their own streams share one cached plan and get correct results."""
    torch = torch_cuda
    nf.plan_cache.clear()
    data = [torch.randn(128, 256, dtype=torch.complex64, device="cuda") for _ in range(4)]
    refs = [torch.fft.fft2(d) for d in data]
    torch.cuda.synchronize()
    errors = []

    def work(i):
        s = torch.cuda.Stream()
        try:
            with torch.cuda.stream(s):
                for _ in range(25):
                    y = nf.fft(data[i])
                    s.synchronize()
                    torch.testing.assert_close(y, refs[i], rtol=1e-4, atol=1e-2)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert nf.plan_cache.stats.size == 1


@pytest.mark.parametrize(
    "shape, axes, kind",
    [
        ((512, 8192), (1,), "fft"),
        ((128, 128, 128), None, "fft"),
        ((8, 1024, 1024), (1, 2), "rfft"),
        ((1 << 22,), None, "fft"),
        ((4096, 256), (0,), "fft"),
        ((64, 64, 33), None, "irfft"),
    ],
)
def test_gpu_target_shapes_match_torch(torch_cuda, shape, axes, kind):
    """Scaled-down TARGETS.md cases agree with torch.fft (cuFFT) in float32."""
    torch = torch_cuda
    dims = tuple(range(len(shape))) if axes is None else axes
    if kind == "irfft":  # Hermitian input: C2R of anything else is not well defined
        signal_ = torch.randn(*shape[:-1], 2 * (shape[-1] - 1), device="cuda")
        x = torch.fft.rfftn(signal_, dim=dims)
        ref = signal_ * signal_.numel()
    else:
        x = torch.randn(*shape, dtype=torch.float32 if kind == "rfft" else torch.complex64, device="cuda")
        ref = {"fft": torch.fft.fftn, "rfft": torch.fft.rfftn}[kind](x, dim=dims)
    out = getattr(nf, kind)(x, axes=axes)
    assert (torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref)).item() < 1e-5


@pytest.mark.slow
def test_gpu_create_execute_free_cycles_keep_memory_flat(torch_cuda):
    """1,000 create/plan/execute/free cycles leave torch's allocator and the device's free memory flat."""
    torch = torch_cuda
    x = torch.randn(64, 1000, dtype=torch.complex64, device="cuda")
    for _ in range(5):
        with FFT(x, axes=[1]) as f:
            f.plan()
            f.execute()
    torch.cuda.synchronize()
    allocated, free_before = torch.cuda.memory_allocated(), torch.cuda.mem_get_info()[0]
    for _ in range(1000):
        with FFT(x, axes=[1]) as f:
            f.plan()
            y = f.execute()
            del y
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == allocated
    assert free_before - torch.cuda.mem_get_info()[0] < 32 << 20


@pytest.mark.parametrize("pkg", ["torch", "cupy"])
def test_c2r_overwrite_operand_on_the_gpu(pkg):
    """overwrite_operand: the C2R result is right without the protective copy; execute() then needs
    reset_operand(); the stateless irfft with it matches numpy too."""
    from nvmath._errors import InvalidFFTState

    pytest.importorskip(pkg)
    rng = np.random.default_rng(5)
    s = rng.standard_normal((16, 64, 40))
    spectrum = np.fft.rfftn(s, axes=(1, 2)).astype(np.complex64)
    x = to_device(pkg, spectrum)
    with FFT(x, axes=(1, 2), options={"fft_type": "C2R", "overwrite_operand": True}) as f:
        assert f.traits.staging_strides is None
        f.plan()
        assert rel_err(to_host(f.execute()), s * 64 * 40) < 1e-5
        with pytest.raises(InvalidFFTState, match="overwrote the operand"):
            f.execute()
        f.reset_operand(to_device(pkg, spectrum))
        assert rel_err(to_host(f.execute()), s * 64 * 40) < 1e-5
    out = nf.irfft(to_device(pkg, spectrum), axes=(1, 2), options={"overwrite_operand": True})
    assert rel_err(to_host(out), s * 64 * 40) < 1e-5


def test_gpu_execute_takes_the_unchecked_exec(torch_cuda, monkeypatch):
    """cufftXtExec runs through the unchecked binding without falling back to the checked one (a fallback
    means ctypes refused an argument: the plan's handles, addresses and direction must be plain ints),
    for one-launch and multi-launch plans in both directions; the results match numpy."""
    from nvmath.bindings._unchecked import cufft as unchecked

    torch = torch_cuda
    fell_back = []
    checked = unchecked.xt_exec.__kwdefaults__["_checked"]
    monkeypatch.setitem(
        unchecked.xt_exec.__kwdefaults__, "_checked", lambda *a: (fell_back.append(a), checked(*a))[1]
    )
    rng = np.random.default_rng(11)
    for shape, axes in (((16, 32), None), ((3, 4, 5, 6), None)):
        h = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
        x = torch.from_numpy(h).cuda()
        assert rel_err(to_host(nf.fft(x, axes=axes)), np.fft.fftn(h)) < 1e-12 * 8
        with FFT(x) as f:
            f.plan()
            assert rel_err(to_host(f.execute(direction="inverse")), np.fft.ifftn(h) * h.size) < 1e-12 * 8
    assert fell_back == []


def test_gpu_one_call_launch_on_the_compiled_path(torch_cuda):
    """On the compiled path a planned FFT on torch's current stream goes one-call from its second
    execution (fft_exec_in_context: the context switched only if needed) and gives the Python launch's
    bits; on the pure path it never does. Stateless hits and stream changes stay right either way."""
    from nvmath._internal import fastpath

    torch = torch_cuda
    x = torch.randn(64, 1024, dtype=torch.complex64, device="cuda")
    ref = torch.fft.fft(x, dim=1)
    with FFT(x, axes=[1]) as f:
        f.plan()
        first = f.execute()
        plan = f._plan
        again = [f.execute() for _ in range(3)]
        assert (plan._one_call is not None) == fastpath.available(), fastpath.describe()
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            other = [f.execute() for _ in range(2)]
        s.synchronize()
        last = f.execute()
    hits = [nf.fft(x, axes=[1]) for _ in range(3)]
    torch.cuda.synchronize()
    torch.testing.assert_close(first, ref, rtol=1e-4, atol=1e-3)
    for y in (*again, *other, last, *hits):
        assert torch.equal(y, first)


def test_gpu_compiled_hit_follows_streams_and_matches_torch(torch_cuda):
    """On the compiled path the planned FFT's hit is the C FFTHit, armed once the plan runs steadily on
    torch's current stream; switching torch's current stream (a pooled and an external stream, and
    back), an explicit stream, release_workspace and a stateless hit between calls all give torch's
    transform bit for bit as the Python path does, and the hit is disarmed once the plan is freed."""
    from nvmath._internal import fastpath

    torch = torch_cuda
    x = torch.randn(8, 4096, dtype=torch.complex64, device="cuda")
    ref = torch.fft.fft(x, dim=1)
    pooled = torch.cuda.Stream()
    raw = torch.cuda.Stream()
    external = torch.cuda.ExternalStream(raw.cuda_stream)
    outs = []
    with FFT(x, axes=[1]) as f:
        f.plan()
        hit = getattr(f.hit_entry(), "__self__", None)  # (the compiled hit's entry is its bound run)
        compiled = type(hit).__name__ == "FFTHit"
        assert compiled == fastpath.available(), fastpath.describe()
        outs += [f.execute() for _ in range(3)]
        if compiled:
            assert hit.armed and hit.stream == torch.cuda.current_stream().cuda_stream
        for s in (pooled, external, pooled):
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                outs += [f.execute() for _ in range(3)]
                if compiled:  # (an external stream with a workspace records done events: Python path)
                    assert hit.stream == s.cuda_stream or (s is external and not hit.armed)
            torch.cuda.current_stream().wait_stream(s)
        outs += [f.execute(), f.execute(stream=pooled), f.execute(), f.execute(release_workspace=True)]
        pooled.synchronize()
        outs += [f.execute() for _ in range(2)]
        outs += [nf.fft(x, axes=[1]) for _ in range(3)]
        outs.append(f.execute())
    torch.cuda.synchronize()
    assert not compiled or not hit.armed
    torch.testing.assert_close(outs[0], ref, rtol=1e-4, atol=1e-3)
    for y in outs:
        assert torch.equal(y, outs[0])
