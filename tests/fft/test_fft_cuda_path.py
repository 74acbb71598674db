"""The CUDA execution path of the FFT planner, run without a GPU against a fake cuFFT.

The fake ``cufft`` module records every call in order and executes ``cufftXtExec`` with numpy on
*host* memory, reading the plan's ``n``/``inembed``/``istride``/``idist``/``batch`` exactly as cuFFT
does, at the raw addresses it is given. Operands are :class:`FakeDevice` adapters: host buffers that
claim to live on "cuda" device 0, on the device side of the fake GPU the matmul tests use too
(``tests/fake_gpu.py``). This checks the planner's pointers and byte offsets, staging, in-place and
C2R handling, stream binding, workspace and callback sequencing end to end.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import fake_gpu
import fft_reset_cases
import nvmath.fft as nf
from nvmath._internal import caches, dtypes, streams
from nvmath._internal.tensors.base import TensorAdapter, check_strides
from nvmath._internal.tensors.host import host_empty, view_from_ptr
from nvmath._internal.tensors.numpy_adapter import NumpyAdapter
from nvmath.bindings import cufft as real_cufft
from nvmath.fft import FFT, DeviceCallable, FFTDirection, UnsupportedLayoutError, _cufft_plan, _stateless


class FakeDevice(TensorAdapter):
    """A host numpy array posing as a tensor on CUDA device 0."""

    __slots__ = ("device_id",)
    package = "fakegpu"
    device = "cuda"
    is_conjugate = False

    def __init__(self, array: np.ndarray):
        self.tensor = array
        self.data_ptr = array.__array_interface__["data"][0]
        self.shape = array.shape
        self.itemsize = array.itemsize
        self.strides = tuple(s // array.itemsize for s in array.strides)
        self.dtype = array.dtype.name
        self.size = array.size
        self.device_id = 0

    @staticmethod
    def allocate(shape, dtype, strides=None):
        shape = tuple(shape)
        a = host_empty(shape, check_strides(shape, strides), dtype)
        a[...] = np.nan
        return FakeDevice(a)

    def empty(self, shape, dtype, *, strides=None, device_id=None, stream=None):
        return FakeDevice.allocate(shape, dtype, strides)

    def to(self, device_id, stream=None):
        return NumpyAdapter(self.tensor.copy()) if device_id == "cpu" else self



class FakeCufft:
    """Records calls; executes plans with numpy on host addresses."""

    XtCallbackType = real_cufft.XtCallbackType

    def __init__(self):
        self.calls: list[tuple] = []
        self.plans: dict[int, tuple] = {}
        self.live: set[int] = set()
        self._next = 100

    def create(self):
        self._next += 1
        self.live.add(self._next)
        self.calls.append(("create", self._next))
        return self._next

    def destroy(self, h):
        assert h in self.live, f"destroy of unknown or destroyed handle {h}"
        self.live.remove(h)
        self.calls.append(("destroy", h))

    def set_auto_allocation(self, h, value):
        self.calls.append(("set_auto_allocation", h, value))

    def xt_set_jit_callback(self, h, symbol, ltoir, size, cb_type, info):
        assert h not in self.plans, "callbacks must be set before the plan is made"
        self.calls.append(("jit_callback", h, symbol, int(cb_type)))

    def xt_make_plan_many(
        self, h, rank, n, inembed, istride, idist, itype, onembed, ostride, odist, otype, batch, etype
    ):
        assert rank == len(n) == len(inembed) == len(onembed) and 1 <= rank <= 3
        assert all(isinstance(v, int) for v in (istride, idist, ostride, odist, batch))
        assert etype in (itype, otype) and dtypes.from_cuda_data_type(etype).startswith("complex")
        self.plans[h] = (
            list(n),
            list(inembed),
            istride,
            idist,
            itype,
            list(onembed),
            ostride,
            odist,
            otype,
            batch,
        )
        self.calls.append(("make_plan", h))
        return 4096

    def xt_get_size_many(self, h, *args):
        return 2048

    def set_stream(self, h, ptr):
        self.calls.append(("set_stream", h, ptr))

    def set_work_area(self, h, ptr):
        self.calls.append(("set_work_area", h, ptr))

    @staticmethod
    def _view(ptr, n, embed, stride, dist, batch, dtype):
        strides = [dist] + [stride * math.prod(embed[k + 1 :]) for k in range(len(n))]
        return view_from_ptr(ptr, tuple([batch] + n), tuple(strides), dtype)

    def xt_exec(self, h, iptr, optr, direction):
        n, inembed, istride, idist, itype, onembed, ostride, odist, otype, batch = self.plans[h]
        it, ot = dtypes.from_cuda_data_type(itype), dtypes.from_cuda_data_type(otype)
        ni, no = list(n), list(n)
        if it.startswith("complex") and not ot.startswith("complex"):
            ni[-1] = n[-1] // 2 + 1
        if ot.startswith("complex") and not it.startswith("complex"):
            no[-1] = n[-1] // 2 + 1
        x = self._view(iptr, ni, inembed, istride, idist, batch, it).copy()
        axes = tuple(range(1, len(n) + 1))
        if it.startswith("complex") and ot.startswith("complex"):
            y = np.fft.fftn(x, axes=axes) if direction < 0 else np.fft.ifftn(x, axes=axes, norm="forward")
        elif ot.startswith("complex"):
            y = np.fft.rfftn(x, axes=axes)
        else:
            x[(Ellipsis, 0)] = 1e30  # cuFFT C2R may overwrite its input: make that visible
            y = np.fft.irfftn(
                self._view(iptr, ni, inembed, istride, idist, batch, it), s=n, axes=axes, norm="forward"
            )
            self._view(iptr, ni, inembed, istride, idist, batch, it)[...] = x
        self._view(optr, no, onembed, ostride, odist, batch, ot)[...] = y
        self.calls.append(("exec", h, direction))


class FakeWorkspace:
    """Host memory standing in for the cuFFT workspace."""

    def __init__(self, **kwargs):
        self.buf = None
        self.released = 0

    def ensure(self, nbytes, stream):
        if self.buf is None or self.buf.size < nbytes:
            self.buf = np.zeros(nbytes, np.uint8)
        return self.buf.ctypes.data

    def release(self):
        self.buf = None
        self.released += 1


class FakeStream:
    def __init__(self, ptr):
        self.ptr, self.device_id, self.ctx, self.mortal, self._done = ptr, 0, None, False, None


@pytest.fixture
def fake(monkeypatch):
    """Install the shared fake GPU (``tests/fake_gpu.py``: caches cleared, host memory as device memory,
    host copies between fake and numpy arrays), then the fake cuFFT, its workspace and recording
    streams; yield the fake cuFFT. Executions reach it through the C entry point of the unchecked
    ``xt_exec`` (arguments checked as the checked binding would; the checked ``cufft.xt_exec`` fails)."""
    from nvmath.bindings._unchecked import cufft as unchecked_cufft

    fake_gpu.install(monkeypatch, packages=("fakegpu",))
    lib = FakeCufft()
    stream_objects: dict = {}
    monkeypatch.setattr(_cufft_plan, "_cufft", lambda: lib)
    fake_gpu.route_c(monkeypatch, real_cufft, unchecked_cufft, "xt_exec", lib.xt_exec)
    monkeypatch.setattr(_cufft_plan, "Workspace", FakeWorkspace)
    monkeypatch.setattr(_cufft_plan, "_check_lto_support", lambda: {"version": "12.0.0", "path": "fake"})
    monkeypatch.setattr(
        streams, "get_stream", lambda s, **k: stream_objects.setdefault(s, FakeStream(7 if s is None else s))
    )
    monkeypatch.setattr(streams, "synchronize", lambda s: lib.calls.append(("sync", s.ptr)))
    monkeypatch.setattr(streams, "stream_wait", lambda a, b: lib.calls.append(("wait", a.ptr, b.ptr)))

    original_empty = NumpyAdapter.empty

    def numpy_empty(self, shape, dtype, *, strides=None, device_id=None, stream=None):
        if isinstance(device_id, int):
            return FakeDevice.allocate(shape, dtype, strides)
        return original_empty(self, shape, dtype, strides=strides, device_id=device_id, stream=stream)

    monkeypatch.setattr(NumpyAdapter, "empty", numpy_empty)
    yield lib
    caches.clear_all()
    assert not lib.live or all(h in lib.live for h in lib.live)


def dev(rng, shape, dtype="complex128", view=None):
    """A FakeDevice operand with random data, optionally a strided view of a larger buffer."""
    base = rng.uniform(-1, 1, shape) + (1j * rng.uniform(-1, 1, shape) if dtype.startswith("complex") else 0)
    a = base.astype(dtype)
    return FakeDevice(a if view is None else view(a))


def kinds(lib, name):
    return [c for c in lib.calls if c[0] == name]


def test_c2c_runs_through_cufft_calls_in_order(fake, rng):
    """create -> auto-allocation off -> make plan; execute binds stream and workspace, then execs."""
    x = dev(rng, (4, 8))
    with FFT(x, execution="cuda") as f:
        f.plan()
        y = f.execute()
    np.testing.assert_allclose(y, np.fft.fftn(x.tensor))
    names = [c[0] for c in fake.calls]
    assert names[:3] == ["create", "set_auto_allocation", "make_plan"]
    assert names.index("set_stream") < names.index("exec") and names.index("set_work_area") < names.index(
        "exec"
    )
    assert names[-1] == "destroy" and ("sync", 7) not in fake.calls, "'auto' blocking: no sync on GPU"


def test_execute_calls_the_unchecked_exec(fake, rng):
    """Both directions (enum, string and int forms) reach cuFFT through the unchecked ``xt_exec``: the
    fake's C entry point gets plain ints in range (checked by ``tests/fake_gpu.py``), the checked
    ``cufft.xt_exec`` is never called, and the results match numpy."""
    x = dev(rng, (4, 8))
    with FFT(x, execution="cuda") as f:
        f.plan()
        for direction in (FFTDirection.FORWARD, "inverse", -1, 1):
            y = f.execute(direction=direction)
            forward = direction in (FFTDirection.FORWARD, -1)
            ref = np.fft.fftn(x.tensor) if forward else np.fft.ifftn(x.tensor, norm="forward")
            np.testing.assert_allclose(y, ref)
    assert [c[2] for c in kinds(fake, "exec")] == [-1, 1, -1, 1]
    with pytest.raises(AssertionError, match="checked binding cufft.xt_exec"):
        real_cufft.xt_exec(1, 2, 3, -1)


@pytest.mark.parametrize(
    "shape, axes, view",
    [
        ((3, 5, 7), (1,), None),
        ((6, 4), (0,), None),
        ((2, 3, 4, 3, 2), None, None),
        ((8, 12), (0, 1), lambda a: a[:, ::3]),
        ((4, 6, 5), (0, 2), lambda a: a.transpose(2, 0, 1)),
    ],
)
def test_c2c_layouts(fake, rng, shape, axes, view):
    """Batched, looped, composed (>3 axes), fallback-copied and transposed layouts give numpy's values."""
    x = dev(rng, shape, view=view)
    opts = {"layout_fallback": "copy"}
    with FFT(x, axes=axes, execution="cuda", options=opts) as f:
        f.plan()
        np.testing.assert_allclose(
            f.execute(FFTDirection.INVERSE), np.fft.ifftn(x.tensor, axes=axes, norm="forward")
        )
        y = f.execute()
        np.testing.assert_allclose(y, np.fft.fftn(x.tensor, axes=axes), rtol=1e-10, atol=1e-10)
        assert f.get_output_layout()[1] == tuple(s // 16 for s in y.strides)


def test_unsupported_layout_raises(fake, rng):
    """Without the fallback, a layout cuFFT cannot describe raises UnsupportedLayoutError."""
    x = dev(rng, (8, 12), view=lambda a: a[:, ::5])
    with pytest.raises(UnsupportedLayoutError):
        FFT(x)


def test_r2c_and_repeated_c2r(fake, rng):
    """R2C matches numpy; C2R can run repeatedly and never changes its operand."""
    r = dev(rng, (6, 10), "float64")
    with FFT(r) as f:
        f.plan()
        y = f.execute()
    np.testing.assert_allclose(y, np.fft.rfftn(r.tensor), rtol=1e-12)
    c = FakeDevice(np.ascontiguousarray(y))
    keep = c.tensor.copy()
    with FFT(c, options={"fft_type": "C2R"}) as f:
        f.plan()
        outs = [f.execute() for _ in range(3)]
    np.testing.assert_array_equal(c.tensor, keep)
    for out in outs:
        np.testing.assert_allclose(out, 60 * r.tensor, rtol=1e-10, atol=1e-10)


def test_repeated_composed_c2r(fake, rng):
    """A 4-axis C2R (in-place C2C on the internal copy, then C2R) repeats correctly."""
    s = rng.uniform(-1, 1, (3, 4, 5, 6))
    c = FakeDevice(np.fft.rfftn(s))
    keep = c.tensor.copy()
    with FFT(c, options={"fft_type": "C2R"}) as f:
        f.plan()
        assert [st.kind for st in f.traits.steps] == ["C2C", "C2R"]
        for _ in range(3):
            np.testing.assert_allclose(f.execute(), s * s.size, rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(c.tensor, keep)


def test_inplace(fake, rng):
    """In place, cuFFT reads and writes the operand and the operand is returned."""
    x = dev(rng, (4, 6), view=lambda a: a.T)
    ref = np.fft.fftn(x.tensor)
    with FFT(x, options={"inplace": True}) as f:
        f.plan()
        out = f.execute()
    assert out is x.tensor
    np.testing.assert_allclose(x.tensor, ref)


def test_host_operand_on_cuda(fake, rng):
    """numpy operands with execution='cuda' are staged, transformed and copied back (blocking)."""
    x = rng.uniform(-1, 1, (5, 6)) + 1j
    y = nf.fft(x, execution="cuda")
    assert isinstance(y, np.ndarray)
    np.testing.assert_allclose(y, np.fft.fftn(x))
    z = x.copy()
    assert nf.fft(z, execution="cuda", options={"inplace": True}) is z
    np.testing.assert_allclose(z, np.fft.fftn(x))
    r = nf.irfft(np.fft.rfftn(x.real), execution="cuda")
    np.testing.assert_allclose(r, 30 * x.real, atol=1e-10)


def test_stream_rebinding_and_workspace_release(fake, rng):
    """The plan is re-bound only when the stream changes (after a wait); released workspaces come back."""
    x = dev(rng, (16,))
    with FFT(x) as f:
        f.plan()
        f.execute(stream=11)
        f.execute(stream=11)
        f.execute(stream=12, release_workspace=True)
        f.execute(stream=12)
        assert [c[2] for c in kinds(fake, "set_stream")] == [11, 12]
        assert ("wait", 12, 11) in fake.calls
        assert len(kinds(fake, "set_work_area")) == 2
        assert f._plan.workspace.released == 1


def test_blocking_true_synchronizes(fake, rng):
    """blocking=True waits for the stream after executing."""
    x = dev(rng, (8,))
    nf.fft(x, options={"blocking": True}, stream=5)
    assert ("sync", 5) in fake.calls


def test_callbacks_set_before_planning(fake, rng):
    """Prolog goes on the first plan and epilog on the last, before cufftXtMakePlanMany."""
    x = dev(rng, (8, 8), "complex64")
    pro = DeviceCallable(b"\x01", data=64)
    epi = DeviceCallable(b"\x02", name="cufftJITCallbackStoreComplex")  # a default name: passed as NULL
    with FFT(x) as f:
        f.plan(prolog=pro, epilog=epi)
    cbs = kinds(fake, "jit_callback")
    assert [(c[2], c[3]) for c in cbs] == [
        (None, int(real_cufft.XtCallbackType.LD_COMPLEX)),  # NULL: cuFFT's default (mangled) name
        (None, int(real_cufft.XtCallbackType.ST_COMPLEX)),
    ]


def test_callbacks_refused_for_multi_launch(fake, rng):
    """Callbacks on a transform that takes several launches raise before any cuFFT call."""
    x = dev(rng, (3, 5, 7))
    f = FFT(x, axes=(1,))
    with pytest.raises(ValueError, match="one launch"):
        f.plan(prolog=DeviceCallable(b"\x01"))
    assert not kinds(fake, "create")


def test_reset_release_and_stateless_cache(fake, rng):
    """Operands swap in and out of a GPU plan; the stateless cache reuses plans (one make_plan)."""
    a, b = dev(rng, (4, 4)), dev(rng, (4, 4))
    with FFT(a) as f:
        f.plan()
        f.reset_operand(b)
        np.testing.assert_allclose(f.execute(), np.fft.fftn(b.tensor))
    before = len(kinds(fake, "make_plan"))
    for _ in range(3):
        np.testing.assert_allclose(nf.fft(a), np.fft.fftn(a.tensor))
    assert len(kinds(fake, "make_plan")) == before + 1


def test_failed_plan_destroys_handles(fake, rng, monkeypatch):
    """A plan that fails half way destroys the handles it created."""
    x = dev(rng, (2, 3, 4, 3, 2))
    monkeypatch.setattr(fake, "xt_make_plan_many", lambda h, *a: (_ for _ in ()).throw(RuntimeError("boom")))
    f = FFT(x)
    with pytest.raises(RuntimeError, match="boom"):
        f.plan()
    assert not fake.live
    assert f._lifecycle.state.name == "CREATED"


def test_estimate_workspace_size(fake, rng):
    """estimate_workspace_size queries each step (default) or plans them (refined)."""
    key = FFT.create_key_from_metadata((4, 4), "complex64", "cuda")
    assert nf.estimate_workspace_size(key) == 2048
    assert nf.estimate_workspace_size(key, technique="refined") == 4096
    assert not fake.live


def test_estimate_workspace_size_uses_the_given_handle(fake, rng):
    """With handle=h both techniques run on h (refined makes the plan on it, as in nvmath-python)
    and leave it alive; no other handle is created."""
    key = FFT.create_key_from_metadata((4, 4), "complex64", "cuda")
    h = fake.create()
    created = len(kinds(fake, "create"))
    assert nf.estimate_workspace_size(key, handle=h) == 2048
    assert nf.estimate_workspace_size(key, technique="refined", handle=h) == 4096
    assert len(kinds(fake, "create")) == created and h in fake.live and h in fake.plans
    fake.destroy(h)


# ---------------------------------------------------------------- low-overhead paths
def test_stateless_hits_reuse_one_plan_and_keep_no_operand(fake, rng):
    """Repeated stateless calls hit (no new plan, no rewrap needed) and give numpy's values."""
    a = dev(rng, (4, 6))
    nf.fft(a)
    before = nf.plan_cache.stats
    for _ in range(3):
        b = dev(rng, (4, 6))
        np.testing.assert_allclose(nf.fft(b), np.fft.fftn(b.tensor))
        np.testing.assert_allclose(nf.ifft(b), np.fft.ifftn(b.tensor, norm="forward"))
    after = nf.plan_cache.stats
    assert (after.hits - before.hits, after.misses - before.misses, after.size) == (6, 0, 1)
    assert len(kinds(fake, "make_plan")) == 1
    (key,) = list(nf.plan_cache.keys())
    assert nf.plan_cache.get(key).planner._operand is None


def test_stateless_inplace_and_axes(fake, rng):
    """In-place hits return the operand; explicit int-tuple axes take the same cached plan."""
    x = dev(rng, (4, 6))
    ref = np.fft.fftn(x.tensor, axes=(1,))
    assert nf.fft(x, axes=(1,), options={"inplace": True}) is x.tensor
    np.testing.assert_allclose(x.tensor, ref)
    y = dev(rng, (4, 6))
    nf.fft(y, axes=(1,))
    size = nf.plan_cache.stats.size
    np.testing.assert_allclose(nf.fft(y, axes=(1,)), np.fft.fft(y.tensor, axis=1))
    np.testing.assert_allclose(nf.fft(y, axes=[1]), np.fft.fft(y.tensor, axis=1))
    assert nf.plan_cache.stats.size == size


def test_stateless_hit_after_eviction_replans(fake, rng, monkeypatch):
    """A plan freed between the lookup and its lock is not used: the call plans again."""
    x = dev(rng, (8,))
    nf.fft(x)
    (key,) = list(nf.plan_cache.keys())
    stale = nf.plan_cache.get(key)
    nf.plan_cache.clear()  # frees the planner
    monkeypatch.setattr(nf.plan_cache, "get", lambda k, default=None, count_miss=True: stale)
    np.testing.assert_allclose(nf.fft(x), np.fft.fft(x.tensor))
    assert len(kinds(fake, "make_plan")) == 2


def test_stream_cache_follows_the_stream_argument(fake, rng):
    """Explicit streams are normalized once per object; switching back rebinds the plan."""
    x = dev(rng, (16,))
    with FFT(x) as f:
        f.plan()
        for s in (21, 21, None, 22, 21):
            np.testing.assert_allclose(f.execute(stream=s), np.fft.fft(x.tensor))
    assert [c[2] for c in kinds(fake, "set_stream")] == [21, 7, 22, 21]


def test_stateless_list_axes_take_the_raw_key_path(fake, rng):
    """axes given as a list (nvmath-python's examples do) key the fast path like the int tuple."""
    y = dev(rng, (4, 6))
    nf.fft(y, axes=[1])
    assert (None, (1,), 2, y.device_id, y.dtype, "complex") in _stateless._TAILS
    before = nf.plan_cache.stats
    np.testing.assert_allclose(nf.fft(y, axes=[1]), np.fft.fft(y.tensor, axis=1))
    np.testing.assert_allclose(nf.fft(y, axes=(1,)), np.fft.fft(y.tensor, axis=1))
    after = nf.plan_cache.stats
    assert (after.hits - before.hits, after.misses - before.misses) == (2, 0)


def test_stateless_key_memo_hands_out_the_plan_cache_key(fake, rng):
    """A repeated call with default arguments finds its whole key in ``_KEYS``: the very object the plan
    cache holds (found by identity), hits counted as before; ifft shares fft's plan; another layout,
    dtype, axes or transform type gets a key and a plan of its own; every result is numpy's."""
    y = dev(rng, (4, 6))
    nf.fft(y)
    (key,) = list(nf.plan_cache.keys())
    assert type(key) is _stateless._Key and list(_stateless._KEYS.values()) == [key]
    before = nf.plan_cache.stats
    np.testing.assert_allclose(nf.fft(y), np.fft.fftn(y.tensor))
    np.testing.assert_allclose(nf.ifft(y), np.fft.ifftn(y.tensor, norm="forward"))
    after = nf.plan_cache.stats
    assert (after.hits - before.hits, after.misses - before.misses, after.size) == (2, 0, 1)
    assert list(nf.plan_cache.keys())[0] is key and len(_stateless._KEYS) == 1
    others = [
        (dev(rng, (4, 6), view=lambda a: a.T.copy().T), None, lambda a: np.fft.fftn(a)),  # column-major
        (dev(rng, (4, 6), "complex64"), None, lambda a: np.fft.fftn(a)),
        (y, (1,), lambda a: np.fft.fft(a, axis=1)),
    ]
    for x, axes, ref in others:
        for _ in range(2):
            np.testing.assert_allclose(nf.fft(x, axes=axes), ref(x.tensor), rtol=1e-5, atol=1e-5)
    r = dev(rng, (4, 6), "float64")
    np.testing.assert_allclose(nf.rfft(r), np.fft.rfftn(r.tensor))
    assert len(set(nf.plan_cache.keys())) == len(_stateless._KEYS) == 5
    assert len(kinds(fake, "make_plan")) == 5


def test_stateless_key_memo_keeps_no_plan(fake, rng):
    """``_KEYS`` holds keys, not plans: a plan evicted from the cache is planned again under the same
    key (a counted miss, numpy's result); ``caches.clear_all()`` empties the memo too."""
    x = dev(rng, (8,))
    nf.fft(x)
    (key,) = list(nf.plan_cache.keys())
    nf.plan_cache.clear()
    before = nf.plan_cache.stats
    np.testing.assert_allclose(nf.fft(x), np.fft.fft(x.tensor))
    assert nf.plan_cache.stats.misses - before.misses == 1 and len(kinds(fake, "make_plan")) == 2
    assert list(nf.plan_cache.keys())[0] is key
    caches.clear_all()
    assert len(_stateless._KEYS) == 0 and len(nf.plan_cache) == 0


def test_key_hashes_and_compares_as_its_tuple():
    """A ``_Key`` equals, and hashes as, the plain tuple of its items (either finds the other's entry)."""
    items = ("fakegpu", 0, (4, 6), (6, 1), "complex128", False, "tail")
    key = _stateless._Key(items)
    assert key == items and items == key and hash(key) == hash(items) and not (key != items)
    assert {items: 1}[key] == 1 and {key: 2}[items] == 2
    assert key != _stateless._Key((*items[:-1], "other"))


@pytest.mark.parametrize(
    ("axes", "key"),
    [(None, None), ((0, 1), (0, 1)), ([1, 0], (1, 0)), ([], ()), ((0.0,), "missing"), ("01", "missing")],
)
def test_axes_key(axes, key):
    """Only None and int tuples/lists key the fast path; anything else takes the general path."""
    got = _stateless._axes_key(axes)
    assert (got is _stateless._MISSING) if key == "missing" else (got == key and type(got) is type(key))


# ----------------------------------------------------------------------------- overwrite_operand (C2R)
def test_c2r_overwrite_operand_runs_once_per_operand(fake, rng):
    """With overwrite_operand, cuFFT reads the operand directly (no copy): the result is right, the operand
    is overwritten, a second execute() refuses until reset_operand() supplies fresh data."""
    from nvmath._errors import InvalidFFTState

    s = rng.uniform(-1, 1, (6, 10))
    c = FakeDevice(np.fft.rfftn(s))
    keep = c.tensor.copy()
    with FFT(c, options={"fft_type": "C2R", "overwrite_operand": True}) as f:
        assert f.traits.staging_strides is None
        f.plan()
        np.testing.assert_allclose(f.execute(), 60 * s, rtol=1e-10, atol=1e-10)
        assert not np.array_equal(c.tensor, keep)  # cuFFT used it as scratch
        with pytest.raises(InvalidFFTState, match="overwrote the operand.*reset_operand"):
            f.execute()
        fresh = FakeDevice(keep.copy())
        f.reset_operand(fresh)
        np.testing.assert_allclose(f.execute(), 60 * s, rtol=1e-10, atol=1e-10)


def test_c2r_overwrite_operand_keeps_the_copy_where_needed(fake, rng):
    """A C2R needing several launches keeps its internal copy (and stays repeatable)."""
    s = rng.uniform(-1, 1, (3, 4, 5, 6))
    c = FakeDevice(np.fft.rfftn(s))
    with FFT(c, options={"fft_type": "C2R", "overwrite_operand": True}) as f:
        assert f.traits.staging_strides is not None
        f.plan()
        for _ in range(2):
            np.testing.assert_allclose(f.execute(), s * s.size, rtol=1e-10, atol=1e-10)


def test_stateless_irfft_with_overwrite_operand(fake, rng):
    """Stateless calls with overwrite_operand give the right result for each fresh operand."""
    for _ in range(2):
        s = rng.uniform(-1, 1, (4, 8))
        c = FakeDevice(np.fft.rfftn(s))
        out = nf.irfft(c, options={"overwrite_operand": True})
        np.testing.assert_allclose(out, s * s.size, rtol=1e-10, atol=1e-10)


def _swap_fft(operand, case, execution="cuda"):
    """A planned FFT of ``operand`` as ``case`` describes it (for :func:`fft_reset_cases.check_swaps`)."""
    f = FFT(operand, axes=case.axes, options={"fft_type": case.kind, **case.options}, execution=execution)
    f.plan()
    return f


@pytest.mark.parametrize("case", fft_reset_cases.CASES, ids=lambda c: c.name)
def test_cpu_accepts_the_batch_arrangements_the_gpu_accepts(fake, rng, case):
    """reset_operand (checked and unchecked) accepts and refuses the same candidates with CPU execution
    of host operands as with (fake) GPU execution of device operands, with numpy's results on both."""
    gpu = fft_reset_cases.check_swaps(case, rng, _swap_fft, FakeDevice, np.asarray)
    on_cpu = lambda op, c: _swap_fft(op, c, "cpu")  # noqa: E731
    cpu = fft_reset_cases.check_swaps(case, rng, on_cpu, np.asarray, np.asarray)
    assert cpu == gpu


@pytest.mark.parametrize("space", ["device", "host-operand"])
@pytest.mark.parametrize("case", fft_reset_cases.CASES, ids=lambda c: c.name)
def test_reset_operand_unchecked_rederives_or_refuses_like_the_checked_path(fake, rng, case, space):
    """Every batch arrangement reset_operand() accepts (other batch extents, transposed batch strides,
    a merged batch) runs through reset_operand_unchecked() too, with the numpy result's shape and
    values; what reset_operand() refuses (another distance, rank or size) the unchecked path refuses
    with ValueError as well -- never a result computed with the planned layout of another arrangement.
    Device operands and host operands executed on the (fake) GPU (staged) alike."""

    def make_fft(operand, case):
        options = {"fft_type": case.kind, **case.options}
        f = FFT(operand, axes=case.axes, options=options, execution="cuda")
        f.plan()
        return f

    to_package = FakeDevice if space == "device" else (lambda a: a)
    outcomes = fft_reset_cases.check_swaps(case, rng, make_fft, to_package, np.asarray)
    assert "accepted" in outcomes[::2]  # at least one other arrangement runs on the same plan
    if case.name == "c2c-1d" and space == "device":  # (staged host operands take any batch distance)
        assert outcomes[::2] == ["accepted"] * 4 + ["refused"] * 3
