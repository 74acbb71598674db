"""cuBLASLt algorithms: the :class:`Algorithm` wrapper, heuristic queries and algorithm checks.

An :class:`Algorithm` owns one ``cublasLtMatmulHeuristicResult_t`` record (a 0-d numpy array of
``cublasLt.matmul_heuristic_result_dtype``): the 64-byte ``cublasLtMatmulAlgo_t`` plus the
workspace size the heuristic reported. The record is plain data, so :meth:`Algorithm.as_numpy` /
:meth:`Algorithm.from_numpy` serialise it (valid for the same cuBLASLt version and problem).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from nvmath.bindings import cublasLt as lt

__all__ = [
    "Algorithm",
    "AlgorithmCapabilities",
    "check_algorithm",
    "from_records",
    "query_heuristics",
    "to_records",
]

_CONFIG = lt.MatmulAlgoConfigAttribute
_UNDEFINED, _AUTO = "UNDEFINED", "AUTO"


@dataclasses.dataclass(frozen=True)
class AlgorithmCapabilities:
    """What an algorithm supports (``cublasLtMatmulAlgoCapAttributes_t``; ``None``: not reported).

    The tile / stage / cluster ids are decoded like :attr:`Algorithm.tile` and friends.
    """

    splitk_support: int | None
    reduction_scheme_mask: int | None
    cta_swizzling_support: int | None
    strided_batch_support: int | None
    out_of_place_result_support: int | None
    uplo_support: int | None
    tile_ids: tuple[Any, ...] | None
    custom_option_max: int | None
    custom_memory_order: int | None
    pointer_mode_mask: int | None
    epilogue_mask: int | None
    stages_ids: tuple[Any, ...] | None
    ld_negative: int | None
    numerical_impl_flags: int | None
    min_alignment_a_bytes: int | None
    min_alignment_b_bytes: int | None
    min_alignment_c_bytes: int | None
    min_alignment_d_bytes: int | None
    pointer_array_batch_support: int | None
    floating_point_emulation_support: int | None


def _decode(enum_cls: type, prefix: str, value: int) -> Any:
    """``TILE_64x128`` -> ``(64, 128)``; ``*_UNDEFINED`` -> ``"UNDEFINED"``; ``*_AUTO`` -> ``"AUTO"``."""
    try:
        name = enum_cls(int(value)).name
    except ValueError:
        return int(value)
    body = name[len(prefix) :]
    if body in (_UNDEFINED, _AUTO):
        return body
    parts = tuple(int(p) if p.isdigit() else p for p in body.split("x"))
    return parts


def _encode(enum_cls: type, prefix: str, value: Any, what: str) -> int:
    """The inverse of :func:`_decode`; ints (and enum members) pass through."""
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, str) and value.upper() in (_UNDEFINED, _AUTO):
        key = prefix + value.upper()
    elif isinstance(value, tuple):
        key = prefix + "x".join(str(p) for p in value)
    else:
        raise TypeError(
            f"{what} must be a tuple such as (64, 128), 'AUTO'/'UNDEFINED' or an int; got {value!r}"
        )
    try:
        return int(enum_cls[key])
    except KeyError:
        raise ValueError(f"{what}={value!r} is not a {enum_cls.__name__} value") from None


def _as_record(value: Any) -> np.ndarray:
    """The numpy record behind a struct wrapper (``__array__`` / ``_data``), or a ``TypeError``."""
    for get in (lambda v: v._data, np.asarray):
        try:
            arr = get(value)
        except Exception:  # noqa: BLE001 - try the next way
            continue
        if isinstance(arr, np.ndarray) and arr.dtype == lt.matmul_heuristic_result_dtype:
            return arr
    raise TypeError(
        "Algorithm takes a cublasLt.matmul_heuristic_result_dtype record (e.g. Algorithm.as_numpy()); "
        f"got {type(value).__name__}"
    )


def _config_property(
    attr: str, doc: str, enum_cls: type | None = None, prefix: str = "", *, flag: bool = False
) -> property:
    """A settable algorithm configuration attribute (``flag``: a bool is taken as 0 / 1)."""
    code = int(_CONFIG[attr])

    def fget(self: Algorithm) -> Any:
        value = lt.matmul_algo_config_get(self.algo_ptr, code)
        return _decode(enum_cls, prefix, value) if enum_cls is not None else int(value)

    def fset(self: Algorithm, value: Any) -> None:
        raw = _encode(enum_cls, prefix, value, attr.lower()) if enum_cls is not None else value
        if flag and isinstance(raw, bool):
            raw = int(raw)
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise TypeError(f"{attr.lower()} must be an int; got {value!r}")
        lt.matmul_algo_config_set(self.algo_ptr, code, raw)

    return property(fget, fset, doc=doc)


class Algorithm:
    """A cuBLASLt algorithm for one planned problem (returned by ``Matmul.plan()``).

    Args:
        algorithm: one ``cublasLtMatmulHeuristicResult_t`` record, as nvmath-python's constructor
            takes it: a numpy array of ``cublasLt.matmul_heuristic_result_dtype`` with one element
            (0-d or shape ``(1,)``, e.g. what :meth:`as_numpy` returns), or an object exposing one
            through ``__array__`` (a bindings struct wrapper). The record is used in place.
        ptr: the address of the record's ``algo`` field (internal; defaults to the record's own).

    The settable properties change the algorithm's configuration in place; call
    ``Matmul.plan(algorithms=[...])`` again afterwards so that the configuration is checked and its
    workspace size recomputed.
    """

    __slots__ = ("_index", "_rows", "_view", "_ws", "algo_ptr")

    def __init__(self, algorithm: Any, ptr: int | None = None, *, _trusted: bool = False):
        self._ws: int | None = None  # the record's workspace size once read; -1: always read the record
        self._rows: np.ndarray | None = None  # (from_records: the view of row _index made on first use)
        if _trusted:  # internal: a 0-d view of a checked heuristic record and its address
            self._view, self.algo_ptr = algorithm, ptr
            return
        record = algorithm if isinstance(algorithm, np.ndarray) else _as_record(algorithm)
        if record.dtype != lt.matmul_heuristic_result_dtype or record.size != 1:
            raise TypeError(
                "Algorithm wraps one record of cublasLt.matmul_heuristic_result_dtype (0-d or shape (1,)); "
                f"got {type(algorithm).__name__} of dtype {record.dtype} and shape {record.shape}"
            )
        record = record.reshape(())
        self._view = record
        self.algo_ptr: int = record.ctypes.data if ptr is None else ptr

    @classmethod
    def _of_row(cls, rows: np.ndarray, index: int, ptr: int, workspace_size: int) -> Algorithm:
        """Internal: row ``index`` of checked heuristic records ``rows`` (at ``ptr``), whose workspace
        size is known; its 0-d view is made on first use (most planned algorithms never need one)."""
        made = cls.__new__(cls)
        made._rows, made._index, made._view, made._ws, made.algo_ptr = rows, index, None, workspace_size, ptr
        return made

    @property
    def _record(self) -> np.ndarray:
        view = self._view
        if view is None:
            view = self._view = self._rows[self._index, ...]  # type: ignore[index]
        return view

    # ------------------------------------------------------------------ record fields
    @property
    def algorithm(self) -> np.ndarray:
        """The ``cublasLtMatmulHeuristicResult_t`` record this object wraps (a 0-d numpy array of
        ``cublasLt.matmul_heuristic_result_dtype``, shared: configuration changes show in it)."""
        self._ws = -1  # the caller may write the record: read the workspace size from it from now on
        return self._record

    @property
    def algorithm_id(self) -> int:
        """The cuBLASLt algorithm id."""
        return int(lt.matmul_algo_config_get(self.algo_ptr, int(_CONFIG.ID)))

    @property
    def workspace_size(self) -> int:
        """Workspace bytes this algorithm needs (as reported by the heuristic or the last check)."""
        ws = self._ws
        if ws is None or ws < 0:  # not read yet, or the record was handed out (see algorithm)
            size = int(self._record["workspace_size"])
            if ws is None:
                self._ws = size
            return size
        return ws

    @property
    def waves_count(self) -> float:
        """The heuristic's estimate of the number of waves (device utilisation)."""
        return float(self._record["waves_count"])

    @property
    def capabilities(self) -> AlgorithmCapabilities:
        """The algorithm's :class:`AlgorithmCapabilities`."""
        values: dict[str, Any] = {}
        for field in dataclasses.fields(AlgorithmCapabilities):
            member = lt.MatmulAlgoCapAttribute[field.name.upper()]
            try:
                value = lt.matmul_algo_cap_get(self.algo_ptr, member)
            except lt.cuBLASLtError:  # an older library that does not know the attribute
                value = None
            if field.name == "tile_ids" and value is not None:
                value = tuple(_decode(lt.MatmulTile, "TILE_", v) for v in value)
            elif field.name == "stages_ids" and value is not None:
                value = tuple(_decode(lt.MatmulStages, "STAGES_", v) for v in value)
            elif value is not None:
                value = int(value)
            values[field.name] = value
        return AlgorithmCapabilities(**values)

    tile = _config_property(
        "TILE_ID", "Tile shape, e.g. ``(128, 256)``, or ``'UNDEFINED'``.", lt.MatmulTile, "TILE_"
    )
    stages = _config_property(
        "STAGES_ID", "Stage configuration, e.g. ``(64, 3)`` or ``(64, 'AUTO')``.", lt.MatmulStages, "STAGES_"
    )
    cluster_shape = _config_property(
        "CLUSTER_SHAPE_ID",
        "Thread-block cluster shape, e.g. ``(2, 1, 1)``, or ``'AUTO'``.",
        lt.ClusterShape,
        "SHAPE_",
    )
    inner_shape = _config_property("INNER_SHAPE_ID", "Inner MMA shape id (``MatmulInnerShape``).")
    split_k = _config_property("SPLITK_NUM", "Number of split-K partitions (1: none).")
    reduction_scheme = _config_property(
        "REDUCTION_SCHEME", "Split-K reduction scheme (``MatmulReductionScheme``)."
    )
    cta_swizzling = _config_property("CTA_SWIZZLING", "CTA swizzling (0 or 1; True / False too).", flag=True)
    custom_option = _config_property("CUSTOM_OPTION", "Algorithm-specific custom option.")

    # ------------------------------------------------------------------ serialisation
    def as_numpy(self) -> np.ndarray:
        """A copy of the record (0-d, dtype ``cublasLt.matmul_heuristic_result_dtype``), e.g. for ``np.save``."""
        return self._record.copy()

    @classmethod
    def from_numpy(cls, array: Any) -> Algorithm:
        """Rebuild an algorithm from :meth:`as_numpy` output (valid for the same cuBLASLt version).

        Raises:
            TypeError: ``array`` does not hold one record of ``cublasLt.matmul_heuristic_result_dtype``.
        """
        array = np.asarray(array)
        dtype = lt.matmul_heuristic_result_dtype
        if array.dtype != dtype and array.dtype.itemsize == dtype.itemsize and array.dtype.kind == "V":
            array = array.view(dtype)
        if array.dtype != dtype or array.size != 1:
            raise TypeError(
                f"expected one record of cublasLt.matmul_heuristic_result_dtype (from Algorithm.as_numpy()); "
                f"got dtype {array.dtype} with shape {array.shape}"
            )
        return cls(np.array(array.reshape(()), dtype=dtype, copy=True))

    def to_bytes(self) -> bytes:
        """The raw record bytes (used by the persistent autotune cache)."""
        return self._record.tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> Algorithm:
        """The inverse of :meth:`to_bytes`."""
        return cls(np.frombuffer(data, dtype=lt.matmul_heuristic_result_dtype).reshape(()).copy())

    def config_key(self) -> tuple[int, ...]:
        """Every configuration attribute as raw ints: equal keys run the same kernel configuration
        (records of two heuristic queries may differ in bytes that are not configuration)."""
        return tuple(int(lt.matmul_algo_config_get(self.algo_ptr, int(code))) for code in _CONFIG)

    def _set_workspace_size(self, nbytes: int) -> None:
        self._record["workspace_size"] = nbytes
        if self._ws != -1:
            self._ws = int(self._record["workspace_size"])

    def __repr__(self) -> str:
        try:
            return (
                f"Algorithm(id={self.algorithm_id}, tile={self.tile!r}, workspace_size={self.workspace_size})"
            )
        except Exception:  # noqa: BLE001 - repr never raises (e.g. cuBLASLt not loadable)
            return f"Algorithm(workspace_size={self.workspace_size})"


def query_heuristics(
    handle: int, desc: int, layouts: Sequence[int], preference: int, limit: int
) -> list[Algorithm]:
    """Run ``cublasLtMatmulAlgoGetHeuristic`` and return the usable algorithms, best first."""
    dtype = lt.matmul_heuristic_result_dtype
    results = np.zeros(limit, dtype=dtype)
    base = results.ctypes.data
    a, b, c, d = layouts
    count = lt.matmul_algo_get_heuristic(handle, desc, a, b, c, d, preference, limit, base)
    states = results["state"].tolist()
    # each Algorithm is a 0-d view of its own record (the array stays alive through the views)
    return [
        Algorithm(results[i : i + 1].reshape(()), base + i * dtype.itemsize)
        for i in range(count)
        if states[i] == 0
    ]


def to_records(algorithms: Sequence[Algorithm]) -> np.ndarray:
    """A standalone copy of the algorithms' heuristic records (for a memo)."""
    records = np.empty(len(algorithms), dtype=lt.matmul_heuristic_result_dtype)
    for i, algorithm in enumerate(algorithms):
        records[i] = algorithm.as_numpy()
    return records


def from_records(records: np.ndarray) -> list[Algorithm]:
    """New :class:`Algorithm` objects over a private copy of ``records`` (independent of the memo).

    ``records`` are a memo's copy of checked heuristic records: each object is made without
    :class:`Algorithm`'s argument checks (``_trusted``: a 0-d view of its row of the copy and that
    row's address).
    """
    own = records.copy()
    base, size = own.ctypes.data, own.dtype.itemsize
    sizes = own["workspace_size"].tolist()  # (one read for all: a plan's launch needs their maximum)
    return [Algorithm._of_row(own, i, base + i * size, ws) for i, ws in enumerate(sizes)]


def check_algorithm(handle: int, desc: int, layouts: Sequence[int], algorithm: Algorithm) -> None:
    """Validate ``algorithm`` for the problem (``cublasLtMatmulAlgoCheck``) and update its workspace size.

    Raises:
        ValueError: cuBLASLt rejects the algorithm for this problem.
    """
    result = np.zeros((), dtype=lt.matmul_heuristic_result_dtype)
    a, b, c, d = layouts
    try:
        lt.matmul_algo_check(handle, desc, a, b, c, d, algorithm.algo_ptr, result.ctypes.data)
    except lt.cuBLASLtError as exc:
        raise ValueError(
            f"{algorithm!r} cannot run this problem ({exc.status_name}); pass algorithms planned for the same "
            "problem, dtypes, epilog and cuBLASLt version"
        ) from exc
    if int(result["state"]) != 0:
        raise ValueError(f"{algorithm!r} cannot run this problem (state {int(result['state'])})")
    algorithm._set_workspace_size(int(result["workspace_size"]))
