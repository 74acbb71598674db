"""The distributed half of ``tools/gen_bindings.py``: ``nvmath/bindings/{nccl,nvshmem,cublasMp,cufftMp}.py``.

Same rules, classifier and emitter as the math libraries (see ``tools/gen_bindings.py``), with three
differences that these libraries force:

* **Allowlists.** Only the host entry points ``nvmath.distributed`` needs are bound (``ALLOWED``):
  NVSHMEM's and NCCL's headers declare hundreds of device, typed-RMA and collective functions that a
  planner never calls from Python, and cuBLASMp's BLAS-3 family beyond ``matmul``/``gemm`` is not used
  yet. Every allowlisted name must be declared (else the generator fails), so a header bump that
  renames one is caught. Adding a function is one line.
* **Several header directories.** Each module is parsed in its own :class:`~c_header_parser.HeaderSet`
  (cuFFTMp ships its own ``cufft.h`` 12.1.3, older than the ``nvidia-cufft`` 12.5 headers the
  ``cufft`` module comes from, and must not mix with them), after the CUDA type headers of the main
  include directory. Where the headers come from, and why (see ``tools/headers/README.md``):

  ======== =================================================== ==========================================
  module   headers                                             source
  ======== =================================================== ==========================================
  nccl     ``nccl.h``                                          vendored: ``tools/headers/nccl-2.32.3``
                                                               (Apache-2.0; the wheel is 305 MB)
  nvshmem  ``host/nvshmem{,x}_api.h``, ``nvshmemx_coll_api.h``  vendored: ``tools/headers/nvshmem-3.8.0``
                                                               (Apache-2.0 per file; the wheel is 182 MB)
  cublasMp ``cublasmp.h`` (+ ``cublas_api.h``, ``nccl.h``)     the pinned ``nvidia-cublasmp-cu13`` wheel
                                                               (12 MB; NVIDIA license: not vendored)
  cufftMp  ``cufftMp.h``, its ``cufft.h``/``cufftXt.h``        the pinned ``nvidia-cufftmp-cu13`` wheel
                                                               (205 MB; NVIDIA license: not vendored)
  ======== =================================================== ==========================================

* **Statuses that are plain ints.** NVSHMEM returns ``int`` (0 = success) and declares its codes
  through an X-macro (``NVSHMEMX_STATUS_LIST`` in ``non_abi/nvshmemx_error.h``), which the parser
  does not expand: :func:`nvshmem_status_enum` reads the list and builds the enum. ``INT_STATUS``
  names the ``int``-returning functions whose result is a status (``nvshmem_my_pe`` is a value).

The ``cufftMp`` module binds the plain cuFFT entry points it needs too (``cufftCreate``,
``cufftMakePlan3d``, ``cufftXtExec``...): a cuFFTMp plan is a handle of ``libcufftMp``, which
exports those symbols itself, and must never be passed to ``libcufft``. ``cufftMpMakePlan2d/3d``
and ``cufftMpMakeReshape`` are inline in the header (not library symbols): the first are
``cufftMpAttachComm`` + ``cufftMakePlan2d/3d``, the last is ``__cufftMpMakeReshape_11_4``
(bound as ``make_reshape_11_4``).
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from c_header_model import Enum, EnumMember
from c_header_parser import HeaderSet

TOOLS = Path(__file__).resolve().parent
VENDORED = TOOLS / "headers"
TYPE_HEADERS: tuple[tuple[str, bool], ...] = (
    ("library_types.h", False),
    ("driver_types.h", True),
    ("cuComplex.h", True),
)

# fmt: off
ALLOWED: dict[str, tuple[str, ...]] = {
    "nccl": (
        "ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRankScalable", "ncclCommFinalize", "ncclCommDestroy",
        "ncclCommAbort", "ncclCommCount", "ncclCommUserRank", "ncclCommCuDevice", "ncclCommGetAsyncError",
        "ncclGetErrorString", "ncclGetLastError",
    ),
    "nvshmem": (
        "nvshmemx_get_uniqueid", "nvshmemx_set_attr_uniqueid_args", "nvshmemx_hostlib_init_attr",
        "nvshmemx_hostlib_finalize", "nvshmemx_init_status", "nvshmem_my_pe", "nvshmem_n_pes",
        "nvshmem_malloc", "nvshmem_align", "nvshmem_free", "nvshmem_ptr", "nvshmemx_barrier_all_on_stream",
        "nvshmemx_sync_all_on_stream", "nvshmem_info_get_version",
    ),
    "cublasMp": (
        "cublasMpCreate", "cublasMpDestroy", "cublasMpSetStream", "cublasMpGetStream", "cublasMpGetVersion",
        "cublasMpGridCreate", "cublasMpGridDestroy", "cublasMpBufferRegister", "cublasMpBufferDeregister",
        "cublasMpMatrixDescriptorCreate", "cublasMpMatrixDescriptorDestroy", "cublasMpMatmulDescriptorCreate",
        "cublasMpMatmulDescriptorDestroy", "cublasMpMatmulDescriptorSetAttribute",
        "cublasMpMatmulDescriptorGetAttribute", "cublasMpMatmul_bufferSize", "cublasMpMatmul",
        "cublasMpGemm_bufferSize", "cublasMpGemm", "cublasMpMalloc", "cublasMpFree", "cublasMpLoggerSetLevel",
    ),
    "cufftMp": (
        "cufftMpAttachComm", "cufftXtSetDistribution", "cufftXtSetSubformatDefault", "cufftMpCreateReshape",
        "cufftMpGetReshapeSize", "__cufftMpMakeReshape_11_4", "cufftMpExecReshapeAsync", "cufftMpDestroyReshape",
        "cufftCreate", "cufftDestroy", "cufftSetStream", "cufftSetAutoAllocation", "cufftMakePlan2d",
        "cufftMakePlan3d", "cufftGetSize", "cufftXtExec", "cufftExecC2C", "cufftExecZ2Z", "cufftExecR2C",
        "cufftExecD2Z", "cufftExecC2R", "cufftExecZ2D", "cufftGetVersion", "cufftGetProperty",
    ),
}
# Parameter kinds where the rules of tools/gen_bindings.py are wrong (checked against the declarations).
PARAM_OVERRIDES_DIST: dict[tuple[str, str], str] = {
    ("ncclCommCuDevice", "device"): "out",  # `dev*` names a device pointer elsewhere; here the CUDA ordinal
}
# int-returning functions whose result is a status (0 = success); other ints are values.
INT_STATUS: frozenset[str] = frozenset({
    "nvshmemx_get_uniqueid", "nvshmemx_set_attr_uniqueid_args", "nvshmemx_hostlib_init_attr",
})
# fmt: on


@dataclasses.dataclass(frozen=True)
class Group:
    """One module's header set: ``(directory key, relative path, tolerant)`` in parse order."""

    module: str
    headers: tuple[tuple[str, str, bool], ...]


GROUPS: tuple[Group, ...] = (
    Group("nccl", (("nccl", "nccl.h", True),)),
    Group(
        "nvshmem",
        (
            ("nvshmem", "non_abi/nvshmem_version.h", True),
            ("nvshmem", "non_abi/nvshmemx_error.h", True),
            ("nvshmem", "bootstrap_device_host/nvshmem_uniqueid.h", True),
            ("nvshmem", "host/nvshmem_api.h", True),
            ("nvshmem", "host/nvshmemx_api.h", True),
            ("nvshmem", "host/nvshmemx_coll_api.h", True),
        ),
    ),
    Group(
        "cublasMp",
        (("cuda", "cublas_api.h", False), ("nccl", "nccl.h", True), ("cublasmp", "cublasmp.h", False)),
    ),
    Group(
        "cufftMp",
        (
            ("cufftmp", "cudalibxt.h", False),
            ("cufftmp", "cufft.h", False),
            ("cufftmp", "cufftXt.h", False),
            ("cufftmp", "cufftMp.h", False),
        ),
    ),
)


def wheel_include(package: str) -> Path:
    """``site-packages/nvidia/<package>/cu13/include`` of an installed pinned wheel."""
    import nvidia  # namespace package of the NVIDIA wheels

    for root in nvidia.__path__:
        path = Path(root) / package / "cu13" / "include"
        if path.is_dir():
            return path
    raise SystemExit(
        f"headers of nvidia-{package}-cu13 not found: "
        "pip install --no-deps -r tools/bindings-requirements-nodeps.txt"
    )


def include_dirs(cuda: Path) -> dict[str, Path]:
    """Directory of each header source."""
    return {
        "cuda": cuda,
        "nccl": VENDORED / "nccl-2.32.3",
        "nvshmem": VENDORED / "nvshmem-3.8.0",
        "cublasmp": wheel_include("cublasmp"),
        "cufftmp": wheel_include("cufftmp"),
    }


def nvshmem_status_enum(header_text: str) -> Enum:
    """``nvshmemx_status`` from the ``NVSHMEMX_STATUS_LIST`` X-macro (members numbered from 0)."""
    match = re.search(r"#define\s+NVSHMEMX_STATUS_LIST\(X\)((?:[^\n]*\\\n)*[^\n]*)", header_text)
    if not match:
        raise SystemExit("non_abi/nvshmemx_error.h: NVSHMEMX_STATUS_LIST not found")
    names = re.findall(r"X\((\w+)\)", match.group(1))
    members = tuple(EnumMember(name, value, "") for value, name in enumerate(names))
    return Enum("nvshmemx_status", "nvshmemx_status", members, "nvshmemx_error.h", 0)


def parse_group(group: Group, dirs: dict[str, Path]) -> HeaderSet:
    """The CUDA type headers, then the group's headers, in one namespace."""
    headers = HeaderSet()
    for name, tolerant in TYPE_HEADERS:
        headers.add(dirs["cuda"] / name, tolerant=tolerant)
    for key, rel, tolerant in group.headers:
        header = headers.add(dirs[key] / rel, tolerant=tolerant)
        if rel.endswith("nvshmemx_error.h"):
            header.enums.append(nvshmem_status_enum((dirs[key] / rel).read_text()))
    return headers


def allowed_functions(headers: HeaderSet, spec, module: str) -> list:
    """The allowlisted declarations of the module's headers; fails on a name no header declares."""
    declared = {f.name: f for name in spec.headers for f in headers.headers[name].functions}
    missing = sorted(set(ALLOWED[module]) - set(declared))
    if missing:
        raise SystemExit(f"{module}: allowlisted but not declared by {spec.headers}: {missing}")
    for func_name, param in PARAM_OVERRIDES_DIST:
        if func_name in declared and param not in {p.name for p in declared[func_name].params}:
            raise SystemExit(f"PARAM_OVERRIDES_DIST: {func_name} has no parameter {param}")
    return [declared[name] for name in ALLOWED[module]]


def generate_dist(
    cuda: Path,
    specs: dict[str, object],
    model_cls: type,
    classify: Callable,
    emit: Callable[[object, object, list, str], tuple[str, dict[str, str], str]],
    provided: dict[str, dict[str, str]],
) -> dict[str, str]:
    """``{file name: source}`` of the distributed modules (and their unchecked twins)."""
    dirs = include_dirs(cuda)
    sources: dict[str, str] = {}
    for group in GROUPS:
        spec = specs[group.module]
        headers = parse_group(group, dirs)
        model = model_cls(headers)
        functions = [classify(model, f, spec) for f in allowed_functions(headers, spec, group.module)]
        functions = [
            dataclasses.replace(f, returns="status") if f.c.name in INT_STATUS else f for f in functions
        ]
        clashes = sorted(n for n, c in Counter(f.name for f in functions).items() if c > 1)
        if clashes:
            raise SystemExit(f"{group.module}: Python name clashes {clashes}")
        functions.sort(key=lambda f: f.name)
        for name, source in emit(spec, model, functions, provided).items():
            sources[name] = source
    return sources
