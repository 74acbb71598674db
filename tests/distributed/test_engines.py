"""The engine bootstrap's C structures: NVSHMEM's init attribute built to its documented layout (a
ctypes mirror of device_host/nvshmem_types.h as the reference), and, where the NVSHMEM and NCCL
host libraries are installed, the real libraries filling our buffers at the offsets we read (no GPU
needed)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from nvmath._errors import LibraryNotFoundError
from nvmath.bindings import _loader
from nvmath.distributed import _engines


class _UidArgs(ctypes.Structure):
    _fields_ = [("version", ctypes.c_int), ("id", ctypes.c_void_p), ("myrank", ctypes.c_int),
                ("nranks", ctypes.c_int)]  # fmt: skip


class _InitArgs(ctypes.Structure):
    _fields_ = [("version", ctypes.c_int), ("uid_args", _UidArgs), ("cuda_device_id", ctypes.c_int),
                ("content", ctypes.c_char * 92)]  # fmt: skip


class _InitAttr(ctypes.Structure):
    _fields_ = [("version", ctypes.c_int), ("mpi_comm", ctypes.c_void_p), ("args", _InitArgs)]


def test_init_attr_buffer_matches_the_c_layout_and_initializer():
    """The buffer is sizeof(nvshmemx_init_attr_t) and holds NVSHMEMX_INIT_ATTR_INITIALIZER's values."""
    assert ctypes.sizeof(_InitAttr) == _engines.NVSHMEM_INIT_ATTR_BYTES == 144
    attr = _InitAttr.from_buffer_copy(_engines.init_attr_buffer().tobytes())
    assert attr.version == (2 << 16) + 144 and attr.mpi_comm is None
    assert attr.args.version == (2 << 16) + 128 and attr.args.cuda_device_id == -1
    uid = attr.args.uid_args
    assert (uid.version, uid.id, uid.myrank, uid.nranks) == ((1 << 16) + 24, None, -1, -1)
    for name, field in (("args.uid_args.id", "id"), ("args.uid_args.myrank", "myrank")):
        offset = _InitAttr.args.offset + _InitArgs.uid_args.offset + getattr(_UidArgs, field).offset
        assert _engines.INIT_ATTR_FIELDS[name][0] == offset


def _require(library: str) -> None:
    try:
        _loader.library_info(library)
    except LibraryNotFoundError:
        pytest.skip(f"lib{library} is not installed (pip install 'nvmath-kit[distributed]')")


def test_real_nvshmem_fills_our_buffers():
    """nvshmemx_get_uniqueid and nvshmemx_set_attr_uniqueid_args write the id, rank and size where
    we read them."""
    _require("nvshmem_host")
    from nvmath.bindings import nvshmem

    uid = np.zeros(_engines.NVSHMEM_UNIQUEID_BYTES, np.uint8)
    nvshmem.get_uniqueid(uid.ctypes.data)
    assert uid.any()
    attr = _engines.init_attr_buffer()
    nvshmem.set_attr_uniqueid_args(3, 8, uid.ctypes.data, attr.ctypes.data)
    assert _engines.read_field(attr, "args.uid_args.id") == uid.ctypes.data
    assert _engines.read_field(attr, "args.uid_args.myrank") == 3
    assert _engines.read_field(attr, "args.uid_args.nranks") == 8
    assert nvshmem.init_status() < _engines.NVSHMEM_STATUS_IS_INITIALIZED


def test_real_nccl_makes_a_unique_id():
    """ncclGetUniqueId fills the 128-byte id; ncclGetVersion reads a 2.x version (the GPU machines' torch
    ships 2.28; cuBLASMp's minimum, 2.29.2, is the [distributed] extra's pin, not every NCCL's)."""
    _require("nccl")
    from nvmath.bindings import nccl

    uid = np.zeros(_engines.NCCL_UNIQUE_ID_BYTES, np.uint8)
    nccl.get_unique_id(uid.ctypes.data)
    assert uid.any()
    assert 21800 <= nccl.get_version() < 30000
    assert "invalid argument" in nccl.get_error_string(nccl.Result.INVALID_ARGUMENT).lower()


def test_nvshmem_for_cufftmp_same_major_and_not_older():
    """cuFFTMp 12.1.3 (built with NVSHMEM 3.3.24, its device part linked in) runs with a host
    NVSHMEM 3.3.24 or newer 3.x; an older or another major host library is refused naming both
    versions; unknown versions are not checked."""
    assert _engines.CUFFTMP_NVSHMEM[(12, 1, 3)] == (3, 3, 24)
    for host in ((3, 3, 24), (3, 4, 5), (3, 8, 0)):
        _engines.check_nvshmem_for_cufftmp(host, (12, 1, 3))
    for host in ((3, 3, 1), (3, 2, 5), (4, 0, 0), (2, 11, 0)):
        with pytest.raises(RuntimeError, match=r"cuFFTMp 12\.1\.3 was built with NVSHMEM 3\.3\.24.*"
                           + r"\.".join(map(str, host))):  # fmt: skip
            _engines.check_nvshmem_for_cufftmp(host, (12, 1, 3))
    _engines.check_nvshmem_for_cufftmp(None, (12, 1, 3))
    _engines.check_nvshmem_for_cufftmp((3, 0, 0), (99, 0, 0))


def test_nvshmem_host_of_another_major_is_refused():
    """The bootstrap is written for NVSHMEM 3's ABI: a host library of another major is refused."""
    _engines.check_nvshmem_host((3, 4, 5))
    _engines.check_nvshmem_host(None)
    with pytest.raises(RuntimeError, match=r"NVSHMEM host library 4\.0\.1 is loaded.*3\.x"):
        _engines.check_nvshmem_host((4, 0, 1))


def test_mapped_libraries_lists_distinct_files():
    """Distinct files of a library stem in a /proc/self/maps text, in order (several mappings of one
    file count once; a longer stem such as libcufftMp is not libcufft)."""
    maps = "\n".join([
        "7f00-7f01 r--p 00000000 08:01 11 /a/nvshmem/lib/libnvshmem_host.so.3",
        "7f01-7f02 r-xp 00001000 08:01 11 /a/nvshmem/lib/libnvshmem_host.so.3",
        "7f02-7f03 r--p 00000000 08:01 12 /b/nvshmem/lib/libnvshmem_host.so.3",
        "7f03-7f04 r--p 00000000 08:01 13 /c/libcufftMp.so.12",
        "7f04-7f05 rw-p 00000000 00:00 0 ",
        "7f05-7f06 r--p 00000000 08:01 14 /d/libcufft.so.12",
    ])  # fmt: skip
    assert _engines.mapped_libraries("libnvshmem_host", maps) == [
        "/a/nvshmem/lib/libnvshmem_host.so.3", "/b/nvshmem/lib/libnvshmem_host.so.3"]  # fmt: skip
    assert _engines.mapped_libraries("libcufft", maps) == ["/d/libcufft.so.12"]
    assert _engines.mapped_libraries("libcublasmp", maps) == []
    assert isinstance(_engines.mapped_libraries("libc"), list)  # this process's own maps


def test_real_nvshmem_reports_its_vendor_version():
    """Where the NVSHMEM host library is installed, its vendor version (not the OpenSHMEM spec
    version) is read, and it is a 3.x the bootstrap accepts."""
    try:
        _loader.library_info("nvshmem_host")
    except LibraryNotFoundError as exc:
        pytest.skip(f"libnvshmem_host is not installed (pip install 'nvmath-kit[distributed]'): {exc}")
    version = _engines.nvshmem_host_version()
    assert version is not None and version[0] == 3 and version >= (3, 0, 0)
    _engines.check_nvshmem_host(version)
