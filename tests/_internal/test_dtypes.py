"""Tests of nvmath._internal.dtypes: canonical names, cudaDataType values, numpy / torch / DLPack maps."""

from __future__ import annotations

import pathlib
import re
import sys

import numpy as np
import pytest

from nvmath._internal import dtypes

EXPECTED_CUDA = {
    "float16": 2,
    "bfloat16": 14,
    "float32": 0,
    "float64": 1,
    "complex32": 6,
    "complex64": 4,
    "complex128": 5,
    "float8_e4m3fn": 28,
    "float8_e5m2": 29,
    "int8": 3,
    "int32": 10,
    "uint8": 8,
    "int16": 20,
    "int64": 24,
    "uint32": 12,
}
ITEMSIZES = {
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "complex32": 4,
    "complex64": 8,
    "complex128": 16,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint8": 1,
    "uint32": 4,
    "bool": 1,
}


def test_names_cover_the_required_set():
    """Every dtype the planners need has a canonical name."""
    assert set(EXPECTED_CUDA) <= set(dtypes.DTYPE_NAMES)


@pytest.mark.parametrize("name", sorted(ITEMSIZES))
def test_itemsize(name):
    """itemsize() gives the element size in bytes for every canonical name."""
    assert dtypes.itemsize(name) == ITEMSIZES[name]


@pytest.mark.parametrize("name,value", sorted(EXPECTED_CUDA.items()))
def test_cuda_data_type_values_and_round_trip(name, value):
    """cuda_data_type() returns the library_types.h value and from_cuda_data_type() inverts it."""
    assert dtypes.cuda_data_type(name) == value
    assert dtypes.from_cuda_data_type(value) == name


def _library_types_header() -> pathlib.Path | None:
    for root in [pathlib.Path(p) for p in sys.path] + [pathlib.Path("/usr/local/cuda/include")]:
        for candidate in (root / "nvidia/cu13/include/library_types.h", root / "library_types.h"):
            if candidate.is_file():
                return candidate
    return None


def test_enum_matches_installed_header():
    """CudaDataType agrees with every CUDA_* value of the installed library_types.h."""
    header = _library_types_header()
    if header is None:
        pytest.skip("needs CUDA's header library_types.h (pip install -r tools/bindings-requirements.txt)")
    text = header.read_text()
    body = text[text.index("typedef enum cudaDataType_t") :]
    body = body[: body.index("} cudaDataType;")]
    values = dict(re.findall(r"(CUDA_[RC]_\w+)\s*=\s*(\d+)", body))
    assert values, "no values parsed"
    for name, value in values.items():
        assert dtypes.CudaDataType[name] == int(value), name


def test_kind_predicates():
    """is_complex / is_real / is_float8 / is_floating classify the names."""
    assert dtypes.is_complex("complex32") and not dtypes.is_complex("float16")
    assert dtypes.is_real("int8") and not dtypes.is_real("complex64")
    assert dtypes.is_float8("float8_e5m2") and not dtypes.is_float8("bfloat16")
    assert dtypes.is_floating("float8_e4m3fn") and not dtypes.is_floating("int32")


def test_complex_real_counterparts():
    """to_complex / to_real map between the real and complex families, both ways."""
    for real, cplx in [("float16", "complex32"), ("float32", "complex64"), ("float64", "complex128")]:
        assert dtypes.to_complex(real) == cplx
        assert dtypes.to_real(cplx) == real
        assert dtypes.to_complex(cplx) == cplx
        assert dtypes.to_real(real) == real
    with pytest.raises(ValueError, match="no complex counterpart"):
        dtypes.to_complex("bfloat16")
    with pytest.raises(ValueError, match="neither complex nor real"):
        dtypes.to_real("int8")


def test_unknown_name_lists_known_ones():
    """An unknown name raises ValueError listing the known names."""
    with pytest.raises(ValueError, match="float32"):
        dtypes.itemsize("float128")
    with pytest.raises(ValueError, match="no cudaDataType"):
        dtypes.cuda_data_type("bool")
    with pytest.raises(ValueError):
        dtypes.from_cuda_data_type(99)


@pytest.mark.parametrize("name", sorted(set(ITEMSIZES) - {"complex32"}))
def test_numpy_round_trip(name):
    """to_numpy_dtype() and numpy_dtype_name() invert each other (bf16 / fp8 through ml_dtypes)."""
    pytest.importorskip("ml_dtypes")
    dt = dtypes.to_numpy_dtype(name)
    assert dt.itemsize == ITEMSIZES[name]
    assert dtypes.numpy_dtype_name(dt) == name
    assert dtypes.numpy_dtype_name(np.empty(2, dtype=dt).dtype) == name


def test_ml_dtypes_types_are_the_ml_dtypes_ones():
    """bfloat16 and fp8 map to the ml_dtypes scalar types."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert dtypes.to_numpy_dtype("bfloat16") == np.dtype(ml_dtypes.bfloat16)
    assert dtypes.to_numpy_dtype("float8_e4m3fn") == np.dtype(ml_dtypes.float8_e4m3fn)
    assert dtypes.to_numpy_dtype("float8_e5m2") == np.dtype(ml_dtypes.float8_e5m2)


def test_numpy_rejections():
    """complex32 has no numpy dtype; swapped byte order and strings are rejected with ValueError."""
    with pytest.raises(ValueError, match="complex32"):
        dtypes.to_numpy_dtype("complex32")
    with pytest.raises(ValueError, match="byte order"):
        dtypes.numpy_dtype_name(np.dtype(">f4") if sys.byteorder == "little" else np.dtype("<f4"))
    with pytest.raises(ValueError, match="not supported"):
        dtypes.numpy_dtype_name(np.dtype("U3"))


@pytest.mark.parametrize(
    "name",
    [
        "float16",
        "bfloat16",
        "float32",
        "float64",
        "complex32",
        "complex64",
        "complex128",
        "float8_e4m3fn",
        "float8_e5m2",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "bool",
    ],
)
def test_torch_round_trip(name, torch):
    """to_torch_dtype() and torch_dtype_info() invert each other and agree on the item size."""
    tdt = dtypes.to_torch_dtype(name)
    got, size, cplx = dtypes.torch_dtype_info(tdt)
    assert got == name
    assert size == tdt.itemsize == ITEMSIZES[name]
    assert cplx == dtypes.is_complex(name)


def test_torch_unsupported_dtype(torch):
    """A torch dtype with no canonical name raises ValueError."""
    with pytest.raises(ValueError, match="not supported"):
        dtypes.torch_dtype_info(torch.quint8)


@pytest.mark.parametrize("name", sorted(ITEMSIZES))
def test_dlpack_round_trip(name):
    """dlpack_dtype() and from_dlpack_dtype() invert each other; bits match the item size."""
    code, bits, lanes = dtypes.dlpack_dtype(name)
    assert lanes == 1 and bits == 8 * ITEMSIZES[name]
    assert dtypes.from_dlpack_dtype(code, bits, lanes) == name


def test_dlpack_unsupported():
    """Vector lanes and unknown codes are rejected."""
    with pytest.raises(ValueError):
        dtypes.from_dlpack_dtype(2, 32, 4)
    with pytest.raises(ValueError):
        dtypes.from_dlpack_dtype(3, 64)
