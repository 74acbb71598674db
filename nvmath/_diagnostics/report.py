"""The environment report of ``python -m nvmath``.

:func:`collect` gathers the facts as plain data (what ``--json`` prints); :func:`format_report`
turns them into the text report. Every probe is defensive: a missing package, driver or library
is reported, never raised.
"""

from __future__ import annotations

import importlib.metadata as md
import platform
import subprocess
import sys
from pathlib import Path
from collections.abc import Iterator
from typing import Any

PACKAGES = (
    "cuda-core",
    "cuda-bindings",
    "cuda-pathfinder",
    "numpy",
    "ml-dtypes",
    "scipy",
    "cupy-cuda13x",
    "torch",
    "jax",
    "numba",
    "numba-cuda",
    "nvidia-cublas",
    "nvidia-cufft",
    "nvidia-cusolver",
)

LIBRARIES = ("cublasLt", "cublas", "cufft", "cusolver")

NOT_INSTALLED = "not installed"


def package_version(dist: str) -> str:
    """The installed version of distribution ``dist``, or ``"not installed"``."""
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return NOT_INSTALLED


def driver_info() -> dict[str, Any]:
    """``{"driver": version or None, "error": why not or None, "devices": [one dict per GPU]}``."""
    try:
        from cuda.bindings import driver
    except Exception as exc:  # pragma: no cover - dependency
        return {"driver": None, "error": f"cuda-bindings unavailable ({exc})", "devices": []}
    try:
        (err,) = driver.cuInit(0)
        if int(err) != 0:
            return {"driver": None, "error": err.name, "devices": []}
        err, version = driver.cuDriverGetVersion()
        err, count = driver.cuDeviceGetCount()
    except Exception as exc:
        return {"driver": None, "error": f"{type(exc).__name__}: {exc}", "devices": []}
    devices = [_describe_device(driver, ordinal) for ordinal in range(count)]
    return {"driver": f"{version // 1000}.{(version % 1000) // 10}", "error": None, "devices": devices}


def _describe_device(driver, ordinal: int) -> dict[str, Any]:
    err, dev = driver.cuDeviceGet(ordinal)
    err, raw = driver.cuDeviceGetName(256, dev)
    name = raw.split(b"\0", 1)[0].decode(errors="replace")
    attr = driver.CUdevice_attribute
    _, major = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    _, minor = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
    _, sms = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)
    _, mem = driver.cuDeviceTotalMem(dev)
    return {
        "ordinal": ordinal,
        "name": name,
        "compute_capability": f"{major}.{minor}",
        "sm_count": int(sms),
        "memory_gib": round(mem / 2**30, 1),
    }


def _device_line(device: dict[str, Any]) -> str:
    return (
        f"GPU {device['ordinal']}: {device['name']}, compute capability {device['compute_capability']}, "
        f"{device['sm_count']} SMs, {device['memory_gib']:.1f} GiB"
    )


def driver_and_devices() -> tuple[str, list[str]]:
    """The CUDA driver version and one line per visible GPU; ``("none (why)", [])`` without a driver."""
    info = driver_info()
    if info["driver"] is None:
        return f"none ({info['error']})", []
    return info["driver"], [_device_line(d) for d in info["devices"]]


def library_info() -> dict[str, dict[str, Any]]:
    """Per CUDA math library: ``{"version", "path", "found_via"}``, or ``{"error"}`` when not found."""
    try:
        from nvmath.bindings import _loader
    except Exception as exc:
        return {name: {"error": f"bindings unavailable: {type(exc).__name__}: {exc}"} for name in LIBRARIES}
    out: dict[str, dict[str, Any]] = {}
    for name in LIBRARIES:
        try:
            info = _loader.library_info(name)
            out[name] = {"version": info.get("version"), "path": info.get("path"), "found_via": info.get("found_via")}
        except Exception as exc:
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def call_path() -> dict[str, Any]:
    """Which library-call path is active: ``{"compiled": bool, "detail": why}`` (see
    ``nvmath._internal.fastpath``)."""
    try:
        from nvmath._internal import fastpath
    except Exception as exc:  # noqa: BLE001 - reported, never raised
        return {"compiled": False, "detail": f"unknown ({type(exc).__name__}: {exc})"}
    return {"compiled": fastpath.available(), "detail": fastpath.describe()}


def _git(location: str, *args: str) -> str:
    proc = subprocess.run(["git", "-C", location, *args], capture_output=True, text=True, timeout=5, check=True)
    return proc.stdout.strip()


def source_commit(location: str) -> str | None:
    """The git commit of a source checkout at ``location`` (``+dirty`` when modified), or ``None``."""
    if not (Path(location) / ".git").exists():
        return None
    try:
        commit = _git(location, "rev-parse", "--short=12", "HEAD")
        return commit + ("+dirty" if _git(location, "status", "--porcelain", "--untracked-files=no") else "")
    except Exception:  # noqa: BLE001 - no git, not a repository, ...: the report leaves it out
        return None


def collect() -> dict[str, Any]:
    """The whole environment report as JSON-ready data."""
    import nvmath

    location = nvmath.__file__.rsplit("/", 2)[0]
    return {
        "python": {"version": sys.version.split()[0], "platform": platform.platform(), "executable": sys.executable},
        "nvmath": {"version": nvmath.__version__, "location": location, "commit": source_commit(location)},
        "packages": {dist: package_version(dist) for dist in PACKAGES},
        "cuda": driver_info(),
        "libraries": library_info(),
        "call_path": call_path(),
    }


def format_report(data: dict[str, Any]) -> Iterator[str]:
    """The text report of :func:`collect`'s ``data``, line by line."""
    py, nv, cuda = data["python"], data["nvmath"], data["cuda"]
    yield "nvmath environment"
    yield f"  python     {py['version']} ({py['platform']})"
    commit = f", commit {nv['commit']}" if nv.get("commit") else ""
    yield f"  nvmath     {nv['version']} ({nv['location']}{commit})"
    yield f"  call path  {data['call_path']['detail']}"
    for dist, version in data["packages"].items():
        yield f"  {dist:<16} {version}"
    yield f"CUDA driver: {cuda['driver'] or 'none (' + str(cuda['error']) + ')'}"
    lines = [_device_line(d) for d in cuda["devices"]] or ["no GPU found"]
    for line in lines:
        yield f"  {line}"
    yield "CUDA math libraries (loaded through cuda.pathfinder):"
    for name, info in data["libraries"].items():
        if "error" in info:
            yield f"  {name:<9} NOT FOUND: {info['error']}"
        else:
            yield f"  {name:<9} {info.get('version', '?')!s:<10} {info.get('path', '?')}"


def report_lines() -> Iterator[str]:
    """The whole text report, line by line."""
    yield from format_report(collect())
