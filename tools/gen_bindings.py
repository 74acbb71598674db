"""Generate ``nvmath/bindings/{cublasLt,cublas,cufft,cusolverDn,cusolver}.py`` from the C headers
(and their unchecked twins ``nvmath/bindings/_unchecked/<module>.py``), and, through
``tools/gen_bindings_dist.py``, the host entry points of ``{nccl,nvshmem,cublasMp,cufftMp}.py``.

Usage::

    python tools/gen_bindings.py                 # regenerate nvmath/bindings in place
    python tools/gen_bindings.py --out DIR       # write the five modules (and _unchecked/) into DIR
    python tools/gen_bindings.py --check         # regenerate into a temp dir, diff, exit 1 on mismatch
    python tools/gen_bindings.py --coverage      # print declared / bound / excluded per library

The headers come from the installed NVIDIA wheels (pinned in ``tools/bindings-requirements.txt``)
and are located with ``cuda.pathfinder.find_nvidia_header_directory`` (or ``--include DIR``). The
output is reproducible byte for byte: everything is sorted, there are no timestamps and no paths.

How C parameters become Python parameters (first matching rule wins):

1. ``PARAM_OVERRIDES`` below, per function and parameter, for the cases the rules get wrong.
2. Not a pointer: passed by value (int, float, enum member, handle or stream as ``int``).
3. ``const char*``: a ``str`` (or ``bytes``) argument.
4. Pointer to an integer, ``size_t``, enum, handle (opaque-struct pointer typedef), stream or
   function-pointer typedef ("integer-like scalar"):

   a. if the pointee is an integer and the name says it is a (device) array or a result the
      pointer mode may place on the device -- ``info``, ``devInfo``, ``d_info``, ``infoArray``,
      ``*Array``, ``*ipiv*``, names starting with ``d_`` or ``dev``, cuBLAS ``P`` and ``result``
      (``POINTER_NAMES``) -- a pointer (``int``);
   b. cuFFT ``n``, ``inembed``, ``onembed``, and any ``const`` pointer: an input array (a Python
      sequence, converted to a C array, or an ``int`` address);
   c. otherwise an *output*: not a Python parameter; its value is returned (a tuple when several,
      in C order; after the C return value when the function returns something besides a status).

5. Any other pointer (``void*``, ``float*``, ``cuComplex*``, struct pointers, ``T* const x[]``):
   an address, ``int``.
6. ``T**`` without ``[]``: an output pointer (returned as ``int``).

Argument checks (emitted into every wrapper; a Python call never reaches C with a value C would
mangle): handles, streams and pointers take ``int`` or an object with ``__index__`` in
``[0, 2**64)`` (``None`` is NULL); strings, bytes, floats, numpy arrays and other objects are a
``TypeError``. Integer parameters take ``int``/``__index__`` objects inside their C type's range
(``OverflowError`` otherwise, never a wrap-around or a truncated float). Every error names the
function and the parameter. The fast path is one inline boolean expression of range comparisons
plus ctypes' own conversion; a failure of either goes to ``_loader.retry_call``, which checks each
argument against the module's generated ``_ARG_KINDS`` table. The first call of each function checks
its arguments before the library is loaded. The comparisons apply to ``operator.index(value)``,
which the wrapper then passes on: an ``int`` subclass with rigged comparisons cannot smuggle
``-1`` to C as ``2**64 - 1`` (~0.01 us per integer argument). A ``str``/``bytes`` argument with an
embedded NUL is a ``ValueError``. Create/destroy pairs (``create``/``destroy``,
``matmul_desc_create``/``matmul_desc_destroy``, ..., and ``EXTRA_CREATORS`` such as cuFFT's
``plan1d``) share a ``_loader.HandleRegistry``: a second destroy of a handle raises ``ValueError``
before the library sees it. ``PRECHECKS`` adds hand-written argument checks to a few functions
(cuFFT plan sizes and types). None of this is in the unchecked twins.

Overhead policy (issue #13: at most 0.2 us per call for the checks): the checks cost 0.01-0.05 us
for a few arguments but ~0.25 us for the 16 of ``cublasLtMatmul`` and ~0.3 us for the 19-23 of the
cuBLAS GEMMs. Every function therefore has an *unchecked* twin in
``nvmath/bindings/_unchecked/<module>.py`` (``tools/gen_bindings_unchecked.py``: same name, positional
parameters and return value, a failure status raises the same error, ints go to ctypes as they are),
0.03-0.08 us over the bare ctypes call, for arguments validated once: ``Matmul.execute()`` passes
cuBLASLt the pointers and sizes it computed at plan time. (The generic matmul's per-call cuBLAS GEMMs
still use the checked functions.) ``tools/bench_binding_checks.py`` measures them (ns per call, a C stub
returning success, CPython 3.11 on the project's shared 2-core CPU machine, 2026-12-01):

    ======================================= ===== ========= =======
    binding                                   raw unchecked checked
    ======================================= ===== ========= =======
    cublas.gemm_strided_batched_ex (23 args)  1739   +73      +412
    cublas.gemm_ex (19)                       1410   +67      +357
    cublasLt.matmul (16)                       754   +35      +289
    cufft.exec_c2c (4)                         321   +77      +124
    cusolverDn.set_stream (2)                  157   +33       +62
    cublasLt.matmul_desc_destroy (1)           117   +36       +46
    ======================================= ===== ========= =======

Return values: the library status type is checked (``if status: raise <Lib>Error``); ``const char*``
becomes ``str``; other scalars are returned. Enum classes are ``IntEnum``s named after the C type
without its library prefix and ``_t`` (``cublasLtEpilogue_t`` -> ``Epilogue``, ``cudaDataType`` ->
``CudaDataType``, ``...Attributes_t`` -> ``...Attribute``); their members lose the prefix common to
the members or shared with the type name (``CUBLASLT_EPILOGUE_RELU_BIAS`` -> ``RELU_BIAS``), keeping
one more word when a name would start with a digit (``CUBLAS_COMPUTE_16F`` -> ``COMPUTE_16F``).
Functions lose the library prefix and the ``_v2`` suffix and become snake_case
(``cublasDgemm_v2`` -> ``dgemm``, ``cusolverDnXpotrf_bufferSize`` -> ``xpotrf_buffer_size``).
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from c_header_parser import CType, Enum, Function, HeaderSet, Param, Struct, clean_doc
from gen_bindings_dist import PARAM_OVERRIDES_DIST, generate_dist
from gen_bindings_emit import emit_module
from gen_bindings_names import enum_class_name, member_names, param_name, python_name, snake_case
from gen_bindings_unchecked import PACKAGE as UNCHECKED
from gen_bindings_unchecked import emit_package, emit_unchecked_module

REPO = Path(__file__).resolve().parent.parent
OUT_DIR = REPO / "nvmath" / "bindings"

# Parse order (enum values may refer to earlier headers); tolerant = types only, skip what we cannot parse.
HEADERS: tuple[tuple[str, bool], ...] = (
    ("library_types.h", False),
    ("driver_types.h", True),
    ("cuComplex.h", True),
    ("cublas_api.h", False),
    ("cublasLt.h", False),
    ("cudalibxt.h", False),
    ("cufft.h", False),
    ("cufftXt.h", False),
    ("cusolver_common.h", False),
    ("cusolverDn.h", False),
)


@dataclass(frozen=True)
class ModuleSpec:
    """One generated module."""

    module: str  # Python module name
    library: str  # cuda.pathfinder library name
    headers: tuple[str, ...]  # headers whose declarations it binds
    prefix: str  # C prefix stripped from function names
    pretty: str  # library name in messages
    error: str  # exception class name
    status_type: str  # C status type
    version_header: str  # header holding <PREFIX>_VER_MAJOR/MINOR/PATCH
    version_prefix: str
    depends: tuple[str, ...] = ()  # modules it imports shared enums / the error class from
    error_hint: str = ""


# fmt: off
MODULES: tuple[ModuleSpec, ...] = (
    #          module        library     headers                                   prefix        pretty      error            status type        version header       macros
    ModuleSpec("cublas",     "cublas",   ("cublas_api.h",),                        "cublas",     "cuBLAS",   "cuBLASError",   "cublasStatus_t",   "cublas_api.h",      "CUBLAS_VER_"),
    ModuleSpec("cublasLt",   "cublasLt", ("cublasLt.h",),                          "cublasLt",   "cuBLASLt", "cuBLASLtError", "cublasStatus_t",   "cublas_api.h",      "CUBLAS_VER_",
               depends=("cublas",), error_hint="set CUBLASLT_LOG_LEVEL=5 (or CUBLASLT_LOG_MASK) to see why"),
    ModuleSpec("cufft",      "cufft",    ("cudalibxt.h", "cufft.h", "cufftXt.h"),  "cufft",      "cuFFT",    "cuFFTError",    "cufftResult",      "cufft.h",           "CUFFT_VER_"),
    ModuleSpec("cusolver",   "cusolver", ("cusolver_common.h",),                   "cusolver",   "cuSOLVER", "cuSOLVERError", "cusolverStatus_t", "cusolver_common.h", "CUSOLVER_VER_"),
    ModuleSpec("cusolverDn", "cusolver", ("cusolverDn.h",),                        "cusolverDn", "cuSOLVER", "cuSOLVERError", "cusolverStatus_t", "cusolver_common.h", "CUSOLVER_VER_",
               depends=("cusolver", "cublas")),
)
# The distributed engines (tools/gen_bindings_dist.py: allowlisted host calls, their own header sets).
DIST_MODULES: tuple[ModuleSpec, ...] = (
    ModuleSpec("nccl",       "nccl",         ("nccl.h",),                              "nccl",       "NCCL",     "NCCLError",     "ncclResult_t",     "nccl.h",            "NCCL_"),
    ModuleSpec("nvshmem",    "nvshmem_host", ("nvshmemx_error.h", "nvshmem_api.h", "nvshmemx_api.h", "nvshmemx_coll_api.h"),
               "nvshmem", "NVSHMEM", "NVSHMEMError", "nvshmemx_status", "nvshmem_version.h", "NVSHMEM_VENDOR_"),
    ModuleSpec("cublasMp",   "cublasmp",     ("cublasmp.h",),                          "cublasMp",   "cuBLASMp", "cuBLASMpError", "cublasMpStatus_t", "cublasmp.h",        "CUBLASMP_VER_",
               depends=("cublas", "nccl")),
    ModuleSpec("cufftMp",    "cufftMp",      ("cudalibxt.h", "cufft.h", "cufftXt.h", "cufftMp.h"), "cufft", "cuFFTMp", "cuFFTMpError", "cufftResult", "cufft.h", "CUFFT_VER_"),
)
# fmt: on

# Declared functions that are not bound. Every entry is checked against the headers: the generator
# fails when an entry no longer matches a declaration, or when a declaration cannot be bound and is
# missing here.
EXCLUDED: dict[str, str] = {
    # static inline helpers defined in the headers: not library symbols.
    "cublasLtMatrixLayoutInit": "static inline in cublasLt.h (calls cublasLtMatrixLayoutInit_internal, which is bound)",
    "cublasLtGroupedMatrixLayoutInit": "static inline in cublasLt.h (calls the bound ..._internal)",
    "cublasLtMatmulDescInit": "static inline in cublasLt.h (calls the bound ..._internal)",
    "cublasLtMatrixTransformDescInit": "static inline in cublasLt.h (calls the bound ..._internal)",
    "cublasLtEmulationDescInit": "static inline in cublasLt.h (calls the bound ..._internal)",
    "cublasLtMatmulPreferenceInit": "static inline in cublasLt.h (calls the bound ..._internal)",
    "cublasMigrateComputeType": "static inline C++-only helper in cublas_api.h",
    # declared, but not exported by the shipped library (checked with dlsym on the pinned wheels).
    "cublasLtDisableCpuInstructionsSetMask": "declared in cublasLt.h but not exported by libcublasLt.so.13",
    "cusolverDnLoggerSetCallback": "declared in cusolverDn.h but not exported by libcusolver.so.12",
    "cusolverDnLoggerSetFile": "declared in cusolverDn.h but not exported by libcusolver.so.12",
    "cusolverDnLoggerOpenFile": "declared in cusolverDn.h but not exported by libcusolver.so.12",
    "cusolverDnLoggerSetLevel": "declared in cusolverDn.h but not exported by libcusolver.so.12",
    "cusolverDnLoggerSetMask": "declared in cusolverDn.h but not exported by libcusolver.so.12",
    "cusolverDnLoggerForceDisable": "declared in cusolverDn.h but not exported by libcusolver.so.12",
}

# Per-function parameter kinds where the rules above are wrong. Kinds: "ptr" (an address),
# "in_array" (sequence or address), "out" (returned).
PARAM_OVERRIDES: dict[tuple[str, str], str] = {
    # cublas: the int* is a device pointer the library reads (the counterpart of the Get...Pointer).
    ("cublasSetFixedPointEmulationMantissaBitCountPointer", "mantissaBitCount"): "ptr",
    # cufft: the list of GPUs is an input array.
    ("cufftXtSetGPUs", "whichGPUs"): "in_array",
    # cufft: workSize is an input (the limit for CUFFT_WORKAREA_USER), may be NULL.
    ("cufftXtSetWorkAreaPolicy", "workSize"): "ptr",
    # cufft: arrays of per-GPU pointers passed in, not outputs.
    ("cufftXtSetWorkArea", "workArea"): "ptr",
    ("cufftXtSetCallback", "callback_routine"): "ptr",
    ("cufftXtSetCallback", "caller_info"): "ptr",
    ("cufftXtSetJITCallback", "caller_info"): "ptr",
    # cusolverDn: the residual is a host scalar written by the getter.
    ("cusolverDnXsyevjGetResidual", "residual"): "out",
    ("cusolverDnXgesvdjGetResidual", "residual"): "out",
}

# Integer pointers with these names are (device) arrays or results, not outputs.
POINTER_NAMES = re.compile(r"^(d_|dev).*|.*(info|Info)(Array)?$|.*[a-z]Array$|.*[iI]piv.*|^P$|^result$")
CUFFT_INPUT_ARRAYS = frozenset({"n", "inembed", "onembed"})

# Builtin C scalar types: (category, ctypes alias used in the generated code, numpy type).
# fmt: off
SCALARS: dict[str, tuple[str, str, str]] = {
    "int": ("int", "_int", "int32"),                 "unsigned": ("int", "_uint", "uint32"),
    "short": ("int", "_short", "int16"),             "unsigned short": ("int", "_ushort", "uint16"),
    "long": ("int", "_long", "int64"),               "unsigned long": ("int", "_ulong", "uint64"),
    "long long": ("int", "_longlong", "int64"),      "unsigned long long": ("int", "_ulonglong", "uint64"),
    "char": ("char", "_char", "int8"),               "signed char": ("int", "_byte", "int8"),
    "unsigned char": ("int", "_ubyte", "uint8"),     "bool": ("int", "_bool", "bool"),
    "size_t": ("int", "_size", "uint64"),
    "int8_t": ("int", "_i8", "int8"),                "uint8_t": ("int", "_u8", "uint8"),
    "int16_t": ("int", "_i16", "int16"),             "uint16_t": ("int", "_u16", "uint16"),
    "int32_t": ("int", "_i32", "int32"),             "uint32_t": ("int", "_u32", "uint32"),
    "int64_t": ("int", "_i64", "int64"),             "uint64_t": ("int", "_u64", "uint64"),
    "float": ("float", "_float", "float32"),         "double": ("float", "_double", "float64"),
    "void": ("void", "None", ""),
}
# fmt: on
# Types defined in headers we do not parse (vector_types.h, cuda_fp16.h, stdio.h): data only.
# NVSHMEM's attribute and unique-id structs (device_host/nvshmem_types.h, C++, not vendored) are passed
# by pointer only: the runtime fills buffers of their documented sizes.
OPAQUE_DATA_TYPES = frozenset({"float2", "double2", "__half", "__nv_bfloat16", "FILE", "nvshmemx_init_attr_t"})

# cuBLASLt attribute enums whose values document their C type -> the stem of their functions
# (``<stem>_set_attribute`` / ``<stem>_get_attribute``) and whether the attributes can be set.
ATTRIBUTE_ENUMS: dict[str, tuple[str, bool]] = {
    "cublasLtMatmulDescAttributes_t": ("matmul_desc", True),
    "cublasLtMatrixLayoutAttribute_t": ("matrix_layout", True),
    "cublasLtMatmulPreferenceAttributes_t": ("matmul_preference", True),
    "cublasLtMatmulAlgoConfigAttributes_t": ("matmul_algo_config", True),
    "cublasLtMatmulAlgoCapAttributes_t": ("matmul_algo_cap", False),
    "cublasLtMatrixTransformDescAttributes_t": ("matrix_transform_desc", True),
    "cublasLtEmulationDescAttributes_t": ("emulation_desc", True),
}
# Attribute types where the doc comment is wrong or unparseable. Each entry is verified by the
# round-trip test in tests/bindings (the library rejects a buffer of the wrong size).
ATTRIBUTE_TYPE_OVERRIDES: dict[tuple[str, str], str] = {
    # cublasLt.h 13.10 documents these as uint32_t, but libcublasLt 13.10 only accepts 8-byte buffers.
    ("cublasLtMatmulPreferenceAttributes_t", "CUBLASLT_MATMUL_PREF_GROUPED_AVERAGE_REDUCTION_DIM"): "int64",
    ("cublasLtMatmulPreferenceAttributes_t", "CUBLASLT_MATMUL_PREF_GROUPED_DESC_D_AVERAGE_ROWS"): "int64",
    ("cublasLtMatmulPreferenceAttributes_t", "CUBLASLT_MATMUL_PREF_GROUPED_DESC_D_AVERAGE_COLS"): "int64",
}


@dataclass
class Model:
    """The parsed headers plus type resolution."""

    headers: HeaderSet
    typedefs: dict[str, CType] = field(init=False)
    enums: dict[str, Enum] = field(init=False)
    structs: dict[str, Struct] = field(init=False)
    function_pointers: set[str] = field(init=False)

    def __post_init__(self) -> None:
        self.typedefs = self.headers.typedefs()
        self.enums = self.headers.enums()
        self.structs = self.headers.structs()
        self.function_pointers = set().union(*(h.function_pointers for h in self.headers.headers.values()))

    def resolve(self, base: str) -> tuple[str, str]:
        """(category, name) of a type name: category is one of ``int``, ``float``, ``char``,
        ``void``, ``enum``, ``handle``, ``struct``, ``opaque``; name is the final C name."""
        seen = base
        while True:
            if base in SCALARS:
                return SCALARS[base][0], base
            if base in self.enums:
                return "enum", self.enums[base].name
            if base in self.function_pointers:
                return "handle", base
            if base in OPAQUE_DATA_TYPES:
                return "opaque", base
            target = self.typedefs.get(base)
            if target is None:
                if base in self.structs:
                    return "struct", self.structs[base].name
                if base.startswith(("struct ", "enum ")):
                    return self.resolve(base.split(" ", 1)[1])
                raise KeyError(f"unknown type {base!r} (from {seen!r})")
            if target.pointers:
                return "handle", base
            base = target.base

    def enum_of(self, base: str) -> Enum | None:
        """The enum a type name refers to, through typedefs."""
        category, name = self.resolve(base)
        return self.enums[name] if category == "enum" else None


@dataclass(frozen=True)
class BoundParam:
    """How one C parameter is passed: ``kind`` is value, ptr, str, in_array or out."""

    c: Param
    name: str
    kind: str
    ctype: str  # ctypes alias of the argtype (value) or of the output/array element


@dataclass(frozen=True)
class BoundFunction:
    """A function ready to emit."""

    c: Function
    name: str
    params: tuple[BoundParam, ...]
    restype: str  # ctypes alias
    returns: str  # status, str, value or none
    retry: bool  # has pointer-like arguments: accept numpy arrays etc. via the ArgumentError fallback


def classify(model: Model, func: Function, spec: ModuleSpec) -> BoundFunction:
    """Apply the parameter rules of the module docstring to one function."""
    bound = []
    seen: Counter[str] = Counter()
    fname = python_name(func.name, spec.prefix)
    for param in func.params:
        kind, ctype = _param_kind(model, func, param, spec)
        name = param_name(param.name)
        name = name + "_" if name == fname else name  # nvshmem_ptr(ptr, pe): the wrapper refers to itself
        seen[name] += 1
        if seen[name] > 1:
            name = f"{name}{seen[name]}"
        bound.append(BoundParam(param, name, kind, ctype))
    returns, restype = _return_kind(model, func, spec)
    retry = any(p.kind == "ptr" or (p.kind == "value" and p.ctype == "_vp") for p in bound)
    return BoundFunction(func, fname, tuple(bound), restype, returns, retry)


def _param_kind(model: Model, func: Function, param: Param, spec: ModuleSpec) -> tuple[str, str]:
    ctype = param.type
    category, name = model.resolve(ctype.base)
    scalar_alias = _alias(category, name)
    key = (func.name, param.name)
    override = PARAM_OVERRIDES.get(key) or PARAM_OVERRIDES_DIST.get(key)
    if override == "out" and ctype.pointers == 1:
        return "out", "_uintptr" if category == "handle" else scalar_alias
    if override in ("ptr", "in_array"):
        return override, scalar_alias if override == "in_array" else "_vp"
    if ctype.pointers == 0:
        if category in ("struct", "opaque", "void"):
            raise ValueError(f"{func.name}: parameter {param.name} passes a {name} by value")
        return "value", scalar_alias
    if ctype.pointers == 1:
        if category == "char" and ctype.const:
            return "str", "_charp"
        if category in ("int", "enum", "handle"):
            if category == "int" and POINTER_NAMES.match(param.name):
                return "ptr", "_vp"
            if ctype.const or (spec.module == "cufft" and param.name in CUFFT_INPUT_ARRAYS):
                return "in_array", scalar_alias
            return "out", "_uintptr" if category == "handle" else scalar_alias
        return "ptr", "_vp"
    if ctype.array or ctype.const:
        return "ptr", "_vp"
    return "out", "_uintptr"


def _alias(category: str, name: str) -> str:
    if category in ("int", "float", "char", "void"):
        return SCALARS[name][1]
    if category == "enum":
        return "_int"
    return "_vp"  # handles, streams, function pointers


def _return_kind(model: Model, func: Function, spec: ModuleSpec) -> tuple[str, str]:
    restype = func.restype
    if restype.pointers == 0 and restype.base == spec.status_type:
        return "status", "_int"
    category, name = model.resolve(restype.base)
    if restype.pointers == 1 and category == "char":
        return "str", "_charp"
    if restype.pointers == 0 and category == "void":
        return "none", "None"
    if restype.pointers == 1 and category == "void":  # nvshmem_malloc: an address (None for NULL)
        return "value", "_vp"
    if restype.pointers == 0 and category in ("int", "enum", "float"):
        return "value", _alias(category, name)
    raise ValueError(f"{func.name}: unsupported return type {restype}")


def attribute_type(model: Model, enum: Enum, member: str, doc: str) -> str:
    """The numpy type of a cuBLASLt attribute, read from the C type named in its doc comment."""
    override = ATTRIBUTE_TYPE_OVERRIDES.get((enum.name, member))
    if override:
        return override
    paragraphs = [p for p in re.split(r"\n\s*\n", clean_doc(doc)) if p.strip()]
    text = paragraphs[-1] if paragraphs else ""
    patterns = (
        (r"array of (u?int\d+)_t", lambda m: m.group(1) + "[]"),
        (r"(const\s+)?void\s*\*", lambda m: "intp"),
        (r"\bu?int\d+_t\s*\*", lambda m: "intp"),
        (r"\b(u?int\d+)_t\b", lambda m: m.group(1)),
        (r"\bfloat\b", lambda m: "float32"),
        (r"\bdouble\b", lambda m: "float64"),
        (r"\b(cublasLt\w+_t)\b", lambda m: _named_attribute_type(model, m.group(1))),
    )
    found = []
    for pattern, convert in patterns:
        for match in re.finditer(pattern, text):
            found.append((match.start(), -(match.end() - match.start()), convert(match)))
    if not found:
        raise ValueError(f"{enum.name}.{member}: no C type in its doc comment; add ATTRIBUTE_TYPE_OVERRIDES")
    return min(found)[2]


def _named_attribute_type(model: Model, c_name: str) -> str:
    category, name = model.resolve(c_name)
    if category == "int":
        return SCALARS[name][2]
    return {"enum": "int32", "handle": "intp"}[category]


def parse_headers(include: Path) -> HeaderSet:
    """Parse the headers in dependency order."""
    headers = HeaderSet()
    for name, tolerant in HEADERS:
        headers.add(include / name, tolerant=tolerant)
    return headers


def header_version(headers: HeaderSet, spec: ModuleSpec) -> str:
    """``major.minor.patch`` from the ``<PREFIX>_VER_*`` macros."""
    macros = headers.headers[spec.version_header].macros
    prefix = spec.version_prefix  # <P>MAJOR, or <P>MAJOR_VERSION (NVSHMEM_VENDOR_MAJOR_VERSION)
    parts = [macros.get(prefix + p, macros.get(f"{prefix}{p}_VERSION")) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(str(part) for part in parts)


def cudart_version(include: Path) -> str:
    """The CUDA runtime version of the type headers (from ``cuda_runtime_api.h``)."""
    text = (include / "cuda_runtime_api.h").read_text() if (include / "cuda_runtime_api.h").exists() else ""
    match = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", text)
    if not match:
        return "unknown"
    value = int(match.group(1))
    return f"{value // 1000}.{value % 1000 // 10}"


def declared_functions(headers: HeaderSet, spec: ModuleSpec) -> list[Function]:
    """Every function declared in the module's headers (excluded ones included)."""
    return [f for name in spec.headers for f in headers.headers[name].functions]


def inline_functions(headers: HeaderSet, spec: ModuleSpec) -> list[str]:
    """``static inline`` functions defined in the module's headers that are not also declared."""
    declared = {f.name for f in declared_functions(headers, spec)}
    inline = {n for name in spec.headers for n in headers.headers[name].inline_functions}
    return sorted(inline - declared)


def check_exclusions(headers: HeaderSet) -> None:
    """Every EXCLUDED entry must name a declaration or inline definition of the headers."""
    known = set()
    for spec in MODULES:
        known |= {f.name for f in declared_functions(headers, spec)} | set(inline_functions(headers, spec))
        missing = set(inline_functions(headers, spec)) - set(EXCLUDED)
        if missing:
            raise SystemExit(f"static inline functions not in EXCLUDED: {sorted(missing)}")
    stale = sorted(set(EXCLUDED) - known)
    if stale:
        raise SystemExit(f"EXCLUDED entries that the headers no longer declare: {stale}")


def check_overrides(model: Model) -> None:
    """Every override must still match a parameter / an attribute of the headers."""
    functions = {f.name: f for h in model.headers.headers.values() for f in h.functions}
    stale = [
        key
        for key in PARAM_OVERRIDES
        if key[0] not in functions or key[1] not in {p.name for p in functions[key[0]].params}
    ]
    stale += [
        key
        for key in ATTRIBUTE_TYPE_OVERRIDES
        if key[0] not in model.enums or key[1] not in {m.name for m in model.enums[key[0]].members}
    ]
    if stale:
        raise SystemExit(f"overrides that match nothing in the headers: {stale}")


def find_include() -> Path:
    """The include directory of the installed NVIDIA wheels."""
    from cuda.pathfinder import find_nvidia_header_directory

    found = {find_nvidia_header_directory(lib) for lib in ("cublas", "cufft", "cusolver", "cudart")}
    found.discard(None)
    if len(found) != 1:
        raise SystemExit(f"expected the headers in one directory, found {sorted(found)}; pass --include")
    return Path(found.pop())


def generate(include: Path) -> dict[str, str]:
    """``{file name: source}`` of the five modules."""
    headers = parse_headers(include)
    check_exclusions(headers)
    model = Model(headers)
    check_overrides(model)
    cudart = cudart_version(include)
    sources = {}
    provided: dict[str, dict[str, str]] = {}  # module -> {C enum name: Python class name}
    for spec in MODULES:
        declared = declared_functions(headers, spec)
        functions = [classify(model, f, spec) for f in declared if f.name not in EXCLUDED]
        names = Counter(f.name for f in functions)
        clashes = sorted(n for n, c in names.items() if c > 1)
        if clashes:
            raise SystemExit(f"{spec.module}: Python name clashes {clashes}")
        own = {f.name for f in declared} | set(inline_functions(headers, spec))
        source, provided[spec.module] = emit_module(
            spec=spec,
            model=model,
            functions=sorted(functions, key=lambda f: f.name),
            version=header_version(headers, spec),
            cudart=cudart,
            provided=provided,
            attribute_enums=ATTRIBUTE_ENUMS,
            scalars=SCALARS,
            attribute_type=attribute_type,
            member_names=member_names,
            enum_class_name=enum_class_name,
            snake_case=snake_case,
            excluded={name: why for name, why in EXCLUDED.items() if name in own},
        )
        sources[f"{spec.module}.py"] = source
        sources[f"{UNCHECKED}/{spec.module}.py"] = emit_unchecked_module(
            spec, sorted(functions, key=lambda f: f.name), header_version(headers, spec)
        )
    sources[f"{UNCHECKED}/__init__.py"] = emit_package()
    specs = {spec.module: spec for spec in DIST_MODULES}
    emit = partial(_emit_dist, cudart=cudart)
    sources.update(generate_dist(include, specs, Model, classify, emit, provided))
    return sources


def _emit_dist(
    spec: ModuleSpec, model: Model, functions: list, provided: dict, *, cudart: str
) -> dict[str, str]:
    """The checked and unchecked sources of one distributed module (updates ``provided``)."""
    version = header_version(model.headers, spec)
    source, provided[spec.module] = emit_module(
        spec=spec, model=model, functions=functions, version=version, cudart=cudart,
        provided=provided, attribute_enums={}, scalars=SCALARS, attribute_type=attribute_type,
        member_names=member_names, enum_class_name=enum_class_name, snake_case=snake_case, excluded={},
    )  # fmt: skip
    unchecked = emit_unchecked_module(spec, functions, version)
    return {f"{spec.module}.py": source, f"{UNCHECKED}/{spec.module}.py": unchecked}


def coverage(include: Path) -> dict[str, tuple[int, int, int]]:
    """``{module: (declared, bound, excluded)}``; inline helpers count as declared and excluded."""
    headers = parse_headers(include)
    out = {}
    for spec in MODULES:
        declared = {f.name for f in declared_functions(headers, spec)} | set(inline_functions(headers, spec))
        excluded = declared & set(EXCLUDED)
        out[spec.module] = (len(declared), len(declared - excluded), len(excluded))
    return out


def check(include: Path, target: Path = OUT_DIR) -> int:
    """Regenerate into a temp dir and compare with ``target``; returns the exit status."""
    with tempfile.TemporaryDirectory() as tmp:
        write(generate(include), Path(tmp))
        status = 0
        for path in sorted(p for p in Path(tmp).rglob("*.py")):
            name = path.relative_to(tmp).as_posix()
            committed = target / name
            new = path.read_text()
            old = committed.read_text() if committed.exists() else ""
            if new != old:
                status = 1
                diff = list(
                    difflib.unified_diff(
                        old.splitlines(), new.splitlines(), f"committed/{name}", f"regenerated/{name}",
                        lineterm="",
                    )  # fmt: skip
                )
                print(f"{name}: differs ({len(diff)} diff lines); first lines:")
                print("\n".join(diff[:40]))
            else:
                print(f"{name}: up to date")
    if status:
        print(
            "bindings are stale: run `python tools/gen_bindings.py` with the pinned wheels installed "
            "(pip install -r tools/bindings-requirements.txt)"
        )
    return status


def write(sources: dict[str, str], out: Path) -> None:
    """Write the generated modules."""
    for name, source in sources.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--include", type=Path, help="header directory (default: found with cuda.pathfinder)")
    parser.add_argument(
        "--out", type=Path, default=OUT_DIR, help="output directory (default: nvmath/bindings)"
    )
    parser.add_argument(
        "--check", action="store_true", help="compare a fresh generation with --out; exit 1 on diff"
    )
    parser.add_argument(
        "--coverage", action="store_true", help="print declared / bound / excluded per module"
    )
    args = parser.parse_args(argv)
    include = args.include or find_include()
    if args.check:
        return check(include, args.out)
    if args.coverage:
        for module, (declared, bound, excluded) in coverage(include).items():
            print(f"{module:11s} declared {declared:4d}  bound {bound:4d}  excluded {excluded:3d}")
        return 0
    write(generate(include), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
