"""nvmath.distributed.linalg.advanced.MatmulOptions / MatmulAlgoType: fields, defaults, checks where
set; the package's exports."""

from __future__ import annotations

import dataclasses
import logging

import pytest

import nvmath.distributed.linalg.advanced as dla
from nvmath.distributed.linalg.advanced._options import MULTICAST_ALGORITHMS, effective_algorithm
from nvmath.linalg.advanced import MatmulComputeType


def test_fields_order_and_defaults():
    """The fields (in order) and defaults of the fact sheet's MatmulOptions."""
    fields = [(f.name, f.default) for f in dataclasses.fields(dla.MatmulOptions)]
    assert fields == [
        ("inplace", True), ("compute_type", None), ("scale_type", None), ("result_type", None),
        ("algo_type", None), ("result_amax", False), ("block_scaling", False),
        ("sm_count_communication", None), ("logger", None), ("blocking", "auto"),
    ]  # fmt: skip


def test_values_are_normalized():
    """Ints become the enums; a logger and blocking=True are kept."""
    log = logging.getLogger("x")
    o = dla.MatmulOptions(
        algo_type=1, compute_type=int(MatmulComputeType.COMPUTE_32F), logger=log, blocking=True
    )
    assert o.algo_type is dla.MatmulAlgoType.SPLIT_P2P and o.compute_type is MatmulComputeType.COMPUTE_32F
    assert (o.logger, o.blocking) == (log, True)
    o.sm_count_communication = 8
    assert o.sm_count_communication == 8


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [("inplace", 1, TypeError), ("algo_type", 9, ValueError), ("algo_type", "SPLIT_P2P", TypeError),
     ("algo_type", True, TypeError), ("sm_count_communication", 0, ValueError),
     ("blocking", False, ValueError), ("compute_type", 12345, ValueError), ("logger", "log", TypeError)],
)  # fmt: skip
def test_bad_values_raise_where_set(field, value, error):
    """A bad value raises a typed error naming the field, at construction and on assignment."""
    with pytest.raises(error, match=field):
        dla.MatmulOptions(**{field: value})
    options = dla.MatmulOptions()
    with pytest.raises(error, match=field):
        setattr(options, field, value)


@pytest.mark.parametrize("name", ["matmul", "Matmul"])
def test_matmul_is_exported(name):
    """matmul / Matmul exist and are exported (their behaviour: test_planner.py)."""
    assert name in dla.__all__ and callable(getattr(dla, name))


@pytest.mark.parametrize("algo", sorted(MULTICAST_ALGORITHMS))
def test_multicast_algorithms_become_default_when_nvls_is_off(algo):
    """SPLIT_MULTICAST, ATOMIC_MULTICAST and FUSED with NCCL_NVLS_ENABLE=0 are asked as DEFAULT, with
    the reason; with multicast not turned off, and for the other algorithms, the algorithm is kept."""
    used, why = effective_algorithm(algo, {"NCCL_NVLS_ENABLE": "0"}, 2)
    assert used == dla.MatmulAlgoType.DEFAULT and algo.name in why and "NCCL_NVLS_ENABLE=0" in why
    assert effective_algorithm(algo, {}, 2) == (int(algo), "")
    assert effective_algorithm(algo, {"NCCL_NVLS_ENABLE": "1"}, 4) == (int(algo), "")
    assert effective_algorithm(None, {"NCCL_NVLS_ENABLE": "0"}, 2) == (None, "")
    for other in (dla.MatmulAlgoType.SPLIT_P2P, dla.MatmulAlgoType.NO_OVERLAP):
        assert effective_algorithm(other, {"NCCL_NVLS_ENABLE": "0"}, 2) == (int(other), "")


def test_one_rank_asks_default():
    """At one rank (nothing to communicate) every algorithm is asked as DEFAULT; None stays None."""
    for algo in dla.MatmulAlgoType:
        used, why = effective_algorithm(algo, {}, 1)
        assert used == 0 and (why == "" if algo == 0 else "one rank" in why)
    assert effective_algorithm(None, {}, 1) == (None, "")
