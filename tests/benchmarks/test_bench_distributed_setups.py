"""The distributed suite's setups (benchmarks/suites/distributed.py) on the CPU: the calls the nvmath
rows make and the cleanup of a failed setup, against recording fakes of the engines' API; torch's
DTensor row for real, on a one-process gloo group and CPU tensors."""

from __future__ import annotations

import types

import pytest
import torch

from benchmarks.context import Context, Settings
from benchmarks.registry import Prepared
from benchmarks.suites import distributed as suite

WORLD = suite.World(0, 1, 0, "single")


class _Footprint:
    def __init__(self, device_id):
        pass

    def plan(self, plan):
        plan()

    def note(self, world, what):
        return f"note: {what}"


class _Slab:
    def __init__(self, dim):
        self.dim = dim

    def shape(self, rank, global_shape):
        return tuple(global_shape)


class _Planned:
    """A planner (FFT or Matmul) that records its life; ``fail`` names the method that raises."""

    def __init__(self, log, fail, *args, **kwargs):
        self.log, self.fail = log, fail
        log.append(("new", type(self).__name__, kwargs))

    def _step(self, name):
        self.log.append((name,))
        if self.fail == name:
            raise RuntimeError(f"{name} failed")

    def plan(self):
        self._step("plan")

    def execute(self):
        self._step("execute")

    def free(self):
        self._step("free")


@pytest.fixture
def fakes(monkeypatch):
    """The engines' API replaced by recorders; returns (log, set_failure)."""
    import nvmath.distributed as nd
    from nvmath.distributed import distribution, fft
    from nvmath.distributed.linalg import advanced

    log: list = []
    state = {"fail": None}

    class FFT(_Planned):
        def __init__(self, *args, **kwargs):
            super().__init__(log, state["fail"], *args, **kwargs)

    class Matmul(_Planned):
        def __init__(self, *args, **kwargs):
            super().__init__(log, state["fail"], *args, **kwargs)

    def allocate_operand(shape, package, **kwargs):
        log.append(("allocate", kwargs))
        return torch.empty(shape, dtype=kwargs["input_dtype"])

    monkeypatch.setattr(suite, "_world", lambda ctx, backend: WORLD)
    monkeypatch.setattr(suite, "_Footprint", _Footprint)
    monkeypatch.setattr(distribution, "Slab", types.SimpleNamespace(X=_Slab(0), Y=_Slab(1)))
    monkeypatch.setattr(fft, "FFT", FFT)
    monkeypatch.setattr(fft, "allocate_operand", allocate_operand)
    monkeypatch.setattr(advanced, "Matmul", Matmul)
    monkeypatch.setattr(nd, "free_symmetric_memory", lambda *t: log.append(("free_symmetric", len(t))))
    monkeypatch.setattr(suite, "_local_operands", lambda p, world, device_id: (torch, object(), object()))
    return log, state


def _ctx():
    return Context(settings=Settings(), device_id=0)


def test_fft_row_plans_runs_once_and_frees_in_order(fakes, monkeypatch):
    """The FFT row allocates its operand on the symmetric heap (memory_space given: nvmath-python
    requires it for torch), plans, calls once before timing; its teardown frees the plan, then the
    operand."""
    log, _ = fakes
    monkeypatch.setattr(suite, "_check_fits", lambda *a: None)
    prepared = suite._fft_setup(suite.FftProblem((4, 4, 4), "R2C"))(_ctx())
    assert isinstance(prepared, Prepared) and prepared.note == "note: global (4, 4, 4)"
    (_, alloc), new = log[0], log[1]
    assert alloc["memory_space"] == "cuda" and alloc["fft_type"] == "R2C"
    assert alloc["input_dtype"] == torch.float32
    assert new[2]["options"] == {"fft_type": "R2C"}
    assert log[2:] == [("plan",), ("execute",)]
    prepared.teardown()
    assert log[4:] == [("free",), ("free_symmetric", 1)]


@pytest.mark.parametrize("step", ["plan", "execute"])
def test_a_failed_fft_setup_frees_what_it_took(fakes, monkeypatch, step):
    """A setup failing in plan() or in its first call frees the plan and the symmetric operand (a
    collective every rank reaches) and re-raises: the next case starts from a clean heap."""
    log, state = fakes
    state["fail"] = step
    monkeypatch.setattr(suite, "_check_fits", lambda *a: None)
    with pytest.raises(RuntimeError, match=f"{step} failed"):
        suite._fft_setup(suite.FftProblem((4, 4, 4)))(_ctx())
    assert log[-2:] == [("free",), ("free_symmetric", 1)]


@pytest.mark.parametrize(("layout", "dims"), [("colwise", (0, 1, 1)), ("rowwise", (1, 0, 0))])
def test_gemm_row_distributions_and_cleanup(fakes, layout, dims):
    """The GEMM row gives cuBLASMp a, b and d's slabs of its layout, plans and calls once; a failed
    plan frees the Matmul."""
    log, state = fakes
    prepared = suite._gemm_setup(suite.GemmProblem(8, 8, 8, layout=layout))(_ctx())
    kwargs = log[0][2]
    assert [d.dim for d in kwargs["distributions"]] == list(dims) and kwargs["options"] == {"inplace": False}
    assert log[1:] == [("plan",), ("execute",)] and prepared.note == f"note: {layout}"
    state["fail"] = "plan"
    with pytest.raises(RuntimeError, match="plan failed"):
        suite._gemm_setup(suite.GemmProblem(8, 8, 8))(_ctx())
    assert log[-1] == ("free",)


@pytest.fixture
def gloo_mesh(monkeypatch):
    """A one-process gloo group; the suite's mesh on the CPU."""
    import torch.distributed as dist
    from torch.distributed import device_mesh

    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    real = device_mesh.init_device_mesh
    monkeypatch.setattr(device_mesh, "init_device_mesh", lambda kind, shape: real("cpu", shape))
    monkeypatch.setattr(suite, "_world", lambda ctx, backend: WORLD)
    monkeypatch.setattr(suite, "_Footprint", _Footprint)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("layout", ["colwise", "rowwise"])
def test_torch_row_computes_the_product_sharded_as_d(gloo_mesh, monkeypatch, layout):
    """torch's row multiplies the DTensors and leaves d sharded as cuBLASMp's d (a rowwise product
    is first Partial: the redistribution is its ReduceScatter); the values are a @ b (float64)."""
    from torch.distributed.tensor import Shard

    a = torch.randn(8, 4, dtype=torch.float64).t()  # (4, 8) in Fortran order, as on the GPU
    b = torch.randn(6, 8, dtype=torch.float64).t()
    monkeypatch.setattr(suite, "_local_operands", lambda p, world, device_id: (torch, a, b))
    p = suite.GemmProblem(4, 6, 8, "float64", layout)
    prepared = suite._torch_gemm(p)(_ctx())
    d = prepared.fn()
    assert d.placements == (Shard(p.shard_dims()[2]),)
    torch.testing.assert_close(d.full_tensor(), a @ b)
