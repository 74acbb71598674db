"""Coverage and conventions: every function and enum declared in the pinned headers is bound
(minus the documented exclusions), under the nvmath-python names."""

from __future__ import annotations

import ctypes
import importlib

import gen_bindings
import pytest

SPECS = {spec.module: spec for spec in gen_bindings.MODULES}


def bound_symbols(module) -> set[str]:
    return {name[3:] for name in vars(module) if name.startswith("_p_")}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_declared_function_is_bound(name: str, headers) -> None:
    """Declared functions minus EXCLUDED are exactly the bound symbols, each with its Python wrapper."""
    spec = SPECS[name]
    module = importlib.import_module(f"nvmath.bindings.{name}")
    declared = {f.name for f in gen_bindings.declared_functions(headers, spec)}
    declared |= set(gen_bindings.inline_functions(headers, spec))
    expected = declared - set(gen_bindings.EXCLUDED)
    assert bound_symbols(module) == expected
    for symbol in expected:
        assert callable(getattr(module, gen_bindings.python_name(symbol, spec.prefix)))


def test_coverage_numbers(headers, include_dir) -> None:
    """Coverage per library is declared = bound + excluded, and most of each library is bound."""
    for module, (declared, bound, excluded) in gen_bindings.coverage(include_dir).items():
        assert declared == bound + excluded, module
        assert bound >= 0.85 * declared, module


def test_exclusions_are_justified(headers) -> None:
    """Each excluded function is a static inline helper or really absent from the shipped library."""
    from nvmath.bindings import _loader

    inline = {n for spec in gen_bindings.MODULES for n in gen_bindings.inline_functions(headers, spec)}
    owners = {
        f.name: spec.library
        for spec in gen_bindings.MODULES
        for f in gen_bindings.declared_functions(headers, spec)
    }
    for symbol, reason in gen_bindings.EXCLUDED.items():
        assert reason
        if symbol in inline:
            continue
        library = _loader._library(owners[symbol]).cdll()
        assert not hasattr(library, symbol), f"{symbol} is exported: bind it instead of excluding it"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_bound_symbols_exist_in_pinned_library(name: str, headers) -> None:
    """Every bound symbol is exported by the pinned library the bindings were generated for."""
    from nvmath.bindings import _loader

    module = importlib.import_module(f"nvmath.bindings.{name}")
    library = _loader._library(SPECS[name].library).cdll()
    missing = sorted(s for s in bound_symbols(module) if not hasattr(library, s))
    assert not missing


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_declared_enum_is_bound(name: str, headers) -> None:
    """Every enum of a module's headers is an IntEnum of the module with the same values."""
    spec = SPECS[name]
    module = importlib.import_module(f"nvmath.bindings.{name}")
    for header in spec.headers:
        for enum in headers.headers[header].enums:
            cls = getattr(module, gen_bindings.enum_class_name(enum.name))
            assert sorted(int(m) for m in cls.__members__.values()) == sorted(m.value for m in enum.members)


@pytest.mark.parametrize(
    ("module", "c_name", "py_name"),
    [
        ("cublasLt", "cublasLtMatmulDescCreate", "matmul_desc_create"),
        ("cufft", "cufftXtMakePlanMany", "xt_make_plan_many"),
        ("cusolverDn", "cusolverDnXpotrf_bufferSize", "xpotrf_buffer_size"),
        ("cublas", "cublasDgemm_v2", "dgemm"),
        ("cublas", "cublasDgemm_v2_64", "dgemm_64"),
        ("cublas", "cublasNrm2Ex", "nrm2_ex"),
        ("cublas", "cublasHSHgemvBatched", "hshgemv_batched"),
        ("cusolverDn", "cusolverDnZZgesv_bufferSize", "zzgesv_buffer_size"),
        ("cusolverDn", "cusolverDnIRSXgesv", "irs_xgesv"),
        ("cufft", "cufftExecC2C", "exec_c2c"),
        ("cufft", "cufftXtSetGPUs", "xt_set_gpus"),
    ],
)
def test_function_names(module: str, c_name: str, py_name: str) -> None:
    """C names map to the nvmath-python names: prefix stripped, ``_v2`` dropped, snake_case."""
    assert gen_bindings.python_name(c_name, SPECS[module].prefix) == py_name
    assert callable(getattr(importlib.import_module(f"nvmath.bindings.{module}"), py_name))


def test_enum_names() -> None:
    """Enum classes and members follow the nvmath-python naming."""
    from nvmath.bindings import cublas, cublasLt, cufft, cusolver

    assert cublasLt.Epilogue.RELU_BIAS == 6
    assert cublas.ComputeType.COMPUTE_32F == 68
    assert cufft.Type.C2C == 0x29
    assert cusolver.EigMode.NOVECTOR == 0
    assert cublas.CudaDataType.R_32F == 0
    assert cublas.LibraryPropertyType.PATCH_LEVEL == 2
    assert cublasLt.MatmulDescAttribute.EPILOGUE == 7
    assert cublasLt.MatrixLayoutAttribute.LD == 4
    assert cublasLt.MatmulTile.TILE_8x8 == 1
    assert cublasLt.ComputeType is cublas.ComputeType and cublasLt.CudaDataType is cublas.CudaDataType


def test_epilogue_values_match_design() -> None:
    """cuBLASLt epilogue values are the MatmulEpilog values of DESIGN.md."""
    from nvmath.bindings import cublasLt

    design = {
        "DEFAULT": 1,
        "RELU": 2,
        "RELU_AUX": 130,
        "BIAS": 4,
        "RELU_BIAS": 6,
        "RELU_AUX_BIAS": 134,
        "DRELU": 136,
        "DRELU_BGRAD": 152,
        "GELU": 32,
        "GELU_AUX": 160,
        "GELU_BIAS": 36,
        "GELU_AUX_BIAS": 164,
        "DGELU": 192,
        "DGELU_BGRAD": 208,
        "BGRADA": 256,
        "BGRADB": 512,
    }
    assert {m.name: m.value for m in cublasLt.Epilogue} == design


def test_struct_dtypes_have_c_layout() -> None:
    """The struct dtypes have the C sizes (algo 64 bytes, heuristic result 96 bytes)."""
    from nvmath.bindings import cublasLt, cufft

    assert cublasLt.matmul_algo_dtype.itemsize == 64
    result = cublasLt.matmul_heuristic_result_dtype
    assert result.itemsize == 96
    assert result.names == ("algo", "workspace_size", "state", "waves_count", "reserved")
    assert result.fields["workspace_size"][1] == 64
    assert cublasLt.matrix_layout_opaque_dtype.itemsize == 14 * 8
    assert cufft.xt1d_factors_dtype.itemsize == 10 * 8 + 4 * 4
    assert cufft.cuda_lib_xt_desc_dtype.itemsize == 32  # int, pad, ptr, enum, int, ptr
    assert cufft.cuda_xt_desc_dtype.itemsize == ctypes.sizeof(ctypes.c_int) * 66 + 8 * 129
