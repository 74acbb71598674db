"""nvmath.distributed.initialize / finalize / get_context against fake engines and process groups:
argument checks before any work, the unique-id bootstrap, reuse of a running NVSHMEM, the teardown
order, and the lifecycle errors (twice, before, with live plans)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from dist_fakes import FakeNccl, FakeNvshmem, SingleRank, ThreadGroup

import nvmath.distributed as nd
from nvmath._errors import LibraryNotFoundError
from nvmath.bindings import _loader
from nvmath.distributed import _engines, _runtime


def test_get_context_before_initialize_is_none_and_checked_access_says_how_to_fix():
    """get_context() is None before initialize (nvmath-python 1.0 does not raise); the runtime's
    checked accessor and finalize raise a RuntimeError naming initialize()."""
    assert nd.get_context() is None
    with pytest.raises(RuntimeError, match=r"initialize\(device_id, process_group\)"):
        _runtime.context()
    with pytest.raises(RuntimeError, match="not initialized"):
        nd.finalize()


def test_initialize_sets_context_and_finalize_tears_down_in_order(fake_runtime):
    """initialize bootstraps both engines from rank 0's ids; finalize stops NCCL, then NVSHMEM, then
    the context."""
    group = SingleRank(rank=1, nranks=2, root_value=5)
    nvshmem, nccl = fake_runtime(group)
    nd.initialize(3, group)
    ctx = nd.get_context()
    assert (ctx.device_id, ctx.process_group, ctx.nvshmem_available, ctx.nccl_comm) == (3, group, True, 0xC1)
    assert nvshmem.uids[1] == bytes([5]) * _engines.NVSHMEM_UNIQUEID_BYTES  # rank 0's id, not its own
    assert ("get_uniqueid", 1) not in nvshmem.log and nccl.log[0] == ("comm_init_rank_scalable", 2, 1, 1)
    assert group.calls == ["broadcast_buffer", "broadcast_buffer"]
    nd.finalize()
    events = [e[0] for e in nccl.log[1:]] + [e[0] for e in nvshmem.log[-1:]]
    assert events == ["comm_finalize", "comm_destroy", "hostlib_finalize"]
    assert nd.get_context() is None


def test_second_initialize_raises(fake_runtime):
    """Initializing twice raises and names finalize(); the first context stays."""
    group = SingleRank()
    fake_runtime(group)
    nd.initialize(0, group, backends=["nccl"])
    with pytest.raises(RuntimeError, match=r"already initialized.*finalize\(\)"):
        nd.initialize(0, group)
    assert nd.get_context().nvshmem_available is False
    nd.finalize()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"device_id": -1}, TypeError, "device_id=-1"),
        ({"device_id": True}, TypeError, "device_id=True"),
        ({"device_id": "0"}, TypeError, "device_id='0'"),
        ({"process_group": object()}, TypeError, "mpi4py communicator"),
        ({"backends": "nccl"}, TypeError, "sequence"),
        ({"backends": []}, ValueError, "non-empty"),
        ({"backends": ["nccl", "nccl"]}, ValueError, "distinct"),
        ({"backends": ["gloo"]}, ValueError, "'nvshmem' for the FFT"),
    ],
)
def test_initialize_rejects_bad_arguments_before_any_work(fake_runtime, kwargs, error, match):
    """Bad arguments raise typed errors naming the value; nothing is loaded or started."""
    group = SingleRank()
    nvshmem, nccl = fake_runtime(group)
    args = {"device_id": 0, "process_group": group, "backends": None, **kwargs}
    with pytest.raises(error, match=match):
        nd.initialize(**args)
    assert nvshmem.log == [] and nccl.log == [] and group.calls == []


def test_missing_engines_raise_importerror_naming_the_extra(monkeypatch):
    """Without the engines, initialize raises ImportError naming `[distributed]` and every missing wheel."""

    def not_found(name):
        raise LibraryNotFoundError(f"lib{name} not found")

    monkeypatch.setattr(_loader, "library_info", not_found)
    with pytest.raises(ImportError, match=r"nvmath-kit\[distributed\]") as info:
        nd.initialize(0, SingleRank())
    assert "nvidia-nvshmem-cu13" in str(info.value) and "nvidia-nccl-cu13" in str(info.value)
    assert nd.get_context() is None


def test_running_nvshmem_is_reused_and_not_finalized(fake_runtime):
    """An NVSHMEM torch already started is reused: no bootstrap, and finalize leaves it running."""
    group = SingleRank()
    nvshmem, _ = fake_runtime(group, nvshmem_status=_engines.NVSHMEM_STATUS_IS_INITIALIZED)
    nd.initialize(0, group, backends=("nvshmem",))
    nd.finalize()
    assert nvshmem.log == [] and group.calls == []


def test_wrong_pe_layout_is_an_error_not_a_silent_solo_run(fake_runtime):
    """If NVSHMEM sees a different PE layout than the group, initialize raises and finalizes what it
    started."""
    group = SingleRank(rank=1, nranks=4)
    nvshmem, _ = fake_runtime(group, layout=(0, 1))
    with pytest.raises(RuntimeError, match="PE 0 of 1.*rank 1 of 4"):
        nd.initialize(0, group, backends=["nvshmem"])
    assert nvshmem.log[-1] == ("hostlib_finalize",)


def test_nccl_failure_rolls_back_nvshmem(fake_runtime):
    """A failing NCCL start finalizes the NVSHMEM just started and leaves no context."""
    group = SingleRank()
    nvshmem, _ = fake_runtime(group, fail_nccl=True)
    with pytest.raises(RuntimeError, match="fake"):
        nd.initialize(0, group)
    assert nvshmem.log[-1] == ("hostlib_finalize",)
    assert nd.get_context() is None


def test_finalize_refuses_with_live_plans(fake_runtime):
    """finalize with a live plan raises (naming free()); after the plan is gone it succeeds."""

    class Plan:
        pass

    group = SingleRank()
    fake_runtime(group)
    nd.initialize(0, group)
    plan = Plan()
    _runtime.register_plan(plan)
    with pytest.raises(RuntimeError, match=r"1 plan\(s\).*\.free\(\)"):
        nd.finalize()
    _runtime.unregister_plan(plan)
    nd.finalize()


def test_engine_not_started_is_named(fake_runtime):
    """Asking for an engine that initialize did not start names the backends argument."""
    group = SingleRank()
    fake_runtime(group)
    nd.initialize(0, group, backends=["nccl"])
    with pytest.raises(RuntimeError, match="'nvshmem' backend"):
        _runtime.engine("nvshmem")
    nd.finalize()


@pytest.mark.parametrize("nranks", [1, 2, 4])
def test_bootstrap_over_threads_gives_every_rank_rank0s_ids(nranks):
    """start_nvshmem / start_nccl over N thread-ranks: only rank 0 makes ids, every rank inits with them."""
    group = ThreadGroup(nranks)
    nvshmem, nccl = FakeNvshmem(group), FakeNccl(group)

    def boot(rank):
        state = _engines.start_nvshmem(nvshmem, group)
        return state.owned, _engines.start_nccl(nccl, group)

    results = group.run(boot)
    assert results == [(True, 0xC0 + r) for r in range(nranks)]
    assert [e for e in nvshmem.log if e[0] == "get_uniqueid"] == [("get_uniqueid", 0)]
    assert set(nvshmem.uids.values()) == {bytes([42]) * 128} and len(nvshmem.uids) == nranks
    assert set(nccl.uids.values()) == {bytes([9]) * 128} and len(nccl.uids) == nranks


def test_import_loads_no_engine_and_no_optional_package():
    """`import nvmath.distributed` loads no library and imports neither torch nor mpi4py."""
    code = (
        "import sys, nvmath.distributed\n"
        "from nvmath.bindings import _loader\n"
        "assert _loader.loaded_libraries() == {}\n"
        "assert not {'torch', 'mpi4py'} & set(sys.modules), sorted({'torch', 'mpi4py'} & set(sys.modules))\n"
        "maps = open('/proc/self/maps').read() if sys.platform == 'linux' else ''\n"
        "assert not any(l in maps for l in ('libnccl', 'libnvshmem', 'libcufftMp', 'libcublasmp')), maps\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_public_surface():
    """The package exports exactly the runtime names (the FFT and matmul are not claimed)."""
    assert set(nd.__all__) == {
        "CollectiveTimeoutError", "DistributedContext", "MPIProcessGroup", "ProcessGroup",
        "RankDisagreementError", "ReductionOp", "TorchProcessGroup", "allocate_symmetric_memory",
        "finalize", "free_symmetric_memory", "get_context", "initialize",
    }  # fmt: skip
    assert all(hasattr(nd, name) for name in nd.__all__)
    assert np is not None


def test_distributions_read_the_real_runtime(fake_runtime):
    """The distributions' runtime hook works against the real get_context(): a clear RuntimeError
    naming initialize before it, this rank's slab after it."""
    from nvmath.distributed.distribution import Slab

    with pytest.raises(RuntimeError, match=r"nvmath\.distributed\.initialize"):
        Slab.X.shape(0, (10, 4))
    group = SingleRank(rank=1, nranks=3)
    fake_runtime(group)
    nd.initialize(0, group, backends=["nccl"])
    try:
        assert Slab.X.shape(1, (10, 4)) == (3, 4) and Slab.Y.shape(0, (4, 10)) == (4, 4)
    finally:
        nd.finalize()
