"""cuBLASLt attributes without a GPU: create-set-get-destroy round trips for every attribute of
every descriptor kind, the attribute dtype helpers, and the struct dtypes through np.save/np.load."""

from __future__ import annotations

import io

import numpy as np
import pytest

from nvmath.bindings import _loader, cublas, cublasLt

KINDS = {
    "matmul_desc": (
        lambda: cublasLt.matmul_desc_create(cublas.ComputeType.COMPUTE_32F, cublas.CudaDataType.R_32F),
        cublasLt.matmul_desc_destroy,
        cublasLt.MatmulDescAttribute,
    ),
    "matrix_layout": (
        lambda: cublasLt.matrix_layout_create(cublas.CudaDataType.R_32F, 4, 4, 4),
        cublasLt.matrix_layout_destroy,
        cublasLt.MatrixLayoutAttribute,
    ),
    "matmul_preference": (
        cublasLt.matmul_preference_create,
        cublasLt.matmul_preference_destroy,
        cublasLt.MatmulPreferenceAttribute,
    ),
    "matrix_transform_desc": (
        lambda: cublasLt.matrix_transform_desc_create(cublas.CudaDataType.R_32F),
        cublasLt.matrix_transform_desc_destroy,
        cublasLt.MatrixTransformDescAttribute,
    ),
    "emulation_desc": (
        cublasLt.emulation_desc_create,
        cublasLt.emulation_desc_destroy,
        cublasLt.EmulationDescAttribute,
    ),
}
CASES = [(kind, attr) for kind, (_, _, enum) in KINDS.items() for attr in enum]


def unknown_to_loaded_library(exc: Exception, attr) -> None:
    """Skip when an older cuBLASLt than the headers rejects an attribute it does not know yet."""
    loaded = _loader.library_info("cublasLt")["version"]
    status = getattr(exc, "status", None)
    if loaded != cublasLt.HEADER_VERSION and status == cublas.Status.INVALID_VALUE:
        pytest.skip(
            f"{attr!r} is unknown to the loaded cuBLASLt {loaded} (headers: {cublasLt.HEADER_VERSION})"
        )


def new_value(dtype: np.dtype, before):
    """A valid value different from ``before`` (the library validates some attributes)."""
    if dtype.kind == "f":
        return 0.5 if before != 0.5 else 0.25
    return 1 if before != 1 else 2


@pytest.mark.parametrize(("kind", "attr"), CASES, ids=[f"{k}-{a.name}" for k, a in CASES])
def test_attribute_round_trip(kind: str, attr) -> None:
    """Setting an attribute with the helper's dtype and reading it back gives the value set."""
    create, destroy, _ = KINDS[kind]
    get_dtype = getattr(cublasLt, f"get_{kind}_attribute_dtype")
    set_value, get_value = getattr(cublasLt, f"{kind}_set"), getattr(cublasLt, f"{kind}_get")
    obj = create()
    try:
        try:
            before = get_value(obj, attr)
        except cublasLt.cuBLASLtError as exc:
            unknown_to_loaded_library(exc, attr)
            raise
        value = new_value(get_dtype(attr), before)
        set_value(obj, attr, value)
        assert get_value(obj, attr) == value
    finally:
        destroy(obj)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_raw_get_reports_the_dtype_size(kind: str) -> None:
    """The raw ``*_get_attribute(obj, attr, 0, 0)`` size query equals each helper dtype's itemsize."""
    create, destroy, enum = KINDS[kind]
    raw_get = getattr(cublasLt, f"{kind}_get_attribute")
    get_dtype = getattr(cublasLt, f"get_{kind}_attribute_dtype")
    obj = create()
    loaded = _loader.library_info("cublasLt")["version"]
    try:
        for attr in enum:
            try:
                size = raw_get(obj, attr, 0, 0)
            except cublasLt.cuBLASLtError:
                assert loaded != cublasLt.HEADER_VERSION, attr.name  # only an older library may not know it
                continue
            assert size == get_dtype(attr).itemsize, attr.name
    finally:
        destroy(obj)


def test_raw_set_get_take_buffer_addresses_only() -> None:
    """The raw set/get functions take a buffer's address (int); a numpy array itself is refused."""
    layout = cublasLt.matrix_layout_create(cublas.CudaDataType.R_32F, 4, 4, 4)
    try:
        rows = np.array([123], dtype=np.uint64)
        attr = cublasLt.MatrixLayoutAttribute.ROWS
        cublasLt.matrix_layout_set_attribute(layout, attr, rows.ctypes.data, rows.nbytes)
        out = np.zeros(1, dtype=np.uint64)
        written = cublasLt.matrix_layout_get_attribute(layout, attr, out.ctypes.data, out.nbytes)
        assert written == 8 and out[0] == 123
        with pytest.raises(TypeError, match=r"matrix_layout_set_attribute\(\): parameter buf .*ndarray"):
            cublasLt.matrix_layout_set_attribute(layout, attr, rows, rows.nbytes)
    finally:
        cublasLt.matrix_layout_destroy(layout)


@pytest.mark.parametrize("value", [3.7, -1, 2**64, "x", [1.5]])
def test_attribute_setter_refuses_mangled_values(value) -> None:
    """An integer attribute is never truncated or wrapped: floats and strings are a TypeError,
    out-of-range integers an OverflowError, and the stored value is unchanged."""
    layout = cublasLt.matrix_layout_create(cublas.CudaDataType.R_32F, 4, 4, 4)
    try:
        attr = cublasLt.MatrixLayoutAttribute.ROWS
        with pytest.raises((TypeError, OverflowError), match="matrix_layout_set"):
            cublasLt.matrix_layout_set(layout, attr, value)
        assert cublasLt.matrix_layout_get(layout, attr) == 4
    finally:
        cublasLt.matrix_layout_destroy(layout)


def test_algo_config_round_trip() -> None:
    """Algorithm configuration attributes round-trip on a numpy-held algo; the algo id is read-only."""
    held = np.zeros(1, dtype=cublasLt.matmul_algo_dtype)
    algo = held.ctypes.data
    for attr in cublasLt.MatmulAlgoConfigAttribute:
        if attr == cublasLt.MatmulAlgoConfigAttribute.ID:
            assert cublasLt.matmul_algo_config_get(algo, attr) == 0
            with pytest.raises(cublasLt.cuBLASLtError):
                cublasLt.matmul_algo_config_set(algo, attr, 1)
            continue
        cublasLt.matmul_algo_config_set(algo, attr, 1)
        assert cublasLt.matmul_algo_config_get(algo, attr) == 1


def test_dtype_helpers() -> None:
    """The dtype helpers read the C type documented for each attribute in cublasLt.h."""
    assert cublasLt.get_matmul_desc_attribute_dtype(cublasLt.MatmulDescAttribute.EPILOGUE) == np.uint32
    assert cublasLt.get_matmul_desc_attribute_dtype(cublasLt.MatmulDescAttribute.BIAS_POINTER) == np.intp
    assert cublasLt.get_matmul_desc_attribute_dtype(cublasLt.MatmulDescAttribute.FAST_ACCUM) == np.int8
    assert cublasLt.get_matrix_layout_attribute_dtype(cublasLt.MatrixLayoutAttribute.ROWS) == np.uint64
    assert (
        cublasLt.get_matmul_preference_attribute_dtype(cublasLt.MatmulPreferenceAttribute.MAX_WAVES_COUNT)
        == np.float32
    )
    assert cublasLt.get_matmul_algo_cap_attribute_dtype(cublasLt.MatmulAlgoCapAttribute.TILE_IDS) == np.uint32
    assert (
        cublasLt.get_matmul_algo_config_attribute_dtype(cublasLt.MatmulAlgoConfigAttribute.CLUSTER_SHAPE_ID)
        == np.uint16
    )
    assert cublasLt.get_matmul_desc_attribute_dtype(7) == np.uint32  # plain ints work too
    with pytest.raises(ValueError, match="unknown attribute"):
        cublasLt.get_matmul_desc_attribute_dtype(9999)


def test_heuristic_result_dtype_round_trips_through_npy() -> None:
    """Heuristic results (and so algorithms) survive np.save / np.load bit for bit."""
    dtype = cublasLt.matmul_heuristic_result_dtype
    results = np.zeros(3, dtype=dtype)
    results.view(np.uint8)[:] = np.random.default_rng(0).integers(0, 256, results.nbytes, dtype=np.uint8)
    results["state"] = 0
    results["waves_count"] = [0.5, 1.0, 2.0]
    buffer = io.BytesIO()
    np.save(buffer, results)
    buffer.seek(0)
    loaded = np.load(buffer)
    assert loaded.dtype == dtype
    assert loaded.tobytes() == results.tobytes()
    algos = loaded["algo"]
    assert algos.dtype == cublasLt.matmul_algo_dtype and algos.itemsize == 64
