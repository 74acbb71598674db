"""``Matmul.execute()``'s compiled hit (``nvmath.linalg.advanced._execute_hit``, the C
``MatmulExecuteHit``) on the CPU fake GPU: torch CPU tensors posing as package-"torch" CUDA tensors
(``tools/torch_host_cost.py``) and the emulated ``cublasLtMatmul`` behind a real C function, so the
launch's caller is compiled. After one call on the Python path the hit serves ``execute()`` with one
``cublasLtMatmul`` per call and the Python path's exact values; a reset is read, a stream change, an
algorithm selection, grad, another thread's call, ``free()`` and a failing status behave as on the Python
path; the pure path makes no hit."""

from __future__ import annotations

import ctypes
import importlib.util
import pathlib

import numpy as np
import pytest
from fastcall_probes import FastCall, needs_extension

torch = pytest.importorskip("torch")

import nvmath.linalg.advanced as adv  # noqa: E402
from nvmath._errors import InvalidMatmulState  # noqa: E402
from nvmath._internal import caches, fastpath, streams  # noqa: E402
from nvmath.bindings import cublasLt  # noqa: E402

pytestmark = needs_extension

ROOT = pathlib.Path(__file__).resolve().parents[3]
_STATUS = [0]  # what the emulated cublasLtMatmul returns (0: it computes)
_STREAM = [0]  # torch's raw current stream, as the fake reads it


@pytest.fixture
def gpu(monkeypatch, request):
    """The fake GPU with the compiled path on; yields the list of cublasLtMatmul calls (their arguments)."""
    request.addfinalizer(lambda: torch.set_flush_denormal(False))
    monkeypatch.setattr(fastpath, "_COMPILED", FastCall)
    spec = importlib.util.spec_from_file_location("torch_host_cost", ROOT / "tools" / "torch_host_cost.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    tool.install(monkeypatch)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device_id: _STREAM[0], raising=False)
    monkeypatch.setattr(streams, "_TORCH_RAW", None)
    emulation, calls = cublasLt._p_cublasLtMatmul, []

    def record(*args: int) -> int:
        calls.append(args)
        return _STATUS[0] or emulation(*args)

    cfunc = ctypes.CFUNCTYPE(ctypes.c_int, *([ctypes.c_uint64] * 16))(record)
    monkeypatch.setattr(cublasLt, "_p_cublasLtMatmul", cfunc)
    _STATUS[0], _STREAM[0] = 0, 0
    adv.plan_cache.clear()
    yield calls
    _STATUS[0], _STREAM[0] = 0, 0
    caches.clear_all()


def _aligned(*shape: int, seed: int = 0):
    n = int(np.prod(shape))
    flat = torch.randn(n + 128, dtype=torch.float32, generator=torch.Generator().manual_seed(seed))
    skip = (-flat.data_ptr() % 256) // flat.element_size()
    return flat[skip : skip + n].view(*shape)


def _ref(a, b, c=None, beta=0.0):
    out = a.double() @ b.double()
    return out if c is None else out + beta * c.double()


def _planned(*operands, **kwargs):
    mm = adv.Matmul(*operands, **kwargs)
    mm.plan()
    return mm


def test_hit_serves_execute_with_one_launch_and_the_python_paths_values(gpu):
    """The first execute() runs on the Python path and makes the hit; the next ones are served by it
    (its count grows), one cublasLtMatmul each, each result a new tensor equal bit for bit to the Python
    path's."""
    a, b = _aligned(16, 8, seed=1), _aligned(8, 12, seed=2)
    with _planned(a, b) as mm:
        first = mm.execute()
        hit = mm._hits.hit
        assert hit is not None and hit.armed and hit.hits == 0
        before = len(gpu)
        outs = [mm.execute() for _ in range(3)]
        assert hit.hits == 3 and len(gpu) == before + 3
    fastpath._COMPILED = None  # (restored by the fixture's monkeypatch) the pure path's launch
    with _planned(a, b) as pure:
        reference = pure.execute()
        assert pure._hits is None and pure._hit_run is None
    assert len({o.data_ptr() for o in outs}) == 3
    for out in (first, *outs):
        assert torch.equal(out, reference)
    torch.testing.assert_close(first.double(), _ref(a, b), rtol=1e-5, atol=1e-6)


def test_hit_reads_the_operands_of_a_reset_and_the_addend(gpu):
    """reset_operands() needs no new hit: the next call reads the new addresses (also c's)."""
    a, b, c = _aligned(8, 5, seed=3), _aligned(5, 6, seed=4), _aligned(8, 6, seed=5)
    with _planned(a, b, c, beta=0.5) as mm:
        mm.execute()
        hit = mm._hits.hit
        a2, b2, c2 = _aligned(8, 5, seed=6), _aligned(5, 6, seed=7), _aligned(8, 6, seed=8)
        mm.reset_operands(a=a2, b=b2, c=c2)
        out = mm.execute()
        assert mm._hits.hit is hit and hit.hits == 1
    torch.testing.assert_close(out.double(), _ref(a2, b2, c2, 0.5), rtol=1e-5, atol=1e-6)


def test_another_current_stream_is_a_miss(gpu):
    """A hit made for one raw stream serves nothing once torch's current stream is another one (the
    Python path then resolves it); explicit streams never reach the hit."""
    a, b = _aligned(6, 4, seed=9), _aligned(4, 3, seed=10)
    with _planned(a, b) as mm:
        mm.execute()
        hit, before = mm._hits.hit, len(gpu)
        _STREAM[0] = 0x1234
        assert hit() is None and len(gpu) == before
        _STREAM[0] = 0
        out = mm.execute(stream=0)
        assert hit.hits == 0
    torch.testing.assert_close(out.double(), _ref(a, b), rtol=1e-5, atol=1e-6)


def test_selecting_another_algorithm_makes_a_new_hit_that_launches_it(gpu):
    """After the launch selects another algorithm the old hit misses; the Python path runs it and makes
    a hit for it, whose launches pass the new algorithm."""
    a, b = _aligned(32, 16, seed=11), _aligned(16, 24, seed=12)
    with _planned(a, b) as mm:
        if len(mm.algorithms) < 2:
            pytest.skip("the emulated heuristic offers one algorithm here")
        mm.execute()
        old = mm._hits.hit
        mm.launcher.select(mm.algorithms[1])
        assert old() is None
        mm.execute()
        new = mm._hits.hit
        assert new is not old
        out = mm.execute()
        assert new.hits == 1 and gpu[-1][12] == mm.algorithms[1].algo_ptr
    torch.testing.assert_close(out.double(), _ref(a, b), rtol=1e-5, atol=1e-6)


def test_an_operand_requiring_grad_is_still_routed(gpu, monkeypatch):
    """With grad mode on, an operand that comes to require grad sends execute() to nvmath.torch, not to
    the hit."""
    from nvmath._internal import torch_bridge

    routed = []
    route = lambda mm, **kw: routed.append(kw) or "routed"  # noqa: E731
    monkeypatch.setitem(torch_bridge._ROUTES, "advanced.execute", route)
    a, b = _aligned(4, 3, seed=13), _aligned(3, 2, seed=14)
    with _planned(a, b) as mm:
        mm.execute()
        a.requires_grad_(True)
        assert mm.execute() == "routed"
        with torch.no_grad():
            out = mm.execute()
        assert mm._hits.hit.hits == 1
    assert len(routed) == 1
    torch.testing.assert_close(out.double(), _ref(a.detach(), b), rtol=1e-5, atol=1e-6)


def test_state_and_thread_checks_run_before_the_hit(gpu):
    """execute() keeps its guard: another thread inside a method, release_operands() and free() raise as
    before; free() disarms the hit."""
    a, b = _aligned(4, 3, seed=15), _aligned(3, 2, seed=16)
    mm = _planned(a, b)
    mm.execute()
    hit = mm._hits.hit
    mm._lifecycle.owner = -1  # as if another thread were inside a method
    with pytest.raises(InvalidMatmulState, match="another thread"):
        mm.execute()
    mm._lifecycle.owner = None
    mm.release_operands()
    with pytest.raises(InvalidMatmulState, match="release_operands"):
        mm.execute()
    mm.reset_operands(a=a, b=b)
    mm.free()
    assert not hit.armed and hit() is None
    with pytest.raises(InvalidMatmulState, match="free"):
        mm.execute()


def test_a_failing_launch_raises_the_libraries_error(gpu):
    """A nonzero cublasLtMatmul status from the hit raises cuBLASLtError, as the Python path does."""
    a, b = _aligned(4, 3, seed=17), _aligned(3, 2, seed=18)
    with _planned(a, b) as mm:
        mm.execute()
        _STATUS[0] = 13  # CUBLAS_STATUS_EXECUTION_FAILED
        with pytest.raises(cublasLt.cuBLASLtError):
            mm.execute()
        _STATUS[0] = 0
        torch.testing.assert_close(mm.execute().double(), _ref(a, b), rtol=1e-5, atol=1e-6)


def test_the_pure_path_makes_no_hit(gpu, monkeypatch):
    """With the compiled path off there is no hit: execute() runs the Python launch, same values."""
    monkeypatch.setattr(fastpath, "_COMPILED", None)
    a, b = _aligned(5, 4, seed=19), _aligned(4, 3, seed=20)
    with _planned(a, b) as mm:
        outs = [mm.execute() for _ in range(2)]
        assert mm._hits is None and mm._hit_run is None
    for out in outs:
        torch.testing.assert_close(out.double(), _ref(a, b), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------ MatmulExecuteHit alone
class _Obj:
    """An object with the given attributes."""

    def __init__(self, **attrs):
        self.__dict__.update(attrs)


def _unit_hit(**changes):
    """A MatmulExecuteHit over the extension's 16-argument probe (as cublasLtMatmul), with plain objects
    as slots, launch, workspace and handle pool; returns (hit, parts)."""
    from nvmath import _fastcall

    call = _fastcall.FastCall(
        _fastcall._probe_address(16), [0] * 16, (0, 3, 5, 8, 10, 12, 13, 14, 15), error=cublasLt.cuBLASLtError
    )  # fmt: skip
    handle, algo = object(), (0xA1, 64)
    space = _Obj(size=128, ptr=0xF000)
    parts = {
        "raw": lambda device: 7, "device_id": 0, "get_device": lambda: 0, "grad_enabled": None,
        "alloc": lambda shape, strides: _Obj(data_ptr=lambda: 0xD000), "shape": (2, 2), "strides": (2, 1),
        "slots": (_Obj(ptr=0xA000), _Obj(ptr=0xB000)), "grad_slots": (),
        "launch": _Obj(closed=False, algo=algo), "algo": algo, "call": call, "swap": False, "c_is_d": True, "bound": _Obj(stream=handle),
        "handle": handle, "space": space, "stream": 7, "lt_handle": 0,
        "handles_local": _Obj(handles={0: 0x11}), "handles_module": _Obj(get_handle=None),
        "pool_get": None, "after": None,
    }  # fmt: skip
    parts["handles_module"].get_handle = parts["pool_get"] = object()
    parts.update(changes)
    _fastcall._probe_set_status(0)
    return _fastcall.MatmulExecuteHit(**parts), parts


def test_unit_hit_launches_with_the_current_values_and_records_after():
    """One call: cublasLtMatmul(handle, desc..., a, b, c = d, d, algo, workspace, size, stream) with the
    slots' addresses read now, the bound workspace's address, then the done-event callable."""
    from nvmath import _fastcall

    done = []
    hit, parts = _unit_hit(after=lambda: done.append(1))
    out = hit.run()
    args = _fastcall._probe_record()[1]
    assert out.data_ptr() == 0xD000 and done == [1] and hit.hits == 1
    assert [args[i] for i in (0, 3, 5, 8, 10, 12, 13, 14, 15)] == [
        0x11, 0xA000, 0xB000, 0xD000, 0xD000, 0xA1, 0xF000, 64, 7
    ]  # fmt: skip
    parts["slots"][0].ptr = 0xA800  # (a reset: read on the next call)
    hit()
    assert _fastcall._probe_record()[1][3] == 0xA800


@pytest.mark.parametrize(
    "change",
    ["closed", "algo", "workspace stream", "workspace size", "device", "stream", "no handle yet", "disarmed"],
)
def test_unit_hit_misses_whenever_the_python_path_must_run(change):
    """A closed launch, another selected algorithm, a workspace bound elsewhere or too small, another
    current device or stream, no cuBLASLt handle on this thread yet, or a disarmed hit: None, no launch."""
    from nvmath import _fastcall

    hit, parts = _unit_hit()
    if change == "closed":
        parts["launch"].closed = True
    elif change == "algo":
        parts["launch"].algo = (0xA2, 64)
    elif change == "workspace stream":
        parts["bound"].stream = object()
    elif change == "workspace size":
        parts["space"].size = 32
    elif change == "device":
        hit, _ = _unit_hit(get_device=lambda: 1)
    elif change == "stream":
        hit, _ = _unit_hit(raw=lambda device: 8)
    elif change == "no handle yet":
        hit, _ = _unit_hit(handles_local=_Obj())
    else:
        hit.disarm()
    assert hit() is None and hit.hits == 0 and _fastcall._probe_record() == (-1, ())


def test_unit_hit_raises_a_failed_status_and_takes_no_arguments():
    """A nonzero status raises the caller's error class with it; arguments are refused."""
    from nvmath import _fastcall

    hit, _ = _unit_hit()
    _fastcall._probe_set_status(13)
    try:
        with pytest.raises(cublasLt.cuBLASLtError):
            hit()
    finally:
        _fastcall._probe_set_status(0)
    with pytest.raises(TypeError, match="no arguments"):
        hit(1)
