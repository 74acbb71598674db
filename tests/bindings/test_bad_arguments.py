"""Every binding function, called with wrong-typed and out-of-range arguments, raises a Python error.

The cases are generated from the bindings' own parameter tables (``_ARG_KINDS``, written by
``tools/gen_bindings.py`` from the C headers): for each function and each parameter, the other
parameters get valid placeholder values and the parameter gets each bad value of its kind. The calls
run in a subprocess, so a crash (the failure this guards against) fails the test instead of killing
the run; the subprocess also checks that no library was loaded, i.e. every refusal happened in
Python before any C code could see the value. No GPU or driver is needed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Runs in the subprocess; prints one JSON summary line.
SCRIPT = textwrap.dedent(
    r"""
    import json, sys
    import numpy as np
    from nvmath.bindings import _loader, cublas, cublasLt, cufft, cusolver, cusolverDn
    from nvmath.bindings import cublasMp, cufftMp, nccl, nvshmem

    MODULES = (cublas, cublasLt, cufft, cusolver, cusolverDn, nccl, nvshmem, cublasMp, cufftMp)
    VALID = {"ptr": 0, "str": None, "f32": 0.0, "f64": 0.0, "char": 0, "bool": 0}
    WRONG_TYPE = ("x", b"x", 2.5, np.zeros(4), object(), 1j)

    def bad_values(kind):
        # (class of the case, value, the exception it must raise)
        if kind == "str":
            return [("wrong type", v, TypeError) for v in (3, 2.5, np.zeros(4), object(), ["x"])]
        if kind in ("f32", "f64"):
            return [("wrong type", v, TypeError) for v in ("x", b"x", np.zeros(4), object(), None)]
        if kind.startswith("array:"):
            lo, hi, _ = _loader._int_range(kind[6:])
            return [("wrong type", v, TypeError) for v in ("x", b"x", 2.5, object(), [1.5], ["1"])] + [
                ("out of range", v, OverflowError) for v in (-1, [lo - 1], [hi + 1])
            ]
        lo, hi, _ = _loader._int_range("i8" if kind == "char" else kind)
        cases = [("wrong type", v, TypeError) for v in WRONG_TYPE]
        if kind != "ptr":
            cases.append(("wrong type", None, TypeError))
        return cases + [("out of range", v, OverflowError) for v in (lo - 1, hi + 1, 2**64, -(2**63) - 1)]

    def valid(kind):
        return None if kind.startswith("array:") else VALID.get(kind, 0)

    tally, failures = {}, []
    for module in MODULES:
        name = module.__name__.rsplit(".", 1)[1]
        for function, kinds in module._ARG_KINDS.items():
            wrapper = getattr(module, function)
            params = wrapper.__code__.co_varnames[: wrapper.__code__.co_argcount]
            for i, (param, kind) in enumerate(zip(params, kinds)):
                for case, value, expected in bad_values(kind):
                    args = [valid(k) for k in kinds]
                    args[i] = value
                    try:
                        wrapper(*args)
                    except expected as exc:
                        text = str(exc)
                        if f"{name}.{function}()" not in text or param not in text:
                            failures.append(f"{name}.{function}({param}={value!r}): message {text!r}")
                    except Exception as exc:
                        failures.append(f"{name}.{function}({param}={value!r}): {type(exc).__name__}: {exc}")
                    else:
                        failures.append(f"{name}.{function}({param}={value!r}): no error")
                    tally[case] = tally.get(case, 0) + 1
    # the Python-value attribute helpers of cuBLASLt
    for setter, attr in ((cublasLt.matrix_layout_set, cublasLt.MatrixLayoutAttribute.ROWS),
                         (cublasLt.matmul_desc_set, cublasLt.MatmulDescAttribute.EPILOGUE)):
        for value in ("x", b"x", 2.5, object()):
            try:
                setter(value, attr, 1)
            except TypeError:
                pass
            else:
                failures.append(f"{setter.__name__}({value!r}, ...): no error")
            tally["wrong type"] += 1
    print(json.dumps({"tally": tally, "failures": failures[:50], "n_failures": len(failures),
                      "loaded": sorted(_loader.loaded_libraries())}))
    """
)


@pytest.fixture(scope="module")
def summary() -> dict:
    """Run every malformed call once, in a subprocess (a crash shows as a non-zero exit)."""
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, f"the process died (exit {proc.returncode}): {proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_malformed_call_raises_a_python_error(summary: dict) -> None:
    """Each wrong-typed or out-of-range argument of every binding raises TypeError / OverflowError
    naming the function and the parameter; the process survives them all."""
    assert summary["n_failures"] == 0, "\n".join(summary["failures"])
    assert summary["tally"]["wrong type"] > 10_000 and summary["tally"]["out of range"] > 5_000
    print(f"\nmalformed binding calls tried: {summary['tally']}")


def test_refusals_happen_before_any_library_is_loaded(summary: dict) -> None:
    """No library was loaded by the malformed calls: every check ran in Python, before C."""
    assert summary["loaded"] == []
