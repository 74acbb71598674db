"""Build nvmath._fastcall in place without setuptools (for machines without it or without a registry).

Compiles ``nvmath/_fastcall.c`` into ``nvmath/_fastcall<EXT_SUFFIX>`` with the C compiler and flags this
interpreter was built with (``sysconfig``): the same result as ``python setup.py build_ext --inplace``.
Needs only a C compiler and Python's headers. Exit status 0 on success; 1 (with the compiler's output)
otherwise, after which nvmath keeps using its pure-Python path.

Usage::

    python3 tools/build_fastcall.py [--cc gcc]
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "nvmath" / "_fastcall.c"


def command(cc: str | None = None) -> list[str]:
    """The compile-and-link command line for this interpreter."""
    config = sysconfig.get_config_vars()
    compiler = shlex.split(cc or config.get("CC") or "cc")
    target = ROOT / "nvmath" / ("_fastcall" + config["EXT_SUFFIX"])
    includes = {sysconfig.get_path("include"), sysconfig.get_path("platinclude")}
    return [
        *compiler, "-shared", "-fPIC", "-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter",
        *(f"-I{path}" for path in sorted(includes)), str(SOURCE), "-o", str(target),
    ]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cc", help="the C compiler (default: the one Python was built with)")
    args = parser.parse_args()
    # The configured compiler, then the usual names (Python may have been built with one not installed).
    for cc in [args.cc] if args.cc else [None, "cc", "gcc"]:
        cmd = command(cc)
        print(" ".join(cmd))
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            break
        except FileNotFoundError as exc:
            print(f"no such compiler: {exc}", file=sys.stderr)
    else:
        return 1
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
