"""Naming rules of ``tools/gen_bindings.py``: C names to nvmath-python style Python names.

Functions lose the library prefix and the ``_v2`` suffix and become snake_case; enum classes lose
the library prefix and ``_t``; enum members lose the prefix they share (see :func:`member_names`).
"""

from __future__ import annotations

import keyword
import re

from c_header_parser import Enum

# Uppercase runs that are BLAS/LAPACK precision letters, kept together in snake_case (ZZgesv, HSHgemv).
PRECISION_RUN = re.compile(r"(?<![A-Za-z])([SDCZHTBKEYX]{2,3})(?=[a-z])")


def snake_case(name: str) -> str:
    """``MatmulDescCreate`` -> ``matmul_desc_create``; ``ZZgesv_bufferSize`` -> ``zzgesv_buffer_size``."""
    name = PRECISION_RUN.sub(lambda m: m.group(1).lower(), name)
    name = re.sub(r"([A-Z]+)([A-Z][a-z]{2,})", r"\1_\2", name)
    name = re.sub(r"([a-z])([A-Z])", r"\1_\2", name)
    name = re.sub(r"([0-9])([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"_+", "_", name).lower()


def python_name(c_name: str, prefix: str) -> str:
    """The Python function name of a C function."""
    name = c_name.lstrip("_").removeprefix(prefix)
    name = re.sub(r"^Mp(?=[A-Z])|^x?_", "", name)  # cufftMpAttachComm, nvshmemx_get_uniqueid, nvshmem_malloc
    name = re.sub(r"_v2(?=$|_64$)", "", name)
    return snake_case(name)


def param_name(c_name: str) -> str:
    """A Python parameter name for a C parameter name."""
    name = snake_case(c_name)
    return name + "_" if keyword.iskeyword(name) or name in ("self",) else name


def enum_class_name(c_name: str) -> str:
    """``cublasLtEpilogue_t`` -> ``Epilogue``; ``cudaDataType`` -> ``CudaDataType``."""
    name = re.sub(r"_t$", "", c_name)
    name = re.sub(r"^nvshmemx?_(\w)", lambda m: m.group(1).upper(), name)  # nvshmemx_status -> Status
    for prefix in ("cublasLt", "cublasMp", "cublas", "cufftMp", "cufft", "cusolverDn", "cusolver", "nccl"):
        if name.startswith(prefix) and name[len(prefix)].isupper():
            name = name[len(prefix) :]
            break
    else:
        name = name[0].upper() + name[1:]
    return re.sub(r"Attributes$", "Attribute", name)


def _words(name: str) -> list[str]:
    return [w for w in name.split("_") if w]


def _type_words(c_name: str) -> list[str]:
    """``cublasLtMatrixLayoutAttribute_t`` -> ``["CUBLASLT", "MATRIX", "LAYOUT", "ATTRIBUTE"]``."""
    name = re.sub(r"_t$", "", c_name)
    for prefix in ("cublasLt", "cublas", "cufft", "cusolverDn", "cusolver", "cuda", "lib", "library"):
        if name.startswith(prefix) and name[len(prefix) :][:1].isupper():
            return [prefix.upper()] + [w.upper() for w in _words(snake_case(name[len(prefix) :]))]
    return [w.upper() for w in _words(snake_case(name))]


def member_names(enum: Enum) -> list[str]:
    """Python member names of an enum.

    The prefix shared by all members is stripped; where most members also share a longer prefix
    with the type name (``CUBLASLT_MATRIX_LAYOUT_`` for ``cublasLtMatrixLayoutAttribute_t``), that
    longer prefix is stripped from the members having it. A single member loses the prefix it
    shares with the type name. If a name would then start with a digit or be a keyword, all
    members keep one more word (``CUBLAS_COMPUTE_16F`` -> ``COMPUTE_16F``).
    """
    if all(re.fullmatch(r"nccl[A-Z][A-Za-z0-9]*", m.name) for m in enum.members):  # ncclInvalidArgument
        return [re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", m.name[4:]).upper() for m in enum.members]
    members = [_words(m.name) for m in enum.members]
    typed = _type_words(enum.name)

    def common(a: list[str], b: list[str]) -> int:
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    shared = min(common(members[0], m) for m in members) if len(members) > 1 else 0
    shared = min(shared, min(len(m) for m in members) - 1)
    typed_cuts = [min(common(words, typed), len(words) - 1) for words in members]
    use_typed = sum(cut > shared for cut in typed_cuts) * 2 > len(members)
    names = [
        "_".join(words[max(shared, cut) if use_typed else shared :])
        for words, cut in zip(members, typed_cuts)
    ]
    if any(not n.isidentifier() or keyword.iskeyword(n) for n in names):
        while shared > 0 and any(not "_".join(w[shared:]).isidentifier() for w in members):
            shared -= 1
        names = ["_".join(w[shared:]) for w in members]
    return names
