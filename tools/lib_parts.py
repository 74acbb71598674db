"""Move a file larger than one device-tool transfer (64 MiB) to the GPU machine in parts.

The engine wheels of ``nvmath.distributed`` exceed one transfer (cuFFTMp 205 MB, NCCL 305 MB); they
are already compressed, so they are split as they are, carried one part per run while the machine
stays warm, and joined there, where ``join`` checks every part and the whole against the manifest::

    python tools/lib_parts.py split /tmp/w/nvidia_cufftmp_cu13-12.1.3.2-*.whl .libparts/cufftmp
    # one device run per part (carry: [".libparts/cufftmp/part-00", ".libparts/cufftmp/manifest.json"]):
    #   mkdir -p /tmp/parts && cp .libparts/cufftmp/* /tmp/parts/
    # then, in the run carrying the last part:
    #   python3 tools/lib_parts.py join /tmp/parts /tmp/whl/<wheel name from the manifest>

Exit status of ``join``: 0 joined and verified; 1 a part is missing or corrupt (the message names it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

PART_BYTES = 52 * 2**20  # a transfer takes 64 MiB in all, and the checkout itself is ~7 MB


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def split(source: Path, out_dir: Path, part_bytes: int = PART_BYTES) -> dict:
    """Write ``part-NN`` files and ``manifest.json`` (name, size, sha256 of the whole and of each part)."""
    data = source.read_bytes()
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = []
    for index, start in enumerate(range(0, max(len(data), 1), part_bytes)):
        chunk = data[start : start + part_bytes]
        name = f"part-{index:02d}"
        (out_dir / name).write_bytes(chunk)
        parts.append({"name": name, "bytes": len(chunk), "sha256": _sha256(chunk)})
    manifest = {"name": source.name, "bytes": len(data), "sha256": _sha256(data), "parts": parts}
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def join(parts_dir: Path, target: Path) -> None:
    """Concatenate the parts listed in ``parts_dir/manifest.json`` into ``target``, verifying each.

    Raises:
        ValueError: a part is missing or its checksum differs, or the joined file's does.
    """
    manifest = json.loads((parts_dir / "manifest.json").read_text())
    chunks = []
    for part in manifest["parts"]:
        path = parts_dir / part["name"]
        if not path.exists():
            raise ValueError(f"{part['name']} of {manifest['name']} is missing in {parts_dir}")
        chunk = path.read_bytes()
        if _sha256(chunk) != part["sha256"]:
            raise ValueError(f"{part['name']} of {manifest['name']} is corrupt (sha256 differs)")
        chunks.append(chunk)
    data = b"".join(chunks)
    if _sha256(data) != manifest["sha256"] or len(data) != manifest["bytes"]:
        raise ValueError(f"the joined {manifest['name']} does not match its manifest")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("split", help="split FILE into OUT_DIR/part-NN + manifest.json")
    s.add_argument("file", type=Path)
    s.add_argument("out_dir", type=Path)
    j = sub.add_parser("join", help="join PARTS_DIR into TARGET, verifying checksums")
    j.add_argument("parts_dir", type=Path)
    j.add_argument("target", type=Path)
    args = parser.parse_args(argv)
    if args.command == "split":
        manifest = split(args.file, args.out_dir)
        print(f"{manifest['name']}: {len(manifest['parts'])} part(s) in {args.out_dir}")
        return 0
    try:
        join(args.parts_dir, args.target)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"joined {args.target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
