"""RAII descriptors, Algorithm records, the autotune cache and stateless keys (CPU).

cuBLASLt's descriptor, layout and preference objects are host-side, so they are created for real
here (only handles, heuristics and matmuls need a GPU).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import nvmath.linalg.advanced as adv
from nvmath.bindings import cublasLt as lt
from nvmath.linalg.advanced import _autotune_cache, _device, _stateless
from nvmath.linalg.advanced._descriptors import LayoutSet, MatmulDesc, MatrixLayout, Preference
from nvmath.linalg.advanced._traits import MatrixLayout as Layout
from nvmath.linalg.advanced._traits import get_mm_traits, get_problem
from nvmath.linalg.advanced._typemaps import resolve_types


@pytest.fixture(scope="module")
def cublaslt():
    """Skip when libcublasLt cannot be loaded."""
    try:
        lt.get_version()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"cuBLASLt not loadable: {exc}")
    return lt


def test_desc_attributes_round_trip_and_close_is_idempotent(cublaslt):
    """MatmulDesc sets attributes through ctypes scalars; close() twice is harmless."""
    desc = MatmulDesc(adv.MatmulComputeType.COMPUTE_32F, 0)
    desc.set("TRANSA", 1)
    desc.set("EPILOGUE", int(adv.MatmulEpilog.RELU_BIAS))
    desc.set("BIAS_BATCH_STRIDE", 1 << 40)
    desc.pointer("BIAS_POINTER").set(0xDEAD0000)
    assert desc.get("TRANSA") == 1 and desc.get("EPILOGUE") == 6
    assert desc.get("BIAS_BATCH_STRIDE") == 1 << 40 and desc.get("BIAS_POINTER") == 0xDEAD0000
    desc.close()
    desc.close()
    assert desc.closed


def test_layout_attributes(cublaslt):
    """MatrixLayout sets order, batch count and batch offset only when needed."""
    with MatrixLayout(Layout(5, 7, 8, 0, "bfloat16", 3, 56)) as lay:
        get = lambda n: lt.matrix_layout_get(lay.ptr, lt.MatrixLayoutAttribute[n])
        assert (get("ROWS"), get("COLS"), get("LD"), get("BATCH_COUNT"), get("STRIDED_BATCH_OFFSET")) == (
            5,
            7,
            8,
            3,
            56,
        )
        assert get("TYPE") == int(lt.CudaDataType.R_16BF)


def test_layout_set_shares_c_and_d(cublaslt):
    """Without c, C and D share one layout object; closing the set closes every layout."""
    mm = get_mm_traits(
        *(adv._operands.OperandSpec(s, st, "float32") for s, st in (((4, 3), (3, 1)), ((3, 5), (5, 1))))
    )
    problem = get_problem(mm, resolve_types("float32", "float32"))
    layouts = LayoutSet(problem)
    assert layouts.c is layouts.d
    layouts.close()
    assert layouts.a.closed and layouts.d.closed


def test_preference_settings(cublaslt):
    """Preference writes workspace and alignment settings that read back."""
    with Preference([("MAX_WORKSPACE_BYTES", 32 << 20), ("MIN_ALIGNMENT_A_BYTES", 16)]) as pref:
        assert pref.get("MAX_WORKSPACE_BYTES") == 32 << 20 and pref.get("MIN_ALIGNMENT_A_BYTES") == 16


def _record(marker=7):
    rec = np.zeros((), dtype=lt.matmul_heuristic_result_dtype)
    rec["algo"]["data"][3] = marker
    rec["workspace_size"] = 1024
    return rec


def test_algorithm_numpy_round_trip(cublaslt, tmp_path):
    """as_numpy()/np.save/np.load/from_numpy reproduce the record; bytes round-trip too."""
    alg = adv.Algorithm(_record())
    np.save(tmp_path / "alg.npy", alg.as_numpy())
    back = adv.Algorithm.from_numpy(np.load(tmp_path / "alg.npy"))
    assert back.to_bytes() == alg.to_bytes() and back.workspace_size == 1024
    assert adv.Algorithm.from_bytes(alg.to_bytes()).to_bytes() == alg.to_bytes()
    assert adv.Algorithm.from_numpy(alg.as_numpy().reshape(1)).to_bytes() == alg.to_bytes()


def test_algorithm_config_properties(cublaslt):
    """Tile / stages / cluster shape decode to tuples and encode back; split_k is an int."""
    alg = adv.Algorithm(np.zeros((), dtype=lt.matmul_heuristic_result_dtype))
    alg.tile = (64, 128)
    assert alg.tile == (64, 128)
    alg.stages = (64, "AUTO")
    assert alg.stages == (64, "AUTO")
    alg.cluster_shape = (2, 1, 1)
    assert alg.cluster_shape == (2, 1, 1)
    alg.split_k = 4
    assert alg.split_k == 4
    alg.tile = "UNDEFINED"
    assert alg.tile == "UNDEFINED"
    with pytest.raises(ValueError, match="not a MatmulTile"):
        alg.tile = (3, 5)
    with pytest.raises(TypeError):
        alg.split_k = "four"
    alg.cta_swizzling = True  # a flag, as nvmath-python documents it
    assert alg.cta_swizzling == 1
    alg.cta_swizzling = False
    assert alg.cta_swizzling == 0
    with pytest.raises(TypeError):
        alg.split_k = True


def test_algorithm_config_key_ignores_non_configuration_bytes(cublaslt):
    """config_key() is equal for records differing only outside the configuration and differs when
    a configuration attribute (split-K) does: what autotuning deduplicates candidates by."""
    one, two = (
        np.zeros((), dtype=lt.matmul_heuristic_result_dtype),
        np.zeros((), dtype=lt.matmul_heuristic_result_dtype),
    )
    one["algo"]["data"][7], two["algo"]["data"][7] = 1, 2
    a, b = adv.Algorithm(one), adv.Algorithm(two)
    a.tile = b.tile = (64, 128)
    assert a.to_bytes() != b.to_bytes() and a.config_key() == b.config_key()
    b.split_k = 3
    assert a.config_key() != b.config_key() and len(a.config_key()) == len(lt.MatmulAlgoConfigAttribute)


def test_pointer_alignment():
    """pointer_alignment is the largest power of two dividing the address, capped at 256."""
    assert [_device.pointer_alignment(p) for p in (0, 4, 48, 256, 4096, 0x7F00_0000_0010)] == [
        256,
        4,
        16,
        256,
        256,
        16,
    ]


def test_autotune_cache_file_round_trip(tmp_path):
    """Entries survive in the JSON file, a new cache object (another process) reads them; clear() deletes it."""
    path = tmp_path / "sub" / "tune.json"
    cache = _autotune_cache.AutotuneCache(path)
    key = _autotune_cache.problem_key(("H200", (9, 0), 131000, "float32"))
    assert cache.lookup(key) is None
    record = b"\x07" * _autotune_cache._record_size()
    cache.store(key, record, median_ms=0.5)
    other = _autotune_cache.AutotuneCache(path)
    entry = other.lookup(key)
    assert entry["algorithm"] == record and entry["median_ms"] == 0.5 and other.hits == 1
    assert json.loads(path.read_text())["nvmath_autotune_cache"] == _autotune_cache.FORMAT_VERSION
    other.clear()
    assert not path.exists() and len(other) == 0


def test_autotune_cache_is_opt_in(monkeypatch, tmp_path):
    """Disabled by default; NVMATH_AUTOTUNE_CACHE enables it; a damaged cache file reads as empty."""
    assert not _autotune_cache.AutotuneCache().enabled or _autotune_cache.ENV_VAR in __import__("os").environ
    path = tmp_path / "env.json"
    path.write_text(_autotune_cache.MARKER + " 2, not json")
    monkeypatch.setenv(_autotune_cache.ENV_VAR, str(path))
    cache = _autotune_cache.AutotuneCache()
    assert cache.path == path and cache.lookup("x") is None


def test_problem_key_is_stable():
    """Keys depend only on the signature values."""
    k1 = _autotune_cache.problem_key(("a", 1, (2, 3)))
    assert k1 == _autotune_cache.problem_key(("a", 1, (2, 3))) and k1 != _autotune_cache.problem_key(
        ("a", 1, (3, 2))
    )


class _Op:
    """A minimal adapter stand-in for key building."""

    def __init__(self, shape, strides, ptr=4096, dtype="float32", device="cuda"):
        self.shape, self.strides, self.data_ptr, self.dtype, self.device = shape, strides, ptr, dtype, device
        self.package, self.device_id, self.is_conjugate = "torch", 0, False


def test_stateless_key_covers_what_decides_the_plan(cublaslt):
    """The stateless key changes with strides, alignment, dtype, epilog and options, not with data."""
    base = {"a": _Op((4, 3), (3, 1)), "b": _Op((3, 5), (5, 1))}
    key = _stateless.stateless_key(base)
    assert key == _stateless.stateless_key({"a": _Op((4, 3), (3, 1), ptr=8192), "b": base["b"]})
    variants = [
        {"a": _Op((4, 3), (1, 4)), "b": base["b"]},
        {"a": _Op((4, 3), (3, 1), ptr=4100), "b": base["b"]},
        {"a": _Op((4, 3), (3, 1), dtype="bfloat16"), "b": base["b"]},
    ]
    for ops in variants:
        assert _stateless.stateless_key(ops) != key
    assert _stateless.stateless_key(base, epilog=adv.MatmulEpilog.RELU) != key
    assert _stateless.stateless_key(base, options={"compute_type": 77}) != key
    assert _stateless.stateless_key(base, options=adv.MatmulOptions(allocator=_Unhashable())) is None


class _Unhashable:
    __hash__ = None

    def memalloc(self, size):  # pragma: no cover - never called
        raise NotImplementedError


class _FakePlanner:
    """Counts constructions; runs by returning its serial number."""

    made = 0

    def __init__(self, a, b, c=None, **kw):
        type(self).made += 1
        self.serial = type(self).made
        self.freed = False
        self.workspaces = kw["_workspaces"]
        self.workspace_lock = None

    def plan(self, **kw):
        self.plan_kwargs = kw

    @property
    def is_planned(self):
        return not self.freed

    def run_cached(self, a, b, c, ptrs, alpha, beta, stream, extras=None):
        return self.serial

    def free(self):
        self.freed = True


def test_stateless_cache_logic_with_a_fake_planner(monkeypatch, cublaslt):
    """Hits reuse the plan, misses build one planned with limit=1, eviction frees, disabling frees at once."""
    from nvmath._internal.tensors import dispatch

    monkeypatch.setattr(_stateless, "Matmul", _FakePlanner)
    monkeypatch.setitem(dispatch._CLASSES, _Op, None)
    monkeypatch.setattr(_stateless, "wrap", lambda x, name=None: x)
    _FakePlanner.made = 0
    cache = _stateless.MatmulPlanCache(2)
    monkeypatch.setattr(_stateless, "plan_cache", cache)
    a, b = _Op((4, 3), (3, 1)), _Op((3, 5), (5, 1))
    assert [_stateless.matmul(a, b) for _ in range(3)] == [1, 1, 1]
    assert cache.stats.hits == 2 and cache.stats.misses == 1
    first = cache.get(next(iter(cache.keys()))).planner
    assert first.workspaces is _stateless.workspaces
    assert first.plan_kwargs["preferences"].limit == 1
    _stateless.matmul(_Op((4, 3), (1, 4)), b)
    _stateless.matmul(_Op((4, 3), (3, 1), ptr=4100), b)
    assert first.freed and len(cache) == 2
    cache.enabled = False
    assert _stateless.matmul(a, b) == 4 and len(cache) == 0
