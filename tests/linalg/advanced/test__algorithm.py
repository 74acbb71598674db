"""Algorithms rebuilt from memoised heuristic records (``_algorithm.from_records``, CPU only): each is a
row of one private copy, its record view made on first use, its workspace size read once and kept in
step with the record (also when the caller writes the shared record)."""

from __future__ import annotations

import numpy as np

from nvmath.bindings import cublasLt as lt
from nvmath.linalg.advanced._algorithm import Algorithm, from_records


def _records(n: int = 5) -> np.ndarray:
    records = np.zeros(n, dtype=lt.matmul_heuristic_result_dtype)
    records["workspace_size"] = [1024 * (i + 1) for i in range(n)]
    records["waves_count"] = [0.5 * i for i in range(n)]
    raw = records.view(np.uint8).reshape(n, -1)
    raw[:, :8] = np.arange(n, dtype=np.uint8)[:, None] + 1  # distinct bytes in each row's algo field
    return records


def test_rows_are_a_private_copy_at_consecutive_addresses():
    """Each algorithm holds its row's bytes, at its own address in one copy that the memo's later
    changes do not reach."""
    records = _records()
    algorithms = from_records(records)
    expected = [records[i].tobytes() for i in range(len(records))]
    records["workspace_size"] = 0
    size = records.dtype.itemsize
    assert [a.to_bytes() for a in algorithms] == expected
    assert [a.algo_ptr - algorithms[0].algo_ptr for a in algorithms] == [i * size for i in range(5)]
    assert all(a.algorithm.ctypes.data == a.algo_ptr for a in algorithms)
    assert [a.workspace_size for a in algorithms] == [1024, 2048, 3072, 4096, 5120]
    assert [a.waves_count for a in algorithms] == [0.0, 0.5, 1.0, 1.5, 2.0]


def test_workspace_size_follows_checks_and_writes_to_the_shared_record():
    """A check's new size and a caller's write into ``algorithm`` (the shared record) both show in
    ``workspace_size``, as in the record itself; ``as_numpy`` copies the current record."""
    first, second = from_records(_records(2))
    assert first.workspace_size == 1024
    first._set_workspace_size(4096)
    assert first.workspace_size == 4096 and int(first.algorithm["workspace_size"]) == 4096
    record = second.algorithm
    assert second.workspace_size == 2048
    record["workspace_size"] = 99
    assert second.workspace_size == 99 and int(second.as_numpy()["workspace_size"]) == 99
    second._set_workspace_size(7)
    assert second.workspace_size == 7 == int(record["workspace_size"])


def test_a_rebuilt_row_round_trips_like_a_checked_algorithm():
    """from_numpy of a row's as_numpy gives the same bytes and workspace size (the public constructor)."""
    (algorithm,) = from_records(_records(1))
    again = Algorithm.from_numpy(algorithm.as_numpy())
    assert again.to_bytes() == algorithm.to_bytes() and again.workspace_size == algorithm.workspace_size
