"""Options of the distributed matmul: :class:`MatmulOptions` and :class:`MatmulAlgoType`.

Fields, order and defaults follow the fact sheet of nvmath-python 1.0's distributed
``MatmulOptions``; like the single-GPU options it is a mutable dataclass checked where a field is
set. ``compute_type``, ``scale_type`` and ``result_type`` take the values of
:class:`nvmath.linalg.advanced.MatmulComputeType` and ``cudaDataType`` (cuBLASMp uses cuBLAS's).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any, Literal

from nvmath._internal.options import MutableOptions, check_blocking, check_bool, check_int, check_logger
from nvmath.linalg.advanced._options import to_compute_type, to_data_type

__all__ = ["LOGGER_NAME", "MULTICAST_ALGORITHMS", "MatmulAlgoType", "MatmulOptions", "effective_algorithm"]

LOGGER_NAME = "nvmath.distributed.linalg.advanced"
"""The logger used when ``MatmulOptions.logger`` is ``None``."""


class MatmulAlgoType(enum.IntEnum):
    """cuBLASMp's matmul algorithms (``cublasMpMatmulAlgoType_t``).

    ``SPLIT_P2P`` and ``ATOMIC_P2P`` overlap the communication with the GEMM peer to peer;
    ``NO_OVERLAP`` communicates then multiplies; ``DEFAULT`` lets cuBLASMp choose. The multicast
    and fused algorithms need NVLink multicast (NVLS), which many hosts (ours among them) disable.
    """

    DEFAULT = 0
    SPLIT_P2P = 1
    SPLIT_MULTICAST = 2
    ATOMIC_P2P = 3
    ATOMIC_MULTICAST = 4
    NO_OVERLAP = 5
    FUSED = 6


MULTICAST_ALGORITHMS = frozenset({MatmulAlgoType.SPLIT_MULTICAST, MatmulAlgoType.ATOMIC_MULTICAST,
                                  MatmulAlgoType.FUSED})  # fmt: skip
"""The algorithms that need NVLink multicast."""


def effective_algorithm(
    algo: MatmulAlgoType | None, environ: Mapping[str, str], nranks: int
) -> tuple[int | None, str]:
    """The algorithm to ask cuBLASMp for, and why it differs from ``algo`` (``""`` when it does not).

    Decided before any GPU work, so no call fails on it: at one rank there is nothing to
    communicate, so any algorithm is ``DEFAULT`` (cuBLASMp's local GEMM); a multicast algorithm where
    this process turned NVLink multicast off (``NCCL_NVLS_ENABLE=0``) cannot run and becomes
    ``DEFAULT`` (cuBLASMp treats the algorithm as a hint and falls back the same way where it can).
    """
    if algo is None or algo == MatmulAlgoType.DEFAULT:
        return (None if algo is None else int(algo)), ""
    name = MatmulAlgoType(algo).name
    default = int(MatmulAlgoType.DEFAULT)
    if nranks == 1:
        return default, f"algo_type={name} at one rank (no communication): DEFAULT is used"
    if algo in MULTICAST_ALGORITHMS and environ.get("NCCL_NVLS_ENABLE", "").strip() == "0":
        why = (
            f"algo_type={name} needs NVLink multicast, which NCCL_NVLS_ENABLE=0 turns off in this process: "
            "DEFAULT is used instead"
        )
        return default, why
    return int(algo), ""


def _to_algo_type(value: Any) -> MatmulAlgoType | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"algo_type must be a MatmulAlgoType or None; got {type(value).__name__}: {value!r}")
    try:
        return MatmulAlgoType(value)
    except ValueError:
        names = ", ".join(m.name for m in MatmulAlgoType)
        raise ValueError(f"algo_type={value!r}: expected one of MatmulAlgoType ({names})") from None


@dataclasses.dataclass(unsafe_hash=True)
class MatmulOptions(MutableOptions):
    """Options of the distributed matmul.

    Attributes:
        inplace: write the result into ``c`` (which must then be given).
        compute_type: a :class:`~nvmath.linalg.advanced.MatmulComputeType`; ``None``: the default
            for the operand types.
        scale_type: a ``cudaDataType`` for alpha and beta; ``None`` derives it.
        result_type: a ``cudaDataType`` for the result; ``None``: ``c``'s type, else ``a``'s.
        algo_type: a :class:`MatmulAlgoType`; ``None`` lets cuBLASMp choose.
        result_amax: also return the max absolute value of the result (narrow result types).
        block_scaling: MXFP8 block scaling.
        sm_count_communication: SMs given to the overlapped communication (``None``: cuBLASMp's).
        logger: a ``logging.Logger``; ``None`` selects ``nvmath.distributed.linalg.advanced``.
        blocking: ``True`` or ``"auto"`` (return after enqueueing).
    """

    inplace: bool = True
    compute_type: int | None = None
    scale_type: int | None = None
    result_type: int | None = None
    algo_type: int | None = None
    result_amax: bool = False
    block_scaling: bool = False
    sm_count_communication: int | None = None
    logger: Any = None
    blocking: Literal[True, "auto"] = "auto"

    def _check_field(self, name: str, value: Any) -> Any:
        if name in ("inplace", "result_amax", "block_scaling"):
            check_bool(name, value)
        elif name == "compute_type":
            value = to_compute_type(value)
        elif name in ("scale_type", "result_type"):
            value = to_data_type(value, name)
        elif name == "algo_type":
            value = _to_algo_type(value)
        elif name == "sm_count_communication":
            if value is not None:
                check_int(name, value, minimum=1)
        elif name == "logger":
            check_logger(value)
        elif name == "blocking":
            check_blocking(value)
        return value
