"""Bad input to Matmul / matmul raises a typed error, naming the value, before any GPU work (CPU only).

Constructor errors use numpy operands (no GPU is touched before the checks); plan/execute/reset
errors run on the fake GPU of ``matmul_fakes.py`` and check that cuBLASLt was never called.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import nvmath.linalg.advanced as adv
from nvmath._errors import InvalidMatmulState
from nvmath.linalg.advanced import MatmulEpilog as E

import matmul_fakes as F  # (tests/linalg/advanced is on sys.path: see conftest.py)

A = np.ones((4, 3), dtype=np.float32)
B = np.ones((3, 5), dtype=np.float32)


def _q(*flags):
    q = np.zeros(len(flags), dtype=adv.matrix_qualifiers_dtype)
    q["is_conjugate"] = flags
    return q


CONSTRUCTOR_CASES = [
    ("list operand", lambda: adv.Matmul([[1.0]], B), TypeError, "not supported"),
    ("mixed packages", lambda: adv.Matmul(A, __import__("torch").ones(3, 5)), TypeError, "one package"),
    ("0-d operand", lambda: adv.Matmul(np.ones((), np.float32), B), ValueError, "dimension"),
    ("K mismatch", lambda: adv.Matmul(A, np.ones((4, 5), np.float32)), ValueError, "contract"),
    ("zero extent", lambda: adv.Matmul(np.ones((0, 3), np.float32), B), ValueError, "positive"),
    ("negative stride", lambda: adv.Matmul(A[::-1], B), ValueError, "negative strides"),
    ("integer dtype", lambda: adv.Matmul(A.astype(np.int32), B.astype(np.int32)), ValueError, "supported"),
    ("mixed dtypes", lambda: adv.Matmul(A, B.astype(np.float64)), ValueError, "supported"),
    ("c of wrong shape", lambda: adv.Matmul(A, B, np.ones((4, 4), np.float32), beta=1), ValueError, "c must"),
    ("c 1-D of length N", lambda: adv.Matmul(A, B, np.ones(5, np.float32), beta=1), ValueError, "length M"),
    ("c without beta", lambda: adv.Matmul(A, B, np.ones((4, 5), np.float32)), ValueError, "beta is required"),
    ("alpha a string", lambda: adv.Matmul(A, B, alpha="2"), TypeError, "alpha"),
    ("complex alpha, real scale", lambda: adv.Matmul(A, B, alpha=1j), ValueError, "complex"),
    ("qualifiers a list", lambda: adv.Matmul(A, B, qualifiers=[0, 0]), TypeError, "qualifiers"),
    ("qualifiers too long", lambda: adv.Matmul(A, B, qualifiers=_q(0, 0, 0, 0)), ValueError, "length"),
    (
        "conjugated c",
        lambda: adv.Matmul(
            A.astype(np.complex64),
            B.astype(np.complex64),
            np.ones((4, 5), np.complex64),
            beta=1,
            qualifiers=_q(0, 0, 1),
        ),
        ValueError,
        "conjugating c",
    ),
    ("options unknown key", lambda: adv.Matmul(A, B, options={"speed": 1}), TypeError, "unknown field"),
    ("options of wrong type", lambda: adv.Matmul(A, B, options=[1]), TypeError, "MatmulOptions"),
    ("blocking False", lambda: adv.Matmul(A, B, options={"blocking": False}), ValueError, "blocking"),
    (
        "bad memory_limit",
        lambda: adv.Matmul(A, B, options={"memory_limit": "lots"}),
        ValueError,
        "memory_limit",
    ),
    (
        "compute type for other dtypes",
        lambda: adv.Matmul(A, B, options={"compute_type": adv.MatmulComputeType.COMPUTE_16F}),
        ValueError,
        "not supported",
    ),
    ("inplace without c", lambda: adv.Matmul(A, B, options={"inplace": True}), ValueError, "needs c"),
    (
        "inplace with broadcast c",
        lambda: adv.Matmul(A, B, np.ones((4, 1), np.float32), beta=1, options={"inplace": True}),
        ValueError,
        "broadcast",
    ),
    ("result_amax without FP8", lambda: adv.Matmul(A, B, options={"result_amax": True}), ValueError, "FP8"),
    (
        "scales without FP8",
        lambda: adv.Matmul(A, B, quantization_scales={"a": 1.0}),
        ValueError,
        "not allowed",
    ),
    ("scale a string", lambda: adv.Matmul(A, B, quantization_scales={"a": "1"}), TypeError, "scale"),
    (
        "batches that do not broadcast",
        lambda: adv.Matmul(np.ones((2, 4, 3), np.float32), np.ones((3, 3, 5), np.float32)),
        ValueError,
        "broadcast",
    ),
    (
        "mixed broadcast batch axes",
        lambda: adv.Matmul(np.ones((2, 1, 4, 3), np.float32), np.ones((1, 3, 3, 5), np.float32)),
        ValueError,
        "single strided batch",
    ),
    (
        "unsupported layout",
        lambda: adv.Matmul(np.ones((8, 6), np.float32)[::2, ::2], np.ones((3, 5), np.float32)),
        ValueError,
        "unsupported matrix layout",
    ),
]


@pytest.mark.parametrize("name,call,exc,match", CONSTRUCTOR_CASES, ids=[c[0] for c in CONSTRUCTOR_CASES])
def test_constructor_rejects(name, call, exc, match):
    """Each bad constructor argument raises the documented exception type with a helpful message."""
    if name == "mixed packages":
        pytest.importorskip("torch")
    with pytest.raises(exc, match=match):
        call()


def test_stateless_rejects_before_planning():
    """The stateless matmul reports the same errors (here: c without beta) without caching anything."""
    size = len(adv.plan_cache)
    with pytest.raises(ValueError, match="beta is required"):
        adv.matmul(A, B, np.ones((4, 5), np.float32))
    assert len(adv.plan_cache) == size


def _mm():
    a = F.fake(np.ones((4, 3), np.float32))
    b = F.fake(np.ones((3, 5), np.float32))
    return adv.Matmul(a, b)


PLAN_CASES = [
    ("epilog a string", {"epilog": "RELU"}, TypeError, "epilog must be"),
    ("epilog value", {"epilog": 3}, ValueError, "not a MatmulEpilog"),
    ("bias missing", {"epilog": E.BIAS}, ValueError, "needs epilog_inputs"),
    ("extra input", {"epilog": E.RELU, "epilog_inputs": {"bias": None}}, TypeError, "bias"),
    ("inputs not a dict", {"epilog": E.BIAS, "epilog_inputs": [1]}, TypeError, "dict"),
    (
        "bias of wrong length",
        {"epilog": E.BIAS, "epilog_inputs": {"bias": "len7"}},
        ValueError,
        "bias must have shape",
    ),
    ("bias of wrong dtype", {"epilog": E.BIAS, "epilog_inputs": {"bias": "f64"}}, ValueError, "dtype"),
    ("bias from numpy", {"epilog": E.BIAS, "epilog_inputs": {"bias": "numpy"}}, TypeError, "numpy"),
    (
        "unexpected input",
        {"epilog": E.RELU, "epilog_inputs": {"bias": "ok"}},
        ValueError,
        "needs epilog_inputs",
    ),
    ("algorithms not a sequence", {"algorithms": 5}, TypeError, "algorithms"),
    ("algorithms of wrong kind", {"algorithms": [1]}, TypeError, "Algorithm"),
    ("preferences limit 0", {"preferences": {"limit": 0}}, ValueError, "limit"),
    ("preferences unknown key", {"preferences": {"speed": 1}}, TypeError, "unknown"),
]

_BIASES = {
    "len7": lambda: F.fake(np.ones(7, np.float32)),
    "f64": lambda: F.fake(np.ones(4, np.float64)),
    "numpy": lambda: np.ones(4, np.float32),
    "ok": lambda: F.fake(np.ones(4, np.float32)),
}


@pytest.mark.parametrize("name,kwargs,exc,match", PLAN_CASES, ids=[c[0] for c in PLAN_CASES])
def test_plan_rejects_before_cublaslt(lt, name, kwargs, exc, match):
    """Bad epilogs, epilog inputs, algorithms or preferences raise before any heuristic query."""
    inputs = kwargs.get("epilog_inputs")
    if isinstance(inputs, dict):
        kwargs = {
            **kwargs,
            "epilog_inputs": {k: _BIASES[v]() if isinstance(v, str) else v for k, v in inputs.items()},
        }
    with _mm() as mm, pytest.raises(exc, match=match):
        mm.plan(**kwargs)
    assert lt.heuristic_calls == 0 and not lt.matmul_calls


def test_epilog_on_complex_is_rejected(lt):
    """Epilogs are refused for complex dtypes (cuBLASLt does not support them)."""
    c = F.fake(np.ones((3, 3), np.complex64))
    with adv.Matmul(c, c) as mm, pytest.raises(ValueError, match="complex"):
        mm.plan(epilog=E.RELU)


def test_execute_and_reset_misuse(lt):
    """execute/reset misuse: foreign algorithm, wrong shapes, no arguments, c that was never planned."""
    with _mm() as mm:
        mm.plan()
        other = adv.Algorithm.from_numpy(mm.algorithms[0].as_numpy())
        with pytest.raises(ValueError, match="not one of this Matmul"):
            mm.execute(algorithm=other)
        with pytest.raises(ValueError, match="must match the planned one"):
            mm.reset_operands(a=F.fake(np.ones((4, 4), np.float32)))
        with pytest.raises(ValueError, match="at least one"):
            mm.reset_operands()
        with pytest.raises(ValueError, match="c was not given"):
            mm.reset_operands(c=F.fake(np.ones((4, 5), np.float32)))
        with pytest.raises(TypeError, match="numpy"):
            mm.reset_operands(a=np.ones((4, 3), np.float32))
        with pytest.raises(ValueError, match="iterations"):
            mm.autotune(iterations=0)
        with pytest.raises(ValueError, match="limit"):
            mm.applicable_algorithm_ids(limit=0)
    assert not lt.matmul_calls


def test_misaligned_replacement_is_rejected(lt):
    """A replacement operand less aligned than the planned one is refused (plan assumptions)."""
    raw = np.zeros(64 + 16, np.float32)
    start = (-raw.ctypes.data % 256) // 4
    a = raw[start : start + 12].reshape(4, 3)
    with adv.Matmul(F.fake(a), F.fake(np.ones((3, 5), np.float32))) as mm:
        mm.plan()
        shifted = raw[start + 1 : start + 13].reshape(4, 3)
        with pytest.raises(ValueError, match="aligned"):
            mm.reset_operands(a=F.fake(shifted))


def test_state_errors_name_the_fix(lt):
    """State errors are InvalidMatmulState (a RuntimeError) naming the call that fixes them."""
    mm = _mm()
    with pytest.raises(InvalidMatmulState, match=r"call plan\(\) first"):
        mm.execute()
    mm.plan()
    mm.release_operands()
    with pytest.raises(InvalidMatmulState, match=r"reset_operands\(\)"):
        mm.execute()
    mm.free()
    with pytest.raises(InvalidMatmulState, match="create a new Matmul"):
        mm.plan()
    assert issubclass(InvalidMatmulState, RuntimeError)


def test_algorithm_from_numpy_rejects_other_arrays():
    """Algorithm.from_numpy refuses arrays that are not one heuristic-result record."""
    with pytest.raises(TypeError, match="matmul_heuristic_result_dtype"):
        adv.Algorithm.from_numpy(np.zeros(3))


def test_stateless_arguments_are_checked_before_anything_is_loaded():
    """matmul(numpy, numpy, epilog=12345) / stream="notastream" report the bad argument (not a missing
    driver) without loading the CUDA driver: checked in a fresh process."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import sys
        import numpy as np
        import nvmath.linalg.advanced as adv
        a = np.ones((4, 4), np.float32)
        for kwargs, error in (({"epilog": 12345}, ValueError), ({"epilog": "relu"}, TypeError),
                              ({"stream": "notastream"}, TypeError), ({"stream": -1}, ValueError),
                              ({"stream": object()}, TypeError)):
            try:
                adv.matmul(a, a, **kwargs)
            except error as exc:
                assert ("epilog" in str(exc)) or ("stream" in str(exc)), exc
            else:
                raise SystemExit(f"no error for {kwargs}")
        assert "cuda.bindings.driver" not in sys.modules
        print("ok")
        """
    )
    root = pathlib.Path(__file__).resolve().parents[3]
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=root, env={"PYTHONPATH": str(root)}
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


@pytest.mark.parametrize("package", ["numpy", "torch"])
def test_without_a_gpu_the_error_says_this_api_needs_one_and_where_to_go(package, monkeypatch, request):
    """Without a usable driver, numpy / torch-CPU operands get an error naming the GPU requirement and
    nvmath.linalg.matmul's CPU execution, not only "the CUDA driver could not be loaded"."""
    from nvmath._errors import LibraryNotFoundError
    from nvmath.linalg.advanced import _device

    def no_driver(device_id):
        raise LibraryNotFoundError("the CUDA driver could not be loaded: libcuda.so not found")

    monkeypatch.setattr(_device, "device_info", no_driver)
    adv.plan_cache.clear()  # on a GPU machine a cached plan of these shapes would skip the device query
    a, b = np.ones((7, 3)), np.ones((3, 11))
    if package == "torch":
        torch = request.getfixturevalue("torch")
        a, b = torch.from_numpy(a), torch.from_numpy(b)
    for call in (lambda: adv.Matmul(a, b), lambda: adv.matmul(a, b)):
        with pytest.raises(LibraryNotFoundError) as info:
            call()
        message = str(info.value)
        assert "runs on an NVIDIA GPU" in message and "nvmath.linalg.matmul" in message
        assert "execution='cpu'" in message and "libcuda.so not found" in message
