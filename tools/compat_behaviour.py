"""The behaviour section of ``tools/compat_surface.py``: calls written as nvmath-python 1.0 users write
them, checked for nvmath-python's results, accepted inputs and exception types (issue #22).

Each probe runs on the CPU (no GPU, no driver) and returns ``""`` when nvmath behaves as nvmath-python
does, else what differs. GPU-only behaviours (cuFFT's half-precision sizes, the allocator's null
stream, FP8 backward epilogs) are covered by the GPU tests under ``tests/compat``.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable

import numpy as np

PROBES: list[tuple[str, Callable[[], str]]] = []


def probe(what: str) -> Callable[[Callable[[], str]], Callable[[], str]]:
    def register(fn: Callable[[], str]) -> Callable[[], str]:
        PROBES.append((what, fn))
        return fn

    return register


def _raises(call: Callable[[], object], error: type, not_error: type | None = None) -> str:
    try:
        call()
    except error as exc:
        if not_error is not None and isinstance(exc, not_error):
            return f"raised {type(exc).__name__} (a {not_error.__name__})"
        return ""
    except Exception as exc:  # noqa: BLE001 - the wrong type is the finding
        return f"raised {type(exc).__name__}: {exc}"
    return f"no {error.__name__} raised"


@probe("FFT.reset_operand_unchecked with another batch arrangement: right result or ValueError")
def _fft_unchecked() -> str:
    import nvmath.fft

    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 16)) + 0j
    y = rng.standard_normal((3, 2, 16)) + 0j
    with nvmath.fft.FFT(x, axes=(2,)) as f:
        f.plan()
        try:
            f.reset_operand_unchecked(y)
        except ValueError:
            return ""
        got = f.execute()
    ok = got.shape == y.shape and np.allclose(got, np.fft.fft(y, axis=2))
    return "" if ok else f"result of shape {got.shape} differs from numpy's"


@probe("get_block_scale_offset takes a block index ((5, 2) of a 128x128 NVFP4 operand is 82)")
def _block_offset() -> str:
    from nvmath.linalg.advanced.helpers.matmul import BlockScalingFormat, get_block_scale_offset

    got = get_block_scale_offset((5, 2), (128, 128), BlockScalingFormat.NVFP4, axis=-1)
    return "" if got == 82 else f"got {got}"


@probe("expand_block_scale 'smallest': float8_e4m3fn (NVFP4, uint8 scales accepted), uint8 (MXFP8)")
def _expand_smallest() -> str:
    try:
        import torch
    except ImportError:
        return ""  # the helpers are torch-only in nvmath-python
    from nvmath.linalg.advanced.helpers.matmul import expand_block_scale

    nv = expand_block_scale(torch.full((512,), 56, dtype=torch.uint8), (128, 64), "NVFP4", axis=-1)
    mx = expand_block_scale(torch.full((512,), 130, dtype=torch.uint8), (128, 128), "MXFP8", axis=-1)
    if nv.dtype != torch.float8_e4m3fn or mx.dtype != torch.uint8 or int(mx[0, 0]) != 130:
        return f"got {nv.dtype} / {mx.dtype}"
    return _raises(
        lambda: expand_block_scale(torch.full((512,), 130, dtype=torch.uint8), (128, 128), "MXFP8",
                                   axis=-1, output_dtype=torch.int32), TypeError)  # fmt: skip


@probe("generic matmul: c broadcast over the batch dimensions")
def _generic_c_broadcast() -> str:
    import nvmath.linalg

    a, b, c = np.ones((3, 4, 2)), np.ones((3, 2, 5)), np.arange(20.0).reshape(4, 5)
    got = nvmath.linalg.matmul(a, b, c, beta=1.0)
    return "" if np.allclose(got, a @ b + c) else "wrong values"


@probe("generic matmul: beta=0 does not read c (explicit sequences, in place)")
def _generic_beta_zero() -> str:
    import nvmath.linalg

    a, b = np.ones((3, 4)), np.ones((4, 5))
    c = np.full((3, 5), np.nan)
    got = nvmath.linalg.matmul([a], [b], [c], beta=0.0, options={"inplace": True})[0]
    return "" if np.allclose(got, a @ b) else "NaN in c reached the result"


@probe("generic reset_operands with another package: TypeError; free() drops the operands")
def _generic_reset_free() -> str:
    import nvmath.linalg

    a = np.ones((2, 2))
    mm = nvmath.linalg.Matmul(a, a)
    mm.plan()
    try:
        import torch

        why = _raises(lambda: mm.reset_operands(a=torch.ones(2, 2, dtype=torch.float64)), TypeError)
    except ImportError:
        why = ""
    ref = weakref.ref(a)
    mm.free()
    del a
    gc.collect()
    return why or ("" if ref() is None else "the freed Matmul keeps its operands alive")


@probe("estimate_workspace_size with a malformed key: ValueError")
def _estimate_bad_key() -> str:
    import nvmath.fft

    return _raises(lambda: nvmath.fft.estimate_workspace_size(("not", "a", "key")), ValueError)


@probe("rfft(options={'fft_type': 'C2C'}) on a real operand raises (the option is not ignored)")
def _rfft_type() -> str:
    import nvmath.fft

    return _raises(lambda: nvmath.fft.rfft(np.ones(8), options={"fft_type": "C2C"}), ValueError)


@probe("execution dict without 'name': the operands' memory space")
def _execution_dict() -> str:
    import nvmath.fft

    got = nvmath.fft.fft(np.ones(4, complex), execution={"num_threads": 1})
    return "" if np.allclose(got, np.fft.fft(np.ones(4))) else "wrong values"


@probe("DeviceCallable(bytes): size is the length, data 0")
def _device_callable() -> str:
    from nvmath.fft import DeviceCallable

    cb = DeviceCallable(b"1234")
    return "" if (cb.size, cb.data) == (4, 0) else f"size {cb.size}, data {cb.data}"


@probe("a second MemoryPointer.free() raises RuntimeError")
def _memory_pointer() -> str:
    from nvmath.memory import MemoryPointer

    mp = MemoryPointer(0x1000, 8, lambda: None)
    mp.free()
    return _raises(mp.free, RuntimeError)


@probe("matrix qualifier classes have to_string()")
def _qualifier_to_string() -> str:
    from nvmath.linalg import GeneralMatrixQualifier

    text = GeneralMatrixQualifier.to_string(GeneralMatrixQualifier.create())
    return "" if text.startswith("(ge, conjugate=False") else f"got {text!r}"


@probe("Algorithm.algorithm is the heuristic record")
def _algorithm_attribute() -> str:
    import nvmath.linalg.advanced as adv
    from nvmath.bindings import cublasLt

    alg = adv.Algorithm(np.zeros((), dtype=cublasLt.matmul_heuristic_result_dtype))
    return "" if alg.algorithm.dtype == cublasLt.matmul_heuristic_result_dtype else "no record"


@probe("cuBLASLt-refused epilogs raise cuBLASLtError")
def _epilog_error() -> str:
    from nvmath.bindings.cublasLt import cuBLASLtError
    from nvmath.linalg.advanced._epilogs import EpilogNotSupported

    return "" if issubclass(EpilogNotSupported, cuBLASLtError) else "not a cuBLASLtError"


@probe("half-precision FFT sizes are left to cuFFT (no up-front ValueError)")
def _half_sizes() -> str:
    from nvmath.fft._traits import make_traits

    try:
        make_traits((4, 177), (177, 1), "float16", axes=(1,), execution="cuda", package="torch")
    except ValueError as exc:
        return f"refused: {exc}"
    return ""


@probe("import nvmath.sparse / nvmath.bindings.cusparse: an ImportError saying it is not provided")
def _not_provided() -> str:
    for name in ("nvmath.sparse", "nvmath.tensor", "nvmath.device", "nvmath.bindings.cusparse"):
        try:
            __import__(name)
        except ModuleNotFoundError as exc:
            return f"{name}: a bare ModuleNotFoundError: {exc}"
        except ImportError as exc:
            if "does not provide" not in str(exc):
                return f"{name}: {exc}"
        else:
            return f"{name} imported"
    return ""


def run() -> list[tuple[str, str]]:
    """``(what, why)`` of every probe; ``why`` is ``""`` for nvmath-python's behaviour."""
    out = []
    for what, fn in PROBES:
        try:
            why = fn()
        except Exception as exc:  # noqa: BLE001 - a crash is a difference
            why = f"{type(exc).__name__}: {exc}"
        out.append((what, why))
    return out
