"""tools/lib_prune.py: what an sm_90 GPU never reads is zeroed (debug sections, other architectures'
cubins, newer PTX), everything else of the file stays byte-identical (a synthetic ELF with a fatbin)."""

from __future__ import annotations

import importlib.util
import pathlib
import struct

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def lp():
    spec = importlib.util.spec_from_file_location("lib_prune", ROOT / "tools" / "lib_prune.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _entry(kind: int, arch: int, payload: bytes) -> bytes:
    header = bytearray(64)
    struct.pack_into("<HHIQ", header, 0, kind, 0x0101, 64, len(payload))
    struct.pack_into("<I", header, 28, arch)
    return bytes(header) + payload


def _elf(fatbin: bytes, debug: bytes) -> tuple[bytes, dict[str, tuple[int, int]]]:
    """An ELF64 image with .shstrtab, .debug_info (not allocated) and .nv_fatbin (allocated)."""
    names = b"\0.shstrtab\0.debug_info\0.nv_fatbin\0"
    body, where, offset = b"", {}, 64
    for name, content in ((".shstrtab", names), (".debug_info", debug), (".nv_fatbin", fatbin)):
        pad = (-offset) % 8
        body += bytes(pad)
        offset += pad
        where[name] = (offset, len(content))
        body += content
        offset += len(content)
    pad = (-offset) % 8
    body += bytes(pad)
    shoff = offset + pad
    header = bytearray(64)
    header[:7] = b"\x7fELF\x02\x01\x01"
    struct.pack_into("<Q", header, 0x28, shoff)
    struct.pack_into("<HHH", header, 0x3A, 64, 4, 1)
    shdrs = bytes(64)
    for name, flags in ((".shstrtab", 0), (".debug_info", 0), (".nv_fatbin", 2)):
        off, size = where[name]
        shdrs += struct.pack("<IIQQQQIIQQ", names.index(name.encode()), 1, flags, 0, off, size, 0, 0, 8, 0)
    return bytes(header) + body + shdrs, where


def test_prune_zeroes_what_sm90_never_reads_and_keeps_the_rest(lp):
    entries = [_entry(2, 80, b"A" * 16), _entry(2, 90, b"B" * 24), _entry(1, 120, b"C" * 8), _entry(1, 90, b"D" * 8)]
    body = b"".join(entries)
    fatbin = b"\x50\xed\x55\xba" + struct.pack("<HHQ", 1, 16, len(body)) + body
    data, where = _elf(fatbin, b"debug info bytes")
    out, zeroed = lp.prune(data, 90)
    assert len(out) == len(data) and zeroed == 16 + 16 + 8
    assert out.count(b"B" * 24) == 1 and out.count(b"D" * 8) == 1  # sm_90 cubin and its PTX kept
    assert b"A" not in out and b"C" * 8 not in out and b"debug info" not in out
    changed = [i for i in range(len(data)) if data[i] != out[i]]
    fat_off = where[".nv_fatbin"][0]
    for i in changed:  # only payload bytes of dropped entries and the debug section changed
        assert where[".debug_info"][0] <= i < sum(where[".debug_info"]) or fat_off < i < fat_off + len(fatbin)
    kept, _ = lp.prune(data, 90, cubins_only=True)
    assert kept.count(b"C" * 8) == 1 and b"A" not in kept


def test_a_false_magic_is_not_a_container(lp):
    """Bytes that look like a fatbin magic but whose entries do not tile a container are left alone."""
    junk = b"\x50\xed\x55\xba" + struct.pack("<HHQ", 1, 16, 40) + bytes(40)
    data, _ = _elf(junk, b"")
    assert list(lp.fatbin_entries(data)) == []
    assert lp.prune(data, 90)[0] == data


def test_not_an_elf_is_refused(lp, tmp_path):
    with pytest.raises(ValueError, match="ELF64"):
        lp.prune(b"MZ not an elf", 90)
