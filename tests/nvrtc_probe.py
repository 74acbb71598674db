"""NVRTC for the kernel-source tests: the PTX of a CUDA C++ source for one architecture, made on a machine
without a GPU (the NVRTC wheel compiles without a device); the calling test skips where NVRTC is not
loadable and fails with NVRTC's log where the source does not compile."""

from __future__ import annotations

from collections.abc import Iterable

import pytest


def compile_ptx(source: str, file_name: str, names: Iterable[str], arch: str) -> str:
    """The PTX of ``source`` for ``--gpu-architecture=arch`` (C++17), with the template instantiations
    ``names`` requested as name expressions."""
    binding = pytest.importorskip("cuda.bindings.nvrtc")
    try:
        err, prog = binding.nvrtcCreateProgram(source.encode(), file_name.encode(), 0, [], [])
    except Exception as exc:  # noqa: BLE001 - no libnvrtc on this machine
        pytest.skip(f"NVRTC is not loadable: {exc}")
    assert err == binding.nvrtcResult.NVRTC_SUCCESS
    for name in names:
        binding.nvrtcAddNameExpression(prog, name.encode())
    opts = [f"--gpu-architecture={arch}".encode(), b"-std=c++17"]
    (err,) = binding.nvrtcCompileProgram(prog, len(opts), opts)
    # NVRTC writes into the buffers it is given: bytearrays, never bytes (``b" " * 1`` is CPython's
    # shared one-byte object, and an empty log is one byte: writing its NUL there corrupts every b" ")
    _, size = binding.nvrtcGetProgramLogSize(prog)
    log = bytearray(size)
    binding.nvrtcGetProgramLog(prog, log)
    assert err == binding.nvrtcResult.NVRTC_SUCCESS, bytes(log).decode(errors="replace")
    _, size = binding.nvrtcGetPTXSize(prog)
    ptx = bytearray(size)
    binding.nvrtcGetPTX(prog, ptx)
    binding.nvrtcDestroyProgram(prog)
    return bytes(ptx).decode(errors="replace")
