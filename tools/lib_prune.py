"""Shrink an NVIDIA shared library for one GPU architecture before it travels to a GPU machine.

The engine libraries of ``nvmath.distributed`` (NCCL 344 MB, cuFFTMp 299 MB unpacked) exceed what a
device-tool transfer takes many times over; most of each is device code for other GPU architectures
and debug sections. This tool writes a copy of the same size in which what an ``sm_XY`` GPU never
reads is zeroed, so the copy compresses to a fraction (NCCL: 34 MB with ``xz -6``):

* ELF sections ``.debug*`` that are not allocated (the dynamic loader never maps them);
* in every fatbin container (magic ``0xBA55ED50``), the payload of each entry that the GPU cannot
  use: a cubin (kind 2) of another architecture, and a PTX entry (kind 1) newer than the GPU (it
  cannot be JIT-compiled for it). Older PTX and LTO-IR entries stay (cuFFT JIT-compiles kernels from
  them at run time); ``--cubins-only`` keeps every PTX entry too.

The headers of every entry stay intact, and the code for the target architecture is byte-identical:
the driver picks its entry by the headers. Usage::

    python tools/lib_prune.py libnccl.so.2 /tmp/libnccl.so.2 --arch 90
    python tools/lib_prune.py libcufftMp.so.12 /tmp/libcufftMp.so.12 --arch 90   # 299 MB -> 150 MB as .xz
    xz -6 -k /tmp/libnccl.so.2 && python tools/lib_parts.py split /tmp/libnccl.so.2.xz .eng/nccl

Say in any result produced with such a copy that it was pruned (the closing notes do).
"""

from __future__ import annotations

import argparse
import struct
from collections.abc import Iterator
from pathlib import Path

FATBIN_MAGIC = b"\x50\xed\x55\xba"
KIND_PTX, KIND_CUBIN = 1, 2
_ENTRY_KINDS = (1, 2, 8, 16)
_SHF_ALLOC = 2


def sections(data: bytes) -> Iterator[tuple[str, int, int, int]]:
    """``(name, flags, offset, size)`` of each section of a little-endian ELF64 image."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a little-endian ELF64 file")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    entsize, count, names = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * entsize) for i in range(count)]
    table = headers[names][4]
    for name_off, _type, flags, _addr, offset, size, *_ in headers:
        end = data.index(b"\0", table + name_off)
        yield data[table + name_off : end].decode(), flags, offset, size


def fatbin_entries(data: bytes) -> Iterator[tuple[int, int, int, int, int]]:
    """``(entry offset, kind, arch, header size, payload size)`` of every entry of every well-formed
    fatbin container (8-byte aligned magic, 16-byte header, entries that tile its size)."""
    pos = 0
    while (i := data.find(FATBIN_MAGIC, pos)) >= 0:
        pos = i + 4
        if i % 8 or i + 16 > len(data):
            continue
        _version, header, size = struct.unpack_from("<HHQ", data, i + 4)
        end = i + 16 + size
        if header != 16 or size == 0 or end > len(data):
            continue
        found, e = [], i + 16
        while e + 32 <= end:
            kind, _ver, ehs, psize = struct.unpack_from("<HHIQ", data, e)
            if kind not in _ENTRY_KINDS or not 32 <= ehs <= 256:
                break
            found.append((e, kind, struct.unpack_from("<I", data, e + 28)[0], ehs, psize))
            e += ehs + psize
        if e == end:  # the entries tile the container exactly: a real one
            yield from found
            pos = end


def unused(kind: int, arch: int, target: int, cubins_only: bool) -> bool:
    """Whether an ``sm_<target>`` GPU never reads a fatbin entry of this kind and architecture."""
    if kind == KIND_CUBIN:
        return arch != target
    return kind == KIND_PTX and arch > target and not cubins_only


def prune(data: bytes, target: int, cubins_only: bool = False) -> tuple[bytes, int]:
    """The pruned copy of ``data`` and the number of bytes zeroed (see the module docstring)."""
    out = bytearray(data)
    zeroed = 0
    for name, flags, offset, size in sections(data):
        if name.startswith(".debug") and not flags & _SHF_ALLOC:
            out[offset : offset + size] = bytes(size)
            zeroed += size
    for e, kind, arch, ehs, psize in fatbin_entries(data):
        if unused(kind, arch, target, cubins_only):
            out[e + ehs : e + ehs + psize] = bytes(psize)
            zeroed += psize
    return bytes(out), zeroed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--arch", type=int, required=True, help="the GPU's sm number, e.g. 90 for H100/H200")
    parser.add_argument("--cubins-only", action="store_true", help="keep every PTX and LTO-IR entry")
    args = parser.parse_args(argv)
    data = args.source.read_bytes()
    pruned, zeroed = prune(data, args.arch, args.cubins_only)
    args.target.write_bytes(pruned)
    print(f"{args.source}: zeroed {zeroed} of {len(data)} bytes -> {args.target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
