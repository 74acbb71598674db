"""Tests of nvmath.linalg.advanced._typemaps: supported dtype combinations, defaults and D rules."""

from __future__ import annotations

import itertools
import re
import warnings
from pathlib import Path

import pytest

from nvmath._internal.dtypes import CudaDataType as DT
from nvmath.linalg.advanced import _typemaps as TM
from nvmath.linalg.advanced._options import MatmulComputeType as CT

F16, BF16, F32, F64, C64, C128 = "float16", "bfloat16", "float32", "float64", "complex64", "complex128"
E4, E5 = "float8_e4m3fn", "float8_e5m2"
ALL = (F16, BF16, F32, F64, C64, C128, E4, E5, "complex32", "int8")

# The nvmath-python 1.0 default table (fact sheet section 2.7)
DEFAULTS = {
    (E4, E4): (CT.COMPUTE_32F, DT.CUDA_R_32F),
    (E4, E5): (CT.COMPUTE_32F, DT.CUDA_R_32F),
    (E5, E4): (CT.COMPUTE_32F, DT.CUDA_R_32F),
    (BF16, BF16): (CT.COMPUTE_32F, DT.CUDA_R_32F),
    (F16, F16): (CT.COMPUTE_32F, DT.CUDA_R_32F),
    (F32, F32): (CT.COMPUTE_32F, DT.CUDA_R_32F),
    (F64, F64): (CT.COMPUTE_64F, DT.CUDA_R_64F),
    (C64, C64): (CT.COMPUTE_32F, DT.CUDA_C_32F),
    (C128, C128): (CT.COMPUTE_64F, DT.CUDA_C_64F),
}


def expected_supported(ct, st, a, b):
    """An independent statement of which (compute, scale, A, B) cuBLASLt supports (fact sheet 2.7)."""
    if (a, b) not in DEFAULTS:
        return False
    fast = {
        CT.COMPUTE_32F_FAST_16F,
        CT.COMPUTE_32F_FAST_16BF,
        CT.COMPUTE_32F_FAST_TF32,
        CT.COMPUTE_32F_EMULATED_16BFX9,
    }
    if ct in (CT.COMPUTE_16F, CT.COMPUTE_16F_PEDANTIC):
        return a == F16 and st == DT.CUDA_R_16F
    if ct in (CT.COMPUTE_32F, CT.COMPUTE_32F_PEDANTIC):
        if a in (E4, E5) or b in (E4, E5):
            return ct == CT.COMPUTE_32F and st == DT.CUDA_R_32F
        return (a in (F32, BF16, F16) and st == DT.CUDA_R_32F) or (a == C64 and st == DT.CUDA_C_32F)
    if ct in fast:
        return (a == F32 and st == DT.CUDA_R_32F) or (a == C64 and st == DT.CUDA_C_32F)
    if ct in (CT.COMPUTE_64F, CT.COMPUTE_64F_PEDANTIC, CT.COMPUTE_64F_EMULATED_FIXEDPOINT):
        return (a == F64 and st == DT.CUDA_R_64F) or (a == C128 and st == DT.CUDA_C_64F)
    return False


@pytest.mark.parametrize(("pair", "default"), list(DEFAULTS.items()))
def test_default_compute_and_scale(pair, default):
    """Every supported (A, B) pair has nvmath-python's default compute and scale types."""
    assert TM.default_compute_and_scale(*pair) == default
    assert TM.is_supported(*default, *pair)


def test_supported_pairs_are_exactly_the_table():
    """SUPPORTED_AB_PAIRS holds exactly the nine documented pairs (e5m2 x e5m2 excluded)."""
    assert set(TM.SUPPORTED_AB_PAIRS) == set(DEFAULTS) and (E5, E5) not in TM.SUPPORTED_AB_PAIRS


@pytest.mark.parametrize(("a", "b"), [p for p in itertools.product(ALL, ALL) if p not in DEFAULTS])
def test_unsupported_pairs_raise_listing_supported(a, b):
    """An unsupported (A, B) pair raises ValueError naming both dtypes and listing the supported pairs."""
    with pytest.raises(ValueError) as info:
        TM.default_compute_and_scale(a, b)
    msg = str(info.value)
    assert f"a={a}, b={b}" in msg and "(bfloat16, bfloat16)" in msg
    if a == b == E5:
        assert "e5m2 x e5m2 is not supported" in msg


@pytest.mark.parametrize("pair", list(DEFAULTS))
def test_is_supported_grid(pair):
    """is_supported agrees with the documented rules for every compute type x scale type."""
    for ct, st in itertools.product(CT, DT):
        assert TM.is_supported(ct, st, *pair) == expected_supported(ct, st, *pair), (ct.name, st.name, pair)


@pytest.mark.parametrize(
    ("compute", "a", "scale"),
    [
        (CT.COMPUTE_16F, F16, DT.CUDA_R_16F),
        (CT.COMPUTE_32F, F32, DT.CUDA_R_32F),
        (CT.COMPUTE_32F_FAST_TF32, C64, DT.CUDA_C_32F),
        (CT.COMPUTE_32F_EMULATED_16BFX9, F32, DT.CUDA_R_32F),
        (CT.COMPUTE_64F, C128, DT.CUDA_C_64F),
        (CT.COMPUTE_64F_EMULATED_FIXEDPOINT, F64, DT.CUDA_R_64F),
    ],
)
def test_default_scale_for_compute(compute, a, scale):
    """The scale type derived from a compute type (complex A gives a complex scale)."""
    assert TM.default_scale_for_compute(compute, a) == scale


@pytest.mark.parametrize(
    ("scale", "compute"),
    [(DT.CUDA_R_16F, CT.COMPUTE_16F), (DT.CUDA_R_16BF, CT.COMPUTE_32F), (DT.CUDA_R_32F, CT.COMPUTE_32F),
     (DT.CUDA_C_32F, CT.COMPUTE_32F), (DT.CUDA_R_64F, CT.COMPUTE_64F), (DT.CUDA_C_64F, CT.COMPUTE_64F)],
)  # fmt: skip
def test_default_compute_for_scale(scale, compute):
    """The compute type derived from a scale type."""
    assert TM.default_compute_for_scale(scale) == compute


def test_integer_compute_and_scale_rejected():
    """Integer compute types and scale types are rejected, naming them."""
    with pytest.raises(ValueError, match="COMPUTE_32I"):
        TM.default_scale_for_compute(CT.COMPUTE_32I, "int8")
    with pytest.raises(ValueError, match="CUDA_R_32I"):
        TM.default_compute_for_scale(DT.CUDA_R_32I)


@pytest.mark.parametrize(
    ("kw", "c", "d", "compute"),
    [
        ({"a_dtype": F32, "b_dtype": F32}, F32, F32, CT.COMPUTE_32F),
        ({"a_dtype": BF16, "b_dtype": BF16, "result_type": DT.CUDA_R_32F}, F32, F32, CT.COMPUTE_32F),
        ({"a_dtype": F16, "b_dtype": F16, "c_dtype": F32}, F32, F32, CT.COMPUTE_32F),
        ({"a_dtype": F16, "b_dtype": F16, "compute_type": CT.COMPUTE_16F}, F16, F16, CT.COMPUTE_16F),
        ({"a_dtype": F16, "b_dtype": F16, "scale_type": DT.CUDA_R_16F}, F16, F16, CT.COMPUTE_16F),
        (
            {"a_dtype": F32, "b_dtype": F32, "compute_type": CT.COMPUTE_32F_FAST_TF32},
            F32,
            F32,
            CT.COMPUTE_32F_FAST_TF32,
        ),
        (
            {"a_dtype": C64, "b_dtype": C64, "compute_type": CT.COMPUTE_32F_FAST_16BF},
            C64,
            C64,
            CT.COMPUTE_32F_FAST_16BF,
        ),
        ({"a_dtype": E4, "b_dtype": E4}, F16, E4, CT.COMPUTE_32F),
        ({"a_dtype": E5, "b_dtype": E4}, F16, E5, CT.COMPUTE_32F),
        ({"a_dtype": E4, "b_dtype": E5, "c_dtype": BF16}, BF16, BF16, CT.COMPUTE_32F),
        (
            {"a_dtype": E4, "b_dtype": E4, "c_dtype": BF16, "result_type": DT.CUDA_R_8F_E4M3},
            BF16,
            E4,
            CT.COMPUTE_32F,
        ),
        (
            {"a_dtype": E4, "b_dtype": E5, "c_dtype": F16, "result_type": DT.CUDA_R_8F_E5M2},
            F16,
            E5,
            CT.COMPUTE_32F,
        ),
        ({"a_dtype": E4, "b_dtype": E4, "result_type": DT.CUDA_R_32F}, F32, F32, CT.COMPUTE_32F),
    ],
)
def test_resolve_types(kw, c, d, compute):
    """D is result_type, else c's dtype, else a's; C defaults to D (float16 for an FP8 D)."""
    t = TM.resolve_types(**kw)
    assert (t.c_dtype, t.d_dtype, t.compute_type) == (c, d, compute)
    assert t.narrow_result == (d in (E4, E5)) and t.narrow_inputs == (kw["a_dtype"] in (E4, E5))
    assert t.scale_dtype == TM.scale_numpy_dtype(t.scale_type)


BAD_TYPES = [
    (
        "fp8 e5m2 d from e4m3 pair",
        {"a_dtype": E4, "b_dtype": E4, "result_type": DT.CUDA_R_8F_E5M2},
        "d=float8_e5m2",
    ),
    ("f32 with bf16 c", {"a_dtype": F32, "b_dtype": F32, "c_dtype": BF16}, "c=bfloat16"),
    ("bf16 with f16 c", {"a_dtype": BF16, "b_dtype": BF16, "c_dtype": F16}, "c=float16"),
    (
        "f16 compute with f32 d",
        {"a_dtype": F16, "b_dtype": F16, "compute_type": CT.COMPUTE_16F, "c_dtype": F32},
        "c=float32",
    ),
    (
        "c and d differ",
        {"a_dtype": BF16, "b_dtype": BF16, "c_dtype": BF16, "result_type": DT.CUDA_R_32F},
        "d=float32",
    ),
    (
        "tf32 for bf16",
        {"a_dtype": BF16, "b_dtype": BF16, "compute_type": CT.COMPUTE_32F_FAST_TF32},
        "COMPUTE_32F_FAST_TF32",
    ),
    ("64f for f32", {"a_dtype": F32, "b_dtype": F32, "compute_type": CT.COMPUTE_64F}, "COMPUTE_64F"),
    ("16f scale for f32", {"a_dtype": F32, "b_dtype": F32, "scale_type": DT.CUDA_R_16F}, "CUDA_R_16F"),
    ("complex scale for real", {"a_dtype": F32, "b_dtype": F32, "scale_type": DT.CUDA_C_32F}, "CUDA_C_32F"),
    (
        "pedantic for fp8",
        {"a_dtype": E4, "b_dtype": E4, "compute_type": CT.COMPUTE_32F_PEDANTIC},
        "COMPUTE_32F_PEDANTIC",
    ),
    ("complex32", {"a_dtype": "complex32", "b_dtype": "complex32"}, "complex32"),
    ("fp8 f64 c", {"a_dtype": E4, "b_dtype": E4, "c_dtype": F64}, "c=float64"),
]


@pytest.mark.parametrize(("case", "kw", "match"), BAD_TYPES, ids=[c[0] for c in BAD_TYPES])
def test_unsupported_combinations_raise(case, kw, match):
    """An unsupported compute/scale/C/D combination raises ValueError naming it and listing the supported ones."""
    with pytest.raises(ValueError) as info:
        TM.resolve_types(**kw)
    assert match in str(info.value) and "supported" in str(info.value)


def test_inplace_ignores_result_type_with_warning():
    """With inplace, a result_type other than c's dtype is ignored with a UserWarning."""
    with pytest.warns(UserWarning, match="ignored with inplace=True"):
        t = TM.resolve_types(F32, F32, F32, result_type=DT.CUDA_R_16F, inplace=True)
    assert t.d_dtype == F32


def test_cuda_types_of_traits():
    """TypeTraits.cuda_types maps A, B, C, D to cudaDataType values."""
    t = TM.resolve_types(E4, E5, BF16)
    assert t.cuda_types == {"a": 28, "b": 29, "c": 14, "d": 14}


@pytest.mark.parametrize(
    ("types", "allowed"),
    [((F32, F32), (F32,)), ((BF16, BF16), (BF16,)), ((F16, F16), (F16,)), ((C64, C64), (C64,)),
     ((E4, E4, F16), (F16,)), ((E4, E4, F32), (BF16,)), ((E4, E5), (F16,))],
)  # fmt: skip
def test_bias_dtypes(types, allowed):
    """Bias dtypes: D's for regular GEMMs; for FP8 the C-dependent type of cuBLASLt's table."""
    assert TM.bias_dtypes(TM.resolve_types(*types)) == allowed


@pytest.mark.parametrize(
    ("types", "cc", "version", "block", "match"),
    [
        ((E4, E4), (8, 6), 130100, False, "compute capability >= 8.9"),
        ((E4, E4), (9, 0), 120700, False, "cuBLASLt >= 120800"),
        ((E4, E4), (9, 0), 130100, True, "compute capability >= 10.0"),
        ((F32, F32), (10, 0), 130100, True, "needs FP8 operands"),
    ],
)
def test_device_support_rejections(types, cc, version, block, match):
    """FP8 needs CC 8.9 and cuBLASLt 12.8; block scaling needs FP8 and CC 10.0."""
    with pytest.raises(ValueError, match=re.escape(match)):
        TM.check_device_support(TM.resolve_types(*types), cc, version, block_scaling=block)


def test_device_support_compute_type_version():
    """A compute type newer than the loaded cuBLASLt is rejected; FP8 on Hopper is accepted."""
    t = TM.resolve_types(F64, F64, compute_type=CT.COMPUTE_64F_EMULATED_FIXEDPOINT)
    with pytest.raises(ValueError, match="COMPUTE_64F_EMULATED_FIXEDPOINT"):
        TM.check_device_support(t, (9, 0), 120900)
    TM.check_device_support(TM.resolve_types(E4, E4), (9, 0), 130100)


@pytest.mark.parametrize(
    ("types", "block", "given", "ok"),
    [
        ((E4, E4), False, {"a", "b", "d"}, True),
        ((E4, E4), False, {"a", "b"}, False),
        ((E4, E4, BF16), False, {"a", "b"}, True),
        ((E4, E4, BF16), False, {"a", "b", "d"}, False),
        ((E4, E4), True, {"a", "b"}, True),
        ((F32, F32), False, set(), True),
        ((F32, F32), False, {"a"}, False),
    ],
)
def test_quantization_scales(types, block, given, ok):
    """a/b scales are required with FP8 inputs, d with an FP8 result (not with block scaling); others rejected."""
    t = TM.resolve_types(*types)
    if ok:
        TM.check_quantization_scales(given, t, block_scaling=block)
    else:
        with pytest.raises(ValueError, match="quantization_scales"):
            TM.check_quantization_scales(given, t, block_scaling=block)


def _header(name):
    import nvidia

    for root in nvidia.__path__:
        path = Path(root) / "cu13" / "include" / name
        if path.exists():
            return path.read_text()
    pytest.skip(f"needs CUDA's header {name} (pip install -r tools/bindings-requirements.txt)")


def test_cuda_data_type_values_match_library_types_h():
    """The cudaDataType values we rely on equal library_types.h's."""
    pytest.importorskip("nvidia", reason="no nvidia-* wheel is installed (pip install -e . installs them)")
    text = _header("library_types.h")
    for name in ("CUDA_R_16F", "CUDA_R_16BF", "CUDA_R_32F", "CUDA_R_64F", "CUDA_C_32F", "CUDA_C_64F",
                 "CUDA_C_16F", "CUDA_R_8F_E4M3", "CUDA_R_8F_E5M2"):  # fmt: skip
        value = int(re.search(rf"\b{name}\s*=\s*(\d+)", text).group(1))
        assert DT[name] == value, name


def test_no_warning_for_default_resolution():
    """Plain resolutions emit no warnings."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for pair in DEFAULTS:
            TM.resolve_types(*pair)
