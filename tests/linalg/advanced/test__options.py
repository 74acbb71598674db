"""Tests of nvmath.linalg.advanced._options: options, preferences, scales, enums and the workspace cap."""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from pathlib import Path

import numpy as np
import pytest

from nvmath._internal.options import check_or_create_options
from nvmath.linalg.advanced import _options as O
from nvmath.linalg.advanced._options import (
    MatmulComputeType,
    MatmulEpilog,
    MatmulEpilogPreferences,
    MatmulOptions,
    MatmulPlanPreferences,
    MatmulQuantizationScales,
)

MIB = 1024 * 1024


class Allocator:
    """A minimal memory manager."""

    def memalloc(self, size):  # pragma: no cover - never called
        raise NotImplementedError


class AsyncAllocator:
    """A minimal stream-ordered memory manager."""

    def memalloc_async(self, size, stream):  # pragma: no cover - never called
        raise NotImplementedError


def test_matmul_options_fields_order_and_defaults():
    """MatmulOptions has nvmath-python 1.0's fields, in its order, with its defaults (logger None)."""
    expected = [
        ("inplace", False), ("compute_type", None), ("scale_type", None), ("result_type", None),
        ("result_amax", False), ("block_scaling", False), ("sm_count_target", 0), ("fast_accumulation", False),
        ("device_id", 0), ("handle", None), ("logger", None), ("memory_limit", "80%"), ("blocking", "auto"),
        ("allocator", None),
    ]  # fmt: skip
    assert [(f.name, f.default) for f in dataclasses.fields(MatmulOptions)] == expected


def test_options_are_mutable_and_positional():
    """Options are plain mutable dataclasses as nvmath-python's: positional fields, checked assignment."""
    opts = MatmulOptions(True)
    assert opts.inplace is True
    opts.inplace = False
    assert opts.inplace is False
    with pytest.raises(TypeError):
        opts.inplace = 1  # type: ignore[assignment]


GOOD = [
    ("inplace", True, True),
    ("compute_type", 77, MatmulComputeType.COMPUTE_32F_FAST_TF32),
    ("compute_type", MatmulComputeType.COMPUTE_64F, MatmulComputeType.COMPUTE_64F),
    ("compute_type", np.int32(68), MatmulComputeType.COMPUTE_32F),
    ("scale_type", 0, 0),
    ("result_type", 28, 28),
    ("result_amax", True, True),
    ("block_scaling", True, True),
    ("sm_count_target", 66, 66),
    ("sm_count_target", None, 0),
    ("fast_accumulation", None, False),
    ("fast_accumulation", True, True),
    ("device_id", 3, 3),
    ("handle", 0x1234, 0x1234),
    ("logger", logging.getLogger("x"), logging.getLogger("x")),
    ("memory_limit", 1 << 30, 1 << 30),
    ("memory_limit", 0.5, 0.5),
    ("memory_limit", "50%", "50%"),
    ("memory_limit", "64 MiB", "64 MiB"),
    ("memory_limit", "2gb", "2gb"),
    ("memory_limit", None, "80%"),
    ("blocking", True, True),
    ("blocking", "auto", "auto"),
]


@pytest.mark.parametrize(("field", "value", "stored"), GOOD, ids=[f"{f}={v!r}" for f, v, _ in GOOD])
def test_good_option_values(field, value, stored):
    """Each accepted value is stored (ints converted to enums, None fields reset to defaults)."""
    assert getattr(MatmulOptions(**{field: value}), field) == stored


def test_allocators_accepted():
    """Objects with memalloc or memalloc_async are accepted as allocators."""
    for alloc in (Allocator(), AsyncAllocator()):
        assert MatmulOptions(allocator=alloc).allocator is alloc


BAD = [
    ("inplace", 1, TypeError, "1"),
    ("inplace", "yes", TypeError, "'yes'"),
    ("compute_type", 999, ValueError, "999"),
    ("compute_type", "COMPUTE_32F", TypeError, "'COMPUTE_32F'"),
    ("compute_type", 68.0, TypeError, "68.0"),
    ("scale_type", 99, ValueError, "99"),
    ("result_type", True, TypeError, "True"),
    ("result_type", -2, ValueError, "-2"),
    ("result_amax", None, TypeError, "None"),
    ("block_scaling", 0, TypeError, "0"),
    ("sm_count_target", -1, ValueError, "-1"),
    ("sm_count_target", 1.5, TypeError, "1.5"),
    ("fast_accumulation", "on", TypeError, "'on'"),
    ("device_id", -1, ValueError, "-1"),
    ("device_id", None, TypeError, "None"),
    ("device_id", True, TypeError, "True"),
    ("handle", -5, ValueError, "-5"),
    ("handle", "h", TypeError, "'h'"),
    ("handle", 2**64, ValueError, "18446744073709551616"),
    ("logger", "root", TypeError, "'root'"),
    ("memory_limit", 0, ValueError, "0"),
    ("memory_limit", 1.5, ValueError, "1.5"),
    ("memory_limit", "lots", ValueError, "'lots'"),
    ("memory_limit", "120%", ValueError, "'120%'"),
    ("memory_limit", [1], TypeError, "list"),
    ("blocking", False, ValueError, "False"),
    ("blocking", 1, ValueError, "1"),
    ("blocking", "yes", ValueError, "'yes'"),
    ("allocator", object(), TypeError, "memalloc"),
]


@pytest.mark.parametrize(("field", "value", "exc", "match"), BAD, ids=[f"{f}={v!r}" for f, v, _, _ in BAD])
def test_bad_option_values(field, value, exc, match):
    """Each rejected value raises the documented exception type with the value in the message."""
    with pytest.raises(exc) as info:
        MatmulOptions(**{field: value})
    assert match in str(info.value), str(info.value)


def test_dict_equivalence():
    """A dict of fields creates the same options as the keyword arguments; unknown keys are a TypeError."""
    fields = {"compute_type": 77, "memory_limit": "1 GiB", "blocking": True, "sm_count_target": 8}
    assert check_or_create_options(MatmulOptions, fields, "matmul options") == MatmulOptions(**fields)
    assert check_or_create_options(
        MatmulPlanPreferences, {"limit": 2}, "preferences"
    ) == MatmulPlanPreferences(limit=2)
    with pytest.raises(TypeError, match="'inplac'"):
        check_or_create_options(MatmulOptions, {"inplac": True}, "matmul options")


def test_default_logger_is_package_logger():
    """logger=None means the 'nvmath.linalg.advanced' logger, never the root logger."""
    from nvmath._internal.logging import get_logger

    logger = get_logger(O.LOGGER_NAME, MatmulOptions().logger)  # what Matmul does with its options
    assert logger.name == "nvmath.linalg.advanced" and logger is not logging.getLogger()
    mine = logging.getLogger("mine")
    assert get_logger(O.LOGGER_NAME, mine) is mine


@pytest.mark.parametrize(
    ("limit", "device", "expected"),
    [
        ("80%", 141 * 1024**3, 32 * MIB),
        (" 80% ", 141 * 1024**3, 32 * MIB),
        ("80%", 10 * MIB, 8 * MIB),
        ("1 GiB", 141 * 1024**3, 1024**3),
        ("50%", 100 * MIB, 50 * MIB),
        (0.25, 100 * MIB, 25 * MIB),
        (4096, 100 * MIB, 4096),
    ],
)
def test_workspace_limit(limit, device, expected):
    """The default '80%' is capped at 32 MiB; any other memory_limit is used as given."""
    assert O.workspace_limit_bytes(limit, device) == expected
    assert O.DEFAULT_WORKSPACE_CAP == 32 * MIB


@pytest.mark.parametrize(
    ("limit", "device", "expected"),
    [("80%", 141 * 1024**3, 1024**3), ("80%", 100 * MIB, 80 * MIB), ("2 GiB", 141 * 1024**3, 2 * 1024**3)],
)
def test_autotune_workspace_limit(limit, device, expected):
    """autotune's extra candidates may use up to 1 GiB under the default (within 80%); an explicit limit
    is the same for planning and autotuning."""
    assert O.workspace_limit_bytes(limit, device, autotune=True) == expected
    assert O.AUTOTUNE_WORKSPACE_CAP == 1024 * MIB


def test_plan_preferences_defaults_and_none_reset():
    """MatmulPlanPreferences has nvmath-python's fields and defaults; None fields are reset."""
    names = [f.name for f in dataclasses.fields(MatmulPlanPreferences)]
    assert names == ["reduction_scheme_mask", "max_waves_count", "numerical_impl_mask", "limit", "epilog"]
    p = MatmulPlanPreferences(
        reduction_scheme_mask=None, max_waves_count=None, numerical_impl_mask=None, limit=None
    )
    assert p == MatmulPlanPreferences()
    assert (p.reduction_scheme_mask, p.max_waves_count, p.numerical_impl_mask, p.limit) == (
        7,
        0.0,
        2**64 - 1,
        8,
    )
    assert p.epilog == MatmulEpilogPreferences()


def test_plan_preferences_epilog_from_dict():
    """The epilog preferences may be given as a dict of fields."""
    p = MatmulPlanPreferences(epilog={"aux_type": 14, "aux_amax": False})
    assert p.epilog == MatmulEpilogPreferences(aux_type=14)


BAD_PREFS = [
    ({"limit": 0}, ValueError, "0"),
    ({"limit": 2.0}, TypeError, "2.0"),
    ({"reduction_scheme_mask": 8}, ValueError, "8"),
    ({"max_waves_count": -1.0}, ValueError, "-1.0"),
    ({"max_waves_count": math.inf}, ValueError, "inf"),
    ({"max_waves_count": "1"}, TypeError, "'1'"),
    ({"numerical_impl_mask": 2**64}, ValueError, str(2**64)),
    ({"epilog": {"aux": 1}}, TypeError, "'aux'"),
    ({"epilog": 3}, TypeError, "3"),
    ({"epilog": {"aux_type": 1000}}, ValueError, "1000"),
    ({"epilog": {"aux_amax": "no"}}, TypeError, "'no'"),
]


@pytest.mark.parametrize(("kw", "exc", "match"), BAD_PREFS, ids=[str(k) for k, _, _ in BAD_PREFS])
def test_bad_plan_preferences(kw, exc, match):
    """Bad preference values raise with the value in the message."""
    with pytest.raises(exc) as info:
        MatmulPlanPreferences(**kw)
    assert match in str(info.value)


def test_quantization_scales_accept_numbers_and_tensors():
    """Scales may be numbers or tensor-like objects; given() lists the set ones."""
    s = MatmulQuantizationScales(a=2, b=0.5, d=np.ones(1, dtype=np.float32))
    assert s.given() == frozenset({"a", "b", "d"})


@pytest.mark.parametrize(
    ("kw", "exc", "match"),
    [({"a": "1"}, TypeError, "'1'"), ({"b": True}, TypeError, "True"), ({"c": 0.0}, ValueError, "0.0"),
     ({"d": math.nan}, ValueError, "nan"), ({"a": 1j}, TypeError, "1j")],
)  # fmt: skip
def test_bad_quantization_scales(kw, exc, match):
    """Non-numeric, boolean, zero, NaN or complex scales are rejected, naming the value."""
    with pytest.raises(exc) as info:
        MatmulQuantizationScales(**kw)
    assert match in str(info.value)


def test_matrix_qualifiers_dtype():
    """matrix_qualifiers_dtype has the (structure, is_conjugate) fields."""
    assert O.matrix_qualifiers_dtype.names == ("structure", "is_conjugate")
    assert O.matrix_qualifiers_dtype["is_conjugate"] == np.dtype("<i4")


EPILOG_VALUES = {"DEFAULT": 1, "RELU": 2, "RELU_AUX": 130, "BIAS": 4, "RELU_BIAS": 6, "RELU_AUX_BIAS": 134, "DRELU": 136,
                     "DRELU_BGRAD": 152, "GELU": 32, "GELU_AUX": 160, "GELU_BIAS": 36, "GELU_AUX_BIAS": 164, "DGELU": 192,
                     "DGELU_BGRAD": 208, "BGRADA": 256, "BGRADB": 512}  # fmt: skip


def test_epilog_values():
    """MatmulEpilog has exactly the documented members and values."""
    assert {e.name: e.value for e in MatmulEpilog} == EPILOG_VALUES


def _header(name):
    nvidia = pytest.importorskip("nvidia", reason="no nvidia-* wheel is installed (pip install -e . installs them)")
    for root in nvidia.__path__:
        path = Path(root) / "cu13" / "include" / name
        if path.exists():
            return path.read_text()
    pytest.skip(f"needs CUDA's header {name} (pip install -r tools/bindings-requirements.txt)")


def _c_enum(text, prefix):
    """name -> value of `PREFIX_NAME = <int>` lines of a C header (literal values only)."""
    return {
        m.group(1): int(m.group(2), 0)
        for m in re.finditer(rf"\b{prefix}([A-Z0-9_]+)\s*=\s*(0x[0-9a-fA-F]+|\d+)\s*,", text)
    }


def test_compute_type_values_match_cublas_api_h():
    """MatmulComputeType matches cublasComputeType_t in cublas_api.h, newer emulated types included."""
    values = _c_enum(_header("cublas_api.h"), "CUBLAS_")
    values = {k: v for k, v in values.items() if k.startswith("COMPUTE_")}
    assert values == {c.name: c.value for c in MatmulComputeType}


def test_epilog_values_match_cublaslt_h():
    """cublasLtEpilogue_t (composite values like RELU | 128 evaluated) equals MatmulEpilog."""
    text = _header("cublasLt.h")
    values: dict[str, int] = {}
    for name, expr in re.findall(r"\bCUBLASLT_EPILOGUE_([A-Z0-9_]+)\s*=\s*([^,]+),", text):
        expr = re.sub(r"CUBLASLT_EPILOGUE_([A-Z0-9_]+)", lambda m: str(values[m.group(1)]), expr)
        assert re.fullmatch(r"[\d\s|()]+", expr), expr
        values[name] = eval(expr, {"__builtins__": {}})
    assert values == EPILOG_VALUES


def test_reduction_scheme_and_inner_shape_values_match_cublaslt_h():
    """MatmulReductionScheme and MatmulInnerShape match cublasLt.h."""
    text = _header("cublasLt.h")
    reds = _c_enum(text, "CUBLASLT_REDUCTION_SCHEME_")
    assert reds == {r.name: r.value for r in O.MatmulReductionScheme}
    shapes = _c_enum(text, "CUBLASLT_MATMUL_INNER_SHAPE_")
    assert shapes == {s.name: s.value for s in O.MatmulInnerShape}


def test_numerical_impl_flags_match_cublaslt_h():
    """MatmulNumericalImplFlags bits match CUBLASLT_NUMERICAL_IMPL_FLAGS_* in cublasLt.h."""
    text = _header("cublasLt.h")
    found = {m.group(1): int(m.group(2), 16) << int(m.group(3))
             for m in re.finditer(r"CUBLASLT_NUMERICAL_IMPL_FLAGS_(\w+) \((0x[0-9a-f]+)ull << (\d+)\)", text)}  # fmt: skip
    ours = {name.replace("OP_TYPE_TENSOR_", "").replace("OP_TYPE_FMA", "FMA"): f.value
            for name, f in O.MatmulNumericalImplFlags.__members__.items()}  # fmt: skip
    ours["TENSOR_OP_MASK"] = ours.pop("MASK")
    for name, value in found.items():
        assert ours[name] == value, name
