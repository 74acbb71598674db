"""tools/grouped_fp8_host_cost.py on the fake GPU (CPU): an FP8 GroupedLinear training step (forward and
backward, the weight changed every step as after an optimizer step) under both recipes makes the
kernel launches and the few torch operations it should -- one zero-filled scratch per pass for the
small float32 tensors (no zeros per amax or partial sums, no stack of scales, no separate output
tensors of the scaling-state updates): a guard against host work creeping back, counted, not timed."""

from __future__ import annotations

import ctypes
import importlib.util
import pathlib
import sys

import pytest

torch = pytest.importorskip("torch")

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def harness(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    spec = importlib.util.spec_from_file_location(
        "grouped_fp8_host_cost", ROOT / "tools" / "grouped_fp8_host_cost.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from nvmath.bindings import cublasLt as lt

    launched = module.install(monkeypatch)
    target = [lt._p_cublasLtMatmul]
    cfunc = ctypes.CFUNCTYPE(ctypes.c_int, *([ctypes.c_uint64] * 16))(lambda *a: target[0](*a))
    monkeypatch.setattr(lt, "_p_cublasLtMatmul", cfunc)
    yield module, launched
    from nvmath.torch._grouped_fp8_gemms import grouped_fp8_gemms

    grouped_fp8_gemms.clear()
    sys.modules.pop("grouped_fp8_host_cost", None)


@pytest.mark.parametrize(("recipe", "launches"), [("delayed", 5), ("current", 11)])
def test_step_operations(harness, recipe, launches):
    """A warm step launches the recipe's kernels (delayed: three cast passes, two state updates;
    current: an amax pass, a scale launch and a cast pass per tensor, two updates) and dispatches at most
    14 torch operations: two zero-fills (one scratch per pass), no ``stack``, three scale-slot fills."""
    module, launched = harness
    step = module.make_step(recipe)
    for _ in range(3):
        step()
    before = launched[0]
    ops = module.count_ops(step)
    assert launched[0] - before == launches
    assert ops["zeros"] == 2 and ops["stack"] == 0 and ops["index_put_"] == 3
    assert sum(ops.values()) <= 14, dict(ops)
