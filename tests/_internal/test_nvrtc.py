"""The shared NVRTC helper: kernels compile once per (device, source), launches size their grid (no GPU)."""

from __future__ import annotations

import contextlib
import logging
import types

import pytest

from nvmath._internal import nvrtc


@pytest.fixture
def fake_core(monkeypatch):
    """Replace cuda.core's Program / launch and the device helpers with recorders."""
    core = pytest.importorskip("cuda.core")
    calls = types.SimpleNamespace(compiled=[], launched=[])

    class Code:
        def get_kernel(self, name):
            return f"kernel:{name}"

    class Program:
        def __init__(self, source, lang, options):
            self.source, self.arch = source, options.arch

        def compile(self, target, name_expressions):
            calls.compiled.append((self.source, self.arch, target, name_expressions))
            return Code()

    monkeypatch.setattr(core, "Program", Program)
    monkeypatch.setattr(core, "launch", lambda stream, config, kernel, *args: calls.launched.append(config))
    monkeypatch.setattr(nvrtc.devices, "compute_capability", lambda device_id: (9, 0))
    monkeypatch.setattr(nvrtc.devices, "core_device", lambda device_id: None)
    monkeypatch.setattr(nvrtc.devices, "device_ctx", lambda device_id: contextlib.nullcontext())
    monkeypatch.setattr(nvrtc.streams, "stream_ctx", lambda stream: contextlib.nullcontext())
    monkeypatch.setattr(nvrtc, "_CACHE", {})
    return calls


def test_compiles_once_per_device_and_source(fake_core, caplog):
    """A second request is served from the cache; another device or source compiles again."""
    names = {"a": "kern_a<int>", 4: "kern_b"}
    with caplog.at_level(logging.DEBUG, logger="test.nvrtc"):
        first = nvrtc.compiled_kernels(
            "src", names, 0, what="test kernels", logger=logging.getLogger("test.nvrtc")
        )
    assert first == {"a": "kernel:kern_a<int>", 4: "kernel:kern_b"}
    assert nvrtc.compiled_kernels("src", names, 0) is first
    assert fake_core.compiled == [("src", "sm_90", "cubin", ("kern_a<int>", "kern_b"))]
    assert any("compiled the test kernels for device 0 (sm_90)" in r.getMessage() for r in caplog.records)
    nvrtc.compiled_kernels("src", names, 1)
    nvrtc.compiled_kernels("other", names, 0)
    assert len(fake_core.compiled) == 3


@pytest.mark.parametrize(("total", "blocks"), [(0, 1), (1, 1), (256, 1), (257, 2), (10**12, 65536)])
def test_launch_grid(fake_core, total, blocks):
    """Enough 256-thread blocks for ``total`` items, at least one and at most 65536."""
    nvrtc.launch_1d("k", total, types.SimpleNamespace(core=None))
    (config,) = fake_core.launched
    assert (config.grid, config.block) == ((blocks, 1, 1), (nvrtc.BLOCK, 1, 1))


def test_kernel_modules_use_the_shared_cache(fake_core):
    """The strided-copy and the solver kernels compile through the helper, once per device each."""
    from nvmath._internal.tensors import kernels as copy_kernels
    from nvmath.linalg._solvers import _kernels as solver_kernels

    assert set(copy_kernels._kernels(0)) == {1, 2, 4, 8, 16}
    orgqr = {f"orgqr_{t}" for t in ("float32", "float64", "complex64", "complex128")}
    pivots = {f"pivots{p}_{w}" for p in (4, 8) for w in (4, 8)}
    nonfinite = {"scan4", "scan8", "flag4", "flag8"}
    assert set(solver_kernels._kernels(0)) == {"zero4", "zero8", "zero16", "eye", *orgqr, *pivots, *nonfinite}
    copy_kernels._kernels(0)
    solver_kernels._kernels(0)
    assert [c[3][-1] for c in fake_core.compiled] == [
        "nvmath_strided_copy<nvmath_b16>",
        "nvmath_fill_flagged<unsigned long long>",
    ]
