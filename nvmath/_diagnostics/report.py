"""The environment report of ``python -m nvmath``.

Every probe is defensive: a missing package, driver or library is reported, never raised.
"""

from __future__ import annotations

import importlib.metadata as md
import platform
import sys
from collections.abc import Iterator

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


def package_version(dist: str) -> str:
    """The installed version of distribution ``dist``, or ``"not installed"``."""
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "not installed"


def driver_and_devices() -> tuple[str, list[str]]:
    """The CUDA driver version and one line per visible GPU; ``("none", [])`` without a driver."""
    try:
        from cuda.bindings import driver
    except Exception as exc:  # pragma: no cover - dependency
        return f"cuda-bindings unavailable ({exc})", []
    try:
        (err,) = driver.cuInit(0)
        if int(err) != 0:
            return f"none ({err.name})", []
        err, version = driver.cuDriverGetVersion()
        err, count = driver.cuDeviceGetCount()
    except Exception as exc:
        return f"none ({type(exc).__name__}: {exc})", []
    devices = []
    for ordinal in range(count):
        devices.append(_describe_device(driver, ordinal))
    return f"{version // 1000}.{(version % 1000) // 10}", devices


def _describe_device(driver, ordinal: int) -> str:
    err, dev = driver.cuDeviceGet(ordinal)
    err, raw = driver.cuDeviceGetName(256, dev)
    name = raw.split(b"\0", 1)[0].decode(errors="replace")
    attr = driver.CUdevice_attribute
    _, major = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    _, minor = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
    _, sms = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)
    _, mem = driver.cuDeviceTotalMem(dev)
    return f"GPU {ordinal}: {name}, compute capability {major}.{minor}, {sms} SMs, {mem / 2**30:.1f} GiB"


def library_lines() -> Iterator[str]:
    """One line per CUDA math library: where it was loaded from and its version."""
    try:
        from nvmath.bindings import _loader
    except Exception as exc:
        yield f"  (bindings unavailable: {type(exc).__name__}: {exc})"
        return
    for name in LIBRARIES:
        try:
            info = _loader.library_info(name)
            yield f"  {name:<9} {info.get('version', '?')!s:<10} {info.get('path', '?')}"
        except Exception as exc:
            yield f"  {name:<9} NOT FOUND: {type(exc).__name__}: {exc}"


def report_lines() -> Iterator[str]:
    """The whole report, line by line."""
    import nvmath

    yield "nvmath environment"
    yield f"  python     {sys.version.split()[0]} ({platform.platform()})"
    yield f"  nvmath     {nvmath.__version__} ({nvmath.__file__.rsplit('/', 2)[0]})"
    for dist in PACKAGES:
        yield f"  {dist:<16} {package_version(dist)}"
    version, devices = driver_and_devices()
    yield f"CUDA driver: {version}"
    for line in devices or ["no GPU: the self-test runs its CPU checks only"]:
        yield f"  {line}"
    yield "CUDA math libraries (loaded through cuda.pathfinder):"
    yield from library_lines()
