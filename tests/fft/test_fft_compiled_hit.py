"""The compiled FFT hit (CPU only): ``nvmath._fastcall.FFTHit`` serves the default call of a planned
torch FFT in one C call exactly while the cuFFT plan armed it, and gives every other call to the Python
hit; the plan arms and disarms it as its one-call launch comes and goes (stream changes, explicit
streams, released workspace, a new operand layout, free, cache clear), and the results are numpy's and
bit-identical to the pure-Python path's.

The unit tests drive ``FFTHit`` with the extension's probe functions; the planner tests use the fakes of
``test_fft_one_call_launch.py`` (the fake cuFFT behind a C entry point, the driver's context calls as C
functions) with torch CPU tensors posing as GPU tensors (``tools/torch_host_cost.py``).
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import numpy as np
import pytest
from fake_gpu import torch_read_as_gpu

from nvmath._internal import fastpath, streams
from nvmath.fft import FFT, FFTDirection, _cufft_plan

_spec = importlib.util.spec_from_file_location(
    "fft_one_call_fakes", pathlib.Path(__file__).with_name("test_fft_one_call_launch.py")
)
_one_call_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_one_call_module)
fake, one_call = _one_call_module.fake, _one_call_module.one_call  # (fixtures)
FakeStream, _tool = _one_call_module.FakeStream, _one_call_module._tool

pytestmark = pytest.mark.skipif(
    not fastpath.available(), reason=f"the compiled path is not active: {fastpath.describe()}"
)


# ------------------------------------------------------------------------------------------ FFTHit alone
class Result:
    """A result "tensor" with an address."""

    def __init__(self, ptr):
        self.ptr = ptr

    def data_ptr(self):
        return self.ptr


@pytest.fixture
def unit():
    """An FFTHit over a probe of 5 arguments (plan 9 and 8 fixed; input, output, direction in slots 2-4),
    torch's "current stream" in ``state["stream"]``, results at 0x5000; yields (hit, state, launch)."""
    from nvmath import _fastcall

    state = {"stream": 7, "fallback": [], "allocs": []}

    def alloc(shape, strides):
        state["allocs"].append((shape, strides))
        return Result(0x5000)

    def fallback(*args):
        state["fallback"].append(args)
        return "fallback"

    hit = _fastcall.FFTHit(
        lambda device: state["stream"], 0, alloc, (4, 8), (8, 1), FFTDirection.FORWARD, -1, fallback
    )  # fmt: skip
    launch = _fastcall.FastCall(_fastcall._probe_address(5), (9, 8, 0, 0, 0), (2, 3, 4), error=ValueError)
    _fastcall._probe_set_status(0)
    yield hit, state, launch
    _fastcall._probe_set_status(0)


def test_an_armed_hit_allocates_and_launches_at_the_offsets(unit):
    """Armed for torch's current stream: one allocation with the shape and strides given, one launch of
    (fixed..., operand + in offset, result + out offset, direction); the result is returned."""
    from nvmath import _fastcall

    hit, state, launch = unit
    hit.arm(7, launch, 16, 32)
    assert hit.armed and hit.stream == 7
    for direction in (None, FFTDirection.FORWARD):
        out = hit("x", 0x1000, None, direction, None)
        assert isinstance(out, Result) and out.ptr == 0x5000
        assert _fastcall._probe_record() == (5, (9, 8, 0x1010, 0x5020, 2**64 - 1))
    assert state["allocs"] == [((4, 8), (8, 1))] * 2 and state["fallback"] == []


def test_the_other_allowed_direction_is_served_with_its_value(unit):
    """A hit made with the other allowed direction (C2C) serves it too, launching its value; an object
    that is neither (an int, another member) goes to the fallback."""
    from nvmath import _fastcall

    hit, state, launch = unit
    both = _fastcall.FFTHit(
        lambda device: 7, 0, lambda shape, strides: Result(0x5000), (1,), (1,), FFTDirection.FORWARD, -1,
        lambda *a: "fallback", other=FFTDirection.INVERSE, other_value=1,
    )  # fmt: skip
    both.arm(7, launch, 0, 0)
    for direction, value in ((FFTDirection.INVERSE, 1), (None, 2**64 - 1), (FFTDirection.FORWARD, 2**64 - 1)):
        assert isinstance(both("x", 0x10, None, direction, None), Result)
        assert _fastcall._probe_record()[1][4] == value
    assert both("x", 0x10, None, 1, None) == "fallback"
    with pytest.raises(TypeError, match="together"):
        _fastcall.FFTHit(len, 0, len, (), (), None, 1, len, other=FFTDirection.INVERSE)


@pytest.mark.parametrize(
    "call",
    [
        ("x", 0x1000, None, None, 3),  # an explicit stream
        ("x", None, None, None, None),  # no address
        ("x", 0x1000, None, FFTDirection.INVERSE, None),  # another direction
        ("x", 0x1000, None, -1, None),  # the default direction, not as the planned object
    ],
    ids=["stream", "no address", "direction", "direction as int"],
)
def test_calls_it_does_not_serve_go_to_the_fallback(unit, call):
    """Explicit stream, no address or another direction object: the fallback, with the same arguments;
    nothing allocated or launched."""
    from nvmath import _fastcall

    hit, state, launch = unit
    hit.arm(7, launch, 0, 0)
    assert hit(*call) == "fallback"
    assert state["fallback"] == [call] and state["allocs"] == [] and _fastcall._probe_record()[0] == -1


def test_another_current_stream_or_a_disarmed_hit_goes_to_the_fallback(unit):
    """torch's current stream other than the armed one, or no arming (new, or disarmed): the fallback."""
    hit, state, launch = unit
    assert not hit.armed and hit.stream is None
    assert hit("x", 1, None, None, None) == "fallback"
    hit.arm(8, launch, 0, 0)
    assert hit("x", 1, None, None, None) == "fallback"
    hit.arm(7, launch, 0, 0)
    hit.disarm()
    assert hit("x", 1, None, None, None) == "fallback" and not hit.armed
    assert len(state["fallback"]) == 3 and state["allocs"] == []


def test_a_failed_launch_raises_the_launch_error_and_drops_the_result(unit):
    """A nonzero status raises the FastCall's error class with it (no result returned)."""
    from nvmath import _fastcall

    hit, state, launch = unit
    hit.arm(7, launch, 0, 0)
    _fastcall._probe_set_status(6)
    with pytest.raises(ValueError, match="6"):
        hit("x", 1, None, None, None)
    assert len(state["allocs"]) == 1


def test_arm_refuses_a_launch_of_another_shape(unit):
    """arm() takes a FastCall of three slots only (input, output, direction)."""
    from nvmath import _fastcall

    hit, state, launch = unit
    with pytest.raises(TypeError, match="3 slots"):
        hit.arm(7, _fastcall.FastCall(_fastcall._probe_address(2), (0, 0), (0, 1)), 0, 0)
    with pytest.raises(TypeError, match="3 slots"):
        hit.arm(7, lambda *a: 0, 0, 0)
    assert not hit.armed


def test_errors_of_the_callables_propagate(unit):
    """An exception of the stream getter or the allocator propagates; nothing is launched."""
    from nvmath import _fastcall

    hit, state, launch = unit
    hit.arm(7, launch, 0, 0)
    state["stream"] = "no stream"
    with pytest.raises(TypeError):
        hit("x", 1, None, None, None)
    assert _fastcall._probe_record()[0] == -1


def test_a_hit_disarmed_while_it_allocates_finishes_with_the_launch_it_started_with():
    """Python code run by the allocator (a finalizer, say) that disarms the hit, dropping the only
    reference to its launch: the call still makes that launch, safely; the next call is the fallback's."""
    from nvmath import _fastcall

    holder = {}

    def disarming_alloc(shape, strides):
        holder["hit"].disarm()
        return Result(0x6000)

    hit = holder["hit"] = _fastcall.FFTHit(
        lambda device: 7, 0, disarming_alloc, (1,), (1,), None, 1, lambda *a: "fallback"
    )  # fmt: skip
    _fastcall._probe_set_status(0)
    hit.arm(7, _fastcall.FastCall(_fastcall._probe_address(5), (9, 8, 0, 0, 0), (2, 3, 4)), 0, 0)
    out = hit("x", 0x10, None, None, None)
    assert out.ptr == 0x6000 and _fastcall._probe_record() == (5, (9, 8, 0x10, 0x6000, 1))
    assert not hit.armed and hit("x", 0x10, None, None, None) == "fallback"
    holder.clear()


def test_calls_do_not_leak_references():
    """Many served, fallback and failing calls keep the refcounts of every object involved flat."""
    import gc

    from nvmath import _fastcall

    result, shape, strides, ptr = Result(0x7000), (3, 4), (4, 1), 2**62 + 77
    direction, stream = object(), 2**62 + 5
    hit = _fastcall.FFTHit(
        lambda device: stream, 0, lambda s, t: result, shape, strides, direction, -1, lambda *a: None
    )  # fmt: skip
    launch = _fastcall.FastCall(_fastcall._probe_address(3), (0, 0, 0), (0, 1, 2), error=ValueError)
    objects = (result, shape, strides, ptr, direction, launch)

    def churn(rounds):
        for _ in range(rounds):
            hit.arm(stream, launch, 8, 16)
            hit("x", ptr, None, direction, None)
            hit("x", ptr, None, None, 1)
            _fastcall._probe_set_status(3)
            with pytest.raises(ValueError):
                hit("x", ptr, None, None, None)
            _fastcall._probe_set_status(0)
            hit.disarm()

    churn(100)
    gc.collect()
    refs = [sys.getrefcount(o) for o in objects]
    churn(2000)
    gc.collect()
    assert [sys.getrefcount(o) for o in objects] == refs


def test_the_hit_keeps_no_reference_cycle_alive():
    """An FFTHit whose fallback refers to it is collected (it takes part in garbage collection)."""
    import gc
    import weakref

    from nvmath import _fastcall

    class Holder:
        pass

    holder = Holder()
    holder.hit = _fastcall.FFTHit(len, 0, len, (), (), None, 1, lambda *a: holder)
    ref = weakref.ref(holder)
    del holder
    gc.collect()
    assert ref() is None


# ------------------------------------------------------------------------------------ in the planner
@pytest.fixture
def torch_gpu(one_call, monkeypatch, request):
    """torch CPU tensors posing as GPU tensors whose current stream is ``current["ptr"]`` (a fake stream
    per address), read raw by the stateless key; the plan's Python launches counted in
    ``current["python"]``. Yields (torch, current, fake cuFFT, exec log)."""
    torch = pytest.importorskip("torch")
    from nvmath._internal import stateless
    from nvmath.fft import _planner_support, _stateless, plan_cache

    fake_lib, drv, execs, keep = one_call
    request.addfinalizer(lambda: torch.set_flush_denormal(False))  # (the tool's install turns it on)
    _tool("torch_host_cost").install(monkeypatch)
    current = {"ptr": 0, "python": 0}
    handles: dict = {}
    raw = lambda device_id: current["ptr"]  # noqa: E731
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", raw, raising=False)
    monkeypatch.setattr(streams, "_TORCH_RAW", None)  # (looked up again: the getter above)
    handle_of = lambda ptr, d, p: handles.setdefault(ptr, FakeStream(ptr))  # noqa: E731
    monkeypatch.setattr(streams, "_current_handle", handle_of)
    monkeypatch.setattr(_planner_support, "torch_device", lambda device_id: torch.device("cpu"))
    python_launch = _cufft_plan.CufftPlan.launch

    def counted(self, *args):
        current["python"] += 1
        return python_launch(self, *args)

    monkeypatch.setattr(_cufft_plan.CufftPlan, "launch", counted)

    stateless.register_reader(torch.Tensor, torch_read_as_gpu)
    monkeypatch.setattr(_stateless, "_read_torch", torch_read_as_gpu)
    monkeypatch.setattr(_stateless, "_torch_tensor", None)
    plan_cache.clear()
    request.addfinalizer(plan_cache.clear)
    yield torch, current, fake_lib, execs


def _is_compiled_hit(entry):
    """Whether a hit entry is the compiled hit's ``run`` (a bound method of an FFTHit)."""
    from nvmath import _fastcall

    return type(getattr(entry, "__self__", None)) is _fastcall.FFTHit


def _twin(entry):
    """The FFTHit of a compiled hit entry."""
    assert _is_compiled_hit(entry), entry
    return entry.__self__


def test_execute_runs_in_c_once_steady_and_matches_numpy(torch_gpu, rng):
    """The first execute binds the plan through the Python hit; the next ones are served by the armed
    compiled hit (no Python launch) and give numpy's values, bit-identical to the first."""
    torch, current, fake_lib, execs = torch_gpu
    x = torch.randn(4, 16, dtype=torch.complex128)
    with FFT(x, axes=(1,)) as f:
        f.plan()
        entry = f.hit_entry()
        hit = _twin(entry)
        assert not hit.armed and f.hit_entry() is entry
        ys = [f.execute() for _ in range(4)]
        assert hit.armed and hit.stream == 0 and current["python"] == 1
    np.testing.assert_allclose(ys[0].numpy(), np.fft.fft(x.numpy(), axis=1), rtol=1e-12)
    assert all(y.numpy().tobytes() == ys[0].numpy().tobytes() for y in ys)
    assert not hit.armed  # (freed: the plan disarmed it)


def test_a_change_of_torchs_current_stream_rebinds_before_running_in_c(torch_gpu):
    """torch's current stream changing between calls: the compiled hit sees another stream and goes to
    the Python hit, which binds the plan to it (cufftSetStream) and re-arms; back and forth, every call
    runs on the stream current at its time."""
    torch, current, fake_lib, execs = torch_gpu
    x = torch.randn(2, 8, dtype=torch.complex128)
    ref = np.fft.fft(x.numpy(), axis=1)
    with FFT(x, axes=(1,)) as f:
        f.plan()
        hit = _twin(f.hit_entry())
        for ptr in (0, 0, 5, 5, 5, 0, 0):
            current["ptr"] = ptr
            fake_lib.calls.clear()
            np.testing.assert_allclose(f.execute().numpy(), ref, rtol=1e-12)
            binds = [c[2] for c in fake_lib.calls if c[0] == "set_stream"]
            assert binds in ([], [ptr]) and hit.stream == ptr
        assert current["python"] == 3  # (the first call on each stream)


def test_an_explicit_stream_disarms_until_the_current_stream_is_bound_again(torch_gpu):
    """execute(stream=...) binds the plan to that stream (Python path); the next default call does not
    run in C on the plan bound elsewhere: it rebinds to torch's current stream first."""
    torch, current, fake_lib, execs = torch_gpu
    x = torch.randn(2, 8, dtype=torch.complex128)
    ref = np.fft.fft(x.numpy(), axis=1)
    with FFT(x, axes=(1,)) as f:
        f.plan()
        hit = _twin(f.hit_entry())
        f.execute()
        f.execute()
        assert hit.stream == 0
        np.testing.assert_allclose(f.execute(stream=3).numpy(), ref, rtol=1e-12)
        assert hit.stream != 0
        fake_lib.calls.clear()
        np.testing.assert_allclose(f.execute().numpy(), ref, rtol=1e-12)
        assert [c[2] for c in fake_lib.calls if c[0] == "set_stream"] == [0] and hit.stream == 0


def test_release_workspace_goes_through_python_and_a_direction_does_not(torch_gpu):
    """execute(release_workspace=True) disarms the hit (the workspace is bound again next time); an
    explicit inverse direction of a C2C plan is served by the compiled hit with that direction."""
    torch, current, fake_lib, execs = torch_gpu
    x = torch.randn(2, 8, dtype=torch.complex128)
    with FFT(x, axes=(1,)) as f:
        f.plan()
        hit = _twin(f.hit_entry())
        f.execute()
        f.execute()
        assert hit.armed
        f.execute(release_workspace=True)
        assert not hit.armed
        f.execute()  # (binds the workspace again: Python)
        python = current["python"]
        for _ in range(2):
            y = f.execute(direction="inverse")
            np.testing.assert_allclose(y.numpy(), np.fft.ifft(x.numpy(), axis=1) * 8, rtol=1e-12)
            y = f.execute(direction=FFTDirection.FORWARD)
            np.testing.assert_allclose(y.numpy(), np.fft.fft(x.numpy(), axis=1), rtol=1e-12)
        assert current["python"] == python and hit.armed
        with pytest.raises(ValueError, match="direction"):
            f.execute(direction="sideways")


def test_a_reset_to_another_layout_gets_a_new_hit_and_disarms_the_old(torch_gpu):
    """reset_operand to another batch arrangement of the same plan: a new compiled hit (the new layout's
    result) replaces the old, which the plan disarmed; each layout's results have its shape and values."""
    torch, current, fake_lib, execs = torch_gpu
    a = torch.randn(2, 3, 8, dtype=torch.complex128)
    b = torch.randn(3, 2, 8, dtype=torch.complex128)
    with FFT(a, axes=(2,)) as f:
        f.plan()
        f.execute()
        f.execute()
        old = _twin(f.hit_entry())
        assert old.armed
        for x in (b, b, a):
            f.reset_operand(x)
            for _ in range(3):
                y = f.execute()
                assert tuple(y.shape) == tuple(x.shape)
                np.testing.assert_allclose(y.numpy(), np.fft.fft(x.numpy(), axis=2), rtol=1e-12)
        assert _twin(f.hit_entry()) is not old and not old.armed and _twin(f.hit_entry()).armed


def test_stateless_hits_run_in_c_and_a_cache_clear_disarms(torch_gpu):
    """Repeated stateless fft calls end up in the cached plan's armed compiled hit (one Python launch);
    plan_cache.clear() frees the plan and disarms its hit; the next call plans again, correctly."""
    from nvmath.fft import fft, plan_cache

    torch, current, fake_lib, execs = torch_gpu
    x = torch.randn(64, dtype=torch.complex128)
    ref = np.fft.fft(x.numpy())
    ys = [fft(x) for _ in range(5)]
    assert current["python"] == 1 and all(y.numpy().tobytes() == ys[0].numpy().tobytes() for y in ys)
    np.testing.assert_allclose(ys[0].numpy(), ref, rtol=1e-12)
    hit = _twin(plan_cache.last[2])
    assert hit.armed
    plan_cache.clear()
    assert not hit.armed
    np.testing.assert_allclose(fft(x).numpy(), ref, rtol=1e-12)
    np.testing.assert_allclose(fft(x).numpy(), ref, rtol=1e-12)
    assert current["python"] == 2


def test_stateless_fft_and_ifft_alternating_run_in_c(torch_gpu):
    """fft and ifft of one operand share its cached C2C plan; alternating them, both are served by its
    compiled hit (one Python launch in all), with numpy's values (ifft unnormalized)."""
    from nvmath.fft import fft, ifft

    torch, current, fake_lib, execs = torch_gpu
    x = torch.randn(4, 32, dtype=torch.complex128)
    for _ in range(3):
        np.testing.assert_allclose(fft(x).numpy(), np.fft.fft2(x.numpy()), rtol=1e-12)
        np.testing.assert_allclose(ifft(x).numpy(), np.fft.ifft2(x.numpy()) * 128, rtol=1e-12)
    assert current["python"] == 1


def test_compiled_and_pure_hits_give_identical_bits(torch_gpu, monkeypatch):
    """The same transforms with the compiled hit and with the Python hit only (as NVMATH_PURE_PYTHON=1
    makes them): bit-identical results, for C2C forward and a planned inverse default, and R2C."""
    torch, current, fake_lib, execs = torch_gpu
    cases = [
        (torch.randn(4, 16, dtype=torch.complex128), {}, None),
        (torch.randn(4, 16, dtype=torch.complex64), {}, "inverse"),
        (torch.randn(4, 16, dtype=torch.float64), {}, None),
    ]

    def run():
        outs = []
        for x, options, direction in cases:
            with FFT(x, axes=(1,), options=options) as f:
                f.plan(direction=direction)
                outs.append([f.execute().numpy().tobytes() for _ in range(3)])
                if x.is_complex():  # (C2C: the other direction too)
                    outs.append([f.execute(direction=d).numpy().tobytes() for d in ("inverse", "forward")])
        return outs

    compiled = run()
    monkeypatch.setattr(_cufft_plan, "compiled_hit", lambda *args: None)
    pure = run()
    assert compiled == pure and all(len(set(o)) == 1 for o in compiled[::2])  # (the repeated calls)


def test_pure_path_makes_no_compiled_hit(torch_gpu, monkeypatch):
    """With the compiled path off, the hit entry is the Python function (and runs correctly)."""
    torch, current, fake_lib, execs = torch_gpu
    monkeypatch.setattr(fastpath, "_COMPILED", None)
    x = torch.randn(2, 8, dtype=torch.complex128)
    with FFT(x, axes=(1,)) as f:
        f.plan()
        assert not _is_compiled_hit(f.hit_entry())
        for _ in range(2):
            np.testing.assert_allclose(f.execute().numpy(), np.fft.fft(x.numpy(), axis=1), rtol=1e-12)
    assert "nvmath._fastcall" in sys.modules  # (built here; only disabled)


def test_execute_and_the_stateless_hit_make_the_same_library_calls_per_call(
    torch_gpu, one_call, monkeypatch
):
    """Steady state, with the plan's context current (as torch keeps it): one ``FFT.execute()`` and one
    stateless ``fft`` hit each make exactly one raw-stream read, one result allocation, one
    ``cuCtxGetCurrent`` and one ``cufftXtExec`` -- no context switch, no ``cufftSetStream`` or
    ``cufftSetWorkArea``, no done event, no Python launch. (The H200 profile's larger "library call" share
    of ``FFT.execute`` is the profiler's attribution, not a call the planner's hit makes more.)"""
    from nvmath.fft import _planner, fft

    torch, current, fake_lib, execs = torch_gpu
    drv = one_call[1]  # (the same fixture instance as torch_gpu's: the driver's context calls)
    counts = {"raw": 0, "alloc": 0, "record_done": 0}

    def raw(device_id):
        counts["raw"] += 1
        return current["ptr"]

    def record_done(handle):
        counts["record_done"] += 1

    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", raw, raising=False)
    monkeypatch.setattr(streams, "_TORCH_RAW", None)
    monkeypatch.setattr(streams, "record_done", record_done)
    maker = _planner.torch_result_maker

    def counted_maker(traits, device_id):
        new, shape, strides = maker(traits, device_id)

        def alloc(shape, strides):
            counts["alloc"] += 1
            return new(shape, strides)

        return alloc, shape, strides

    monkeypatch.setattr(_planner, "torch_result_maker", counted_maker)
    x = torch.randn(4, 64, dtype=torch.complex64)
    seen = {}
    with FFT(x) as f:
        f.plan()
        for name, call in {"FFT.execute": f.execute, "fft.fft hit": lambda: fft(x)}.items():
            for _ in range(3):
                call()  # (binds the plan, arms the compiled hit)
            drv.calls.clear()
            drv.current = 0xC0  # the plan's context is current, as torch keeps the primary one
            fake_lib.calls.clear()
            execs.clear()
            counts.update(raw=0, alloc=0, record_done=0)
            python = current["python"]
            for _ in range(4):
                call()
            seen[name] = (
                dict(counts), [c[0] for c in drv.calls], len(execs), [c[0] for c in fake_lib.calls],
                current["python"] - python,
            )  # fmt: skip
    # (the fake cuFFT logs the emulated cufftXtExec as "exec": nothing else reaches it)
    expected = ({"raw": 4, "alloc": 4, "record_done": 0}, ["get"] * 4, 4, ["exec"] * 4, 0)
    assert seen == {"FFT.execute": expected, "fft.fft hit": expected}
