"""Process groups: the generic allreduce_object against a direct reduction (threads as ranks), the
MPI group on a fake mpi4py (op mapping, deadline), and TorchProcessGroup in a real 2-process gloo job."""

from __future__ import annotations

import operator
import sys
import types

import numpy as np
import pytest
from dist_fakes import ThreadGroup

from nvmath.distributed import CollectiveTimeoutError, MPIProcessGroup, ReductionOp


@pytest.mark.parametrize("nranks", [1, 2, 3, 5])
def test_allreduce_object_reduces_in_rank_order(nranks):
    """allreduce_object gives every rank op(op(obj_0, obj_1), ...) for objects of unequal pickle sizes."""
    group = ThreadGroup(nranks)
    objects = [list(range(r * 7)) + [f"rank{r}" * r] for r in range(nranks)]
    expected = objects[0]
    for obj in objects[1:]:
        expected = expected + obj  # list concatenation: order-sensitive
    results = group.run(lambda r: group.allreduce_object(objects[r], op=operator.add))
    assert results == [expected] * nranks
    assert group.calls == ["allreduce_buffer", "allreduce_buffer"]


class _Request:
    def __init__(self, done: bool):
        self.done = done

    def Test(self):  # noqa: N802 - mpi4py's name
        return self.done


def _fake_mpi(monkeypatch, *, complete: bool = True):
    """A minimal mpi4py: Comm with Get_rank/Get_size/Ibcast/Iallreduce on a single rank."""
    mpi = types.SimpleNamespace(SUM="sum", MIN="min", MAX="max", PROD="prod", IN_PLACE="in_place")

    class Comm:
        def __init__(self):
            self.calls = []

        def Get_rank(self):  # noqa: N802
            return 0

        def Get_size(self):  # noqa: N802
            return 1

        def Ibcast(self, array, root):  # noqa: N802
            self.calls.append(("Ibcast", root))
            return _Request(complete)

        def Iallreduce(self, sendbuf, array, op):  # noqa: N802
            self.calls.append(("Iallreduce", sendbuf, op))
            return _Request(complete)

    mpi.Comm = Comm
    package = types.ModuleType("mpi4py")
    package.MPI = mpi
    monkeypatch.setitem(sys.modules, "mpi4py", package)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", mpi)
    return Comm()


def test_mpi_group_maps_ops_and_checks_arguments(monkeypatch):
    """MPIProcessGroup issues non-blocking MPI calls with the mapped op, in place, and rejects bad input."""
    comm = _fake_mpi(monkeypatch)
    group = MPIProcessGroup(comm)
    assert (group.rank, group.nranks, group.mpi_comm) == (0, 1, comm)
    buf = np.zeros(4)
    group.broadcast_buffer(buf, root=0)
    group.allreduce_buffer(buf, op=ReductionOp.MAX)
    assert comm.calls == [("Ibcast", 0), ("Iallreduce", "in_place", "max")]
    with pytest.raises(TypeError, match="C-contiguous numpy array"):
        group.broadcast_buffer(np.zeros((4, 4))[:, ::2])
    with pytest.raises(TypeError, match="C-contiguous numpy array"):
        group.allreduce_buffer([1, 2], op=ReductionOp.SUM)
    with pytest.raises(ValueError, match=r"root=1: expected a rank in \[0, 1\)"):
        group.broadcast_buffer(buf, root=1)
    with pytest.raises(TypeError, match="expected a ReductionOp"):
        group.allreduce_buffer(buf, op="sum")
    with pytest.raises(TypeError, match="mpi4py.MPI.Comm"):
        MPIProcessGroup(object())


def test_mpi_group_times_out_instead_of_hanging(monkeypatch):
    """A collective that never completes raises CollectiveTimeoutError after the group's timeout."""
    group = MPIProcessGroup(_fake_mpi(monkeypatch, complete=False))
    group.timeout = 0.05
    with pytest.raises(CollectiveTimeoutError, match=r"not every rank joined within 0.05 s"):
        group.allreduce_buffer(np.zeros(1), op=ReductionOp.SUM)


def test_mpi_group_without_mpi4py_names_the_install(monkeypatch):
    """Without mpi4py, MPIProcessGroup raises ImportError naming the package."""
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    with pytest.raises(ImportError, match="pip install mpi4py"):
        MPIProcessGroup(object())


def _gloo_worker(rank: int, nranks: int, init_file: str, out_dir: str) -> None:
    """One rank of the gloo job: runs the checks and writes its results (or its error) to a file."""
    import json
    import operator as op

    import numpy as np
    import torch.distributed as dist

    from nvmath.distributed import RankDisagreementError, ReductionOp, TorchProcessGroup
    from nvmath.distributed._agreement import check_agreement

    import datetime

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=nranks,
                            timeout=datetime.timedelta(seconds=60))  # fmt: skip
    out = {}
    try:
        group = TorchProcessGroup(device_id="cpu")
        group.timeout = 60
        out["rank"], out["nranks"] = group.rank, group.nranks
        buf = np.full(5, 10 * (rank + 1), dtype=np.int64)
        group.broadcast_buffer(buf, root=1)
        out["broadcast"] = buf.tolist()
        for name in ("SUM", "MIN", "MAX", "PROD"):
            data = np.arange(3, dtype=np.float64) + rank + 1
            group.allreduce_buffer(data, op=ReductionOp[name])
            out[name] = data.tolist()
        out["object"] = group.allreduce_object([rank], op=op.add)
        check_agreement(group, "test", {"shape": (4, 4)})
        try:
            check_agreement(group, "FFT", {"shape": (4, 4 + rank), "dtype": "float32"})
        except RankDisagreementError as exc:
            out["disagreement"] = str(exc)
    except Exception as exc:  # noqa: BLE001
        out["error"] = repr(exc)
    finally:
        dist.destroy_process_group()
    with open(f"{out_dir}/rank{rank}.json", "w") as f:
        json.dump(out, f)


def test_torch_process_group_in_a_two_process_gloo_job(tmp_path):
    """TorchProcessGroup on gloo: broadcast, the four reductions against numpy, allreduce_object, and a
    disagreement raised on both ranks naming rank 1."""
    import json

    mp = pytest.importorskip("torch.multiprocessing")
    context = mp.start_processes(
        _gloo_worker, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=False,
        start_method="spawn",
    )
    import time

    deadline = time.monotonic() + 180
    while not context.join(timeout=5):  # True once every rank has exited (join waits for one at a time)
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail("the gloo job did not finish in 180 s")
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    a, b = np.arange(3.0) + 1, np.arange(3.0) + 2
    for rank, out in enumerate(results):
        assert "error" not in out, out["error"]
        assert (out["rank"], out["nranks"]) == (rank, 2)
        assert out["broadcast"] == [20] * 5
        assert out["SUM"] == (a + b).tolist() and out["PROD"] == (a * b).tolist()
        assert out["MIN"] == a.tolist() and out["MAX"] == b.tolist()
        assert out["object"] == [0, 1]
        assert "rank(s) [1] differ from rank 0" in out["disagreement"]
        assert "rank 0 has (4, 4), rank 1 has (4, 5)" in out["disagreement"]
