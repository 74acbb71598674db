"""The generator's C-declaration parser and naming rules, on small snippets."""

from __future__ import annotations

import gen_bindings
import pytest
from c_header_parser import CType, Enum, EnumMember, ParseError, parse_header

SNIPPET = """
#ifndef X_H
#define X_H
#define XLIB_VER_MAJOR 3
#define XLIB_VERSION (XLIB_VER_MAJOR * 1000 + 7)
#if defined(__cplusplus)
extern "C" {
#endif
typedef enum { XLIB_STATUS_OK = 0, XLIB_STATUS_BAD = 0x7 } xlibStatus_t;
/** Flags */
typedef enum xlibFlag_t {
  XLIB_FLAG_A = 1 << 3,  // eight
  /** doc of B */
  XLIB_FLAG_B = (XLIB_FLAG_A | 2),
  XLIB_FLAG_C,
  XLIB_FLAG_D = XLIB_STATUS_BAD + 1,
} xlibFlag;
struct xlibContext;
typedef struct xlibContext *xlibHandle_t;
typedef struct { unsigned long long data[4]; int count; float w; } xlibAlgo_t;
typedef void (*xlibCallback_t)(int level, const char* msg);
xlibStatus_t XLIBAPI_UNUSED_MACRO_FREE xlibCreate(xlibHandle_t* handle);
xlibStatus_t CUSOLVERAPI CUSOLVER_DEPRECATED(xlibNew) xlibOld(const float* const A[], long long int n);
static inline xlibStatus_t xlibHelper(int a) { return a ? XLIB_STATUS_OK : XLIB_STATUS_BAD; }
size_t CUBLASWINAPI xlibVersion(void);
#if defined(__cplusplus)
}
#endif
#endif
"""


def parse(text: str = SNIPPET):
    return parse_header(text.replace("XLIBAPI_UNUSED_MACRO_FREE", ""), "x.h")


def test_enums_with_expressions_and_references() -> None:
    """Enum values may be shifts, ors, references to earlier values and implicit increments."""
    header = parse()
    flags = next(e for e in header.enums if e.name == "xlibFlag")
    assert flags.tag == "xlibFlag_t"
    assert [(m.name, m.value) for m in flags.members] == [
        ("XLIB_FLAG_A", 8),
        ("XLIB_FLAG_B", 10),
        ("XLIB_FLAG_C", 11),
        ("XLIB_FLAG_D", 8),
    ]
    assert "doc of B" in flags.members[1].doc


def test_macros_structs_typedefs_and_functions() -> None:
    """Integer #defines, structs, opaque handles, function pointers and declarations are parsed."""
    header = parse()
    assert header.macros["XLIB_VERSION"] == 3007
    algo = header.structs[0]
    assert algo.name == "xlibAlgo_t" and [f.dims for f in algo.fields] == [(4,), (), ()]
    assert header.typedefs["xlibHandle_t"] == CType("xlibContext", pointers=1)
    assert "xlibCallback_t" in header.function_pointers
    funcs = {f.name: f for f in header.functions}
    assert set(funcs) == {"xlibCreate", "xlibOld", "xlibVersion"}
    assert funcs["xlibOld"].params[0].type == CType("float", const=True, pointers=2, array=True)
    assert funcs["xlibOld"].params[1].type == CType("long long")
    assert funcs["xlibVersion"].params == ()
    assert header.inline_functions == ["xlibHelper"]


def test_strict_mode_rejects_unknown_declarations() -> None:
    """An unparseable declaration is an error in strict mode and skipped in tolerant mode."""
    bad = "int x = 3;\n"
    with pytest.raises(ParseError):
        parse_header(bad, "bad.h")
    assert parse_header(bad, "bad.h", tolerant=True).skipped


@pytest.mark.parametrize(
    ("c_name", "py_name"),
    [
        ("MatmulDescCreate", "matmul_desc_create"),
        ("Xpotrf_bufferSize", "xpotrf_buffer_size"),
        ("ZZgesv", "zzgesv"),
        ("IRSParamsCreate", "irs_params_create"),
        ("XtSetJITCallback", "xt_set_jit_callback"),
        ("MakePlanMany64", "make_plan_many64"),
        ("Cgemm3mStridedBatched", "cgemm3m_strided_batched"),
    ],
)
def test_snake_case(c_name: str, py_name: str) -> None:
    """CamelCase C names become snake_case, keeping precision letter runs together."""
    assert gen_bindings.snake_case(c_name) == py_name


def test_member_names_strip_prefixes() -> None:
    """Enum members lose their shared prefix and keep a word when they would start with a digit."""

    def enum(name: str, *members: str) -> Enum:
        return Enum(name, "", tuple(EnumMember(m, i) for i, m in enumerate(members)), "x.h", 1)

    assert gen_bindings.member_names(
        enum("cublasComputeType_t", "CUBLAS_COMPUTE_16F", "CUBLAS_COMPUTE_32F")
    ) == ["COMPUTE_16F", "COMPUTE_32F"]
    assert gen_bindings.member_names(enum("cufftCompatibility", "CUFFT_COMPATIBILITY_FFTW_PADDING")) == [
        "FFTW_PADDING"
    ]
    assert gen_bindings.member_names(
        enum(
            "cublasLtMatrixLayoutAttribute_t",
            "CUBLASLT_MATRIX_LAYOUT_TYPE",
            "CUBLASLT_MATRIX_LAYOUT_LD",
            "CUBLASLT_GROUPED_MATRIX_LAYOUT_LD_ARRAY",
        )
    ) == ["TYPE", "LD", "GROUPED_MATRIX_LAYOUT_LD_ARRAY"]
    assert gen_bindings.enum_class_name("cublasLtMatmulDescAttributes_t") == "MatmulDescAttribute"
    assert gen_bindings.enum_class_name("cudaDataType") == "CudaDataType"
    assert gen_bindings.enum_class_name("cufftType") == "Type"
