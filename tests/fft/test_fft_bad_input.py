"""Bad input: each case raises the exact exception type with the offending value, before GPU work.

Every case here runs on a machine without a GPU: ``execution="cuda"`` cases fail in the pure
checks, before any driver call.
"""

from __future__ import annotations

import numpy as np
import pytest

import nvmath.fft as nf
from nvmath._errors import UnsupportedLayoutError
from nvmath.fft import FFT, DeviceCallable, FFTOptions
from nvmath.fft._traits import RealOperandRequired

C = np.ones((4, 8), dtype=np.complex64)
R = np.ones((4, 8), dtype=np.float32)


def _planned(operand, **kwargs):
    f = FFT(operand, **kwargs)
    f.plan()
    return f


def _torch(fn):
    def call():
        torch = pytest.importorskip("torch")
        return fn(torch)

    return call


CASES = [
    ("real to fft", lambda: nf.fft(R), ValueError, "needs a complex operand; got float32"),
    ("real to ifft", lambda: nf.ifft(R), ValueError, "got float32"),
    ("complex to rfft", lambda: nf.rfft(C), RealOperandRequired, "needs a real operand; got complex64"),
    ("real to irfft", lambda: nf.irfft(R), ValueError, "needs a complex operand; got float32"),
    (
        "C2C option on real",
        lambda: FFT(R, options={"fft_type": "C2C"}),
        ValueError,
        "C2C transform needs a complex",
    ),
    (
        "R2C option on complex",
        lambda: FFT(C, options={"fft_type": "R2C"}),
        RealOperandRequired,
        "got complex64",
    ),
    ("int dtype", lambda: nf.fft(np.ones(4, dtype=np.int32), check_dtype=None), ValueError, "'int32'"),
    ("axis out of range", lambda: nf.fft(C, axes=[2]), ValueError, "axis 2 is out of range"),
    ("negative axis out of range", lambda: nf.fft(C, axes=[-3]), ValueError, "axis -3"),
    ("repeated axes", lambda: nf.fft(C, axes=[1, -1]), ValueError, r"repeat an axis; got \(1, -1\)"),
    ("empty axes", lambda: nf.fft(C, axes=[]), ValueError, "at least one"),
    ("axes not ints", lambda: nf.fft(C, axes=[0.5]), TypeError, "0.5"),
    ("axes a string", lambda: FFT(C, axes="01"), TypeError, "'01'"),
    ("zero-size axis", lambda: nf.fft(np.ones((0, 4), np.complex64)), ValueError, r"zero-size axes \[0\]"),
    ("0-d operand", lambda: nf.fft(np.complex64(1)), TypeError, "numpy.complex64"),
    ("0-d array", lambda: nf.fft(np.array(1 + 1j)), ValueError, "0-dimensional"),
    ("C2R even of one element", lambda: nf.irfft(np.ones((3, 1), np.complex64)), ValueError, "at least 2"),
    ("not a tensor", lambda: nf.fft([1j, 2j]), TypeError, "list"),
    ("bad direction value", lambda: nf.fft(C, direction=0), ValueError, "got 0"),
    ("bad direction string", lambda: nf.fft(C, direction="backward"), ValueError, "'backward'"),
    ("bad direction kind", lambda: nf.fft(C, direction=1.0), TypeError, "1.0"),
    (
        "R2C inverse",
        lambda: _planned(R).execute(direction="inverse"),
        ValueError,
        "R2C transform runs only FORWARD",
    ),
    (
        "C2R forward",
        lambda: _planned(C, options={"fft_type": "C2R"}).execute(-1),
        ValueError,
        "C2R transform runs only INVERSE; got direction -1",
    ),
    ("bad options type", lambda: nf.fft(C, options=3), TypeError, "FFTOptions object"),
    ("unknown option", lambda: nf.fft(C, options={"device_id": 0}), TypeError, "'device_id'"),
    ("bad result_layout", lambda: nf.fft(C, options={"result_layout": "F"}), ValueError, "'F'"),
    ("bad parity", lambda: nf.irfft(C, options={"last_axis_parity": 2}), ValueError, "got 2"),
    ("inplace R2C", lambda: nf.rfft(R, options={"inplace": True}), ValueError, "only supported for C2C"),
    ("bad execution name", lambda: nf.fft(C, execution="gpu"), ValueError, "'gpu'"),
    ("bad execution type", lambda: nf.fft(C, execution=0), TypeError, "int"),
    (
        "bad execution field",
        lambda: nf.fft(C, execution={"name": "cpu", "threads": 2}),
        TypeError,
        "'threads'",
    ),
    (
        "bad num_threads",
        lambda: nf.fft(C, execution={"name": "cpu", "num_threads": 0}),
        ValueError,
        ">= 1; got 0",
    ),
    ("callbacks on CPU", lambda: nf.fft(C, prolog=DeviceCallable(b"\x01")), ValueError, "GPU only"),
    ("bad callback kind", lambda: nf.fft(C, epilog=42), TypeError, "int"),
    (
        "callback pointer without size",
        lambda: DeviceCallable(1234),
        ValueError,
        "positive int size; got None",
    ),
    (
        "fp16 on CPU",
        _torch(lambda t: nf.rfft(t.ones(8, dtype=t.float16))),
        ValueError,
        "does not support float16",
    ),
    (
        "numpy fp16 needs complex32",
        lambda: nf.rfft(np.ones(8, np.float16), execution="cuda"),
        TypeError,
        "complex32",
    ),
    ("bfloat16", _torch(lambda t: nf.rfft(t.ones(8, dtype=t.bfloat16))), ValueError, "'bfloat16'"),
    (
        "in-place overlapping",
        lambda: FFT(
            np.lib.stride_tricks.as_strided(C[0], (4, 8), (0, 8), writeable=True),
            options={"inplace": True},
            execution="cuda",
        ),
        ValueError,
        r"do not overlap.*strides \(0, 1\)",
    ),
    (
        "reset shape",
        lambda: _planned(C).reset_operand(np.ones((4, 4), np.complex64)),
        ValueError,
        r"shape \(4, 4\)",
    ),
    (
        "reset dtype",
        lambda: _planned(C).reset_operand(C.astype(np.complex128)),
        ValueError,
        "dtype is 'complex128'",
    ),
    (
        "reset strides",
        lambda: _planned(C).reset_operand(np.asfortranarray(C)),
        ValueError,
        r"strides \(1, 4\)",
    ),
    (
        "reset package",
        _torch(lambda t: _planned(C).reset_operand(t.ones((4, 8), dtype=t.complex64))),
        TypeError,
        "torch",
    ),
    (
        "bad memory space",
        lambda: FFT.create_key_from_metadata((4,), "complex64", "host"),
        ValueError,
        "'host'",
    ),
    (
        "bad metadata dtype",
        lambda: FFT.create_key_from_metadata((4,), "complex63", "cpu"),
        ValueError,
        "'complex63'",
    ),
    ("check_dtype banana on real", lambda: nf.fft(R, check_dtype="banana"), ValueError, "check_dtype='banana'"),
    ("check_dtype banana on complex", lambda: nf.fft(C, check_dtype="banana"), ValueError, "'banana'"),
    ("check_dtype of ifft", lambda: nf.ifft(C, check_dtype=1), ValueError, "check_dtype=1"),
    ("ifft forward direction", lambda: nf.ifft(C, direction="forward"), ValueError, "inverse transform"),
    ("ifft FORWARD enum", lambda: nf.ifft(C, direction=nf.FFTDirection.FORWARD), ValueError, "call fft"),
    ("ifft -1 direction", lambda: nf.ifft(C, direction=-1), ValueError, "direction=-1"),
    (
        "read-only operand in place",
        lambda: FFT(_read_only(C), options={"inplace": True}),
        ValueError,
        "read-only",
    ),
    (
        "read-only operand in place (stateless)",
        lambda: nf.fft(_read_only(C), options={"inplace": True}),
        ValueError,
        "read-only",
    ),
    (
        "read-only operand reset in place",
        lambda: _planned(C.copy(), options={"inplace": True}).reset_operand(_read_only(C)),
        ValueError,
        "read-only",
    ),
    *[
        (f"CPU stream {name} to {where}", call, error, text)
        for name, bad, error, text in (
            ("str", "notastream", TypeError, "stream must be"),
            ("-1", -1, ValueError, r"\[0, 2\*\*64\)"),
            ("object", object(), TypeError, "object"),
            ("float", 1.5, TypeError, "float"),
            ("bool", True, TypeError, "True"),
        )
        for where, call in (
            ("fft", lambda bad=bad: nf.fft(C, stream=bad)),
            ("FFT()", lambda bad=bad: FFT(C, stream=bad)),
            ("plan", lambda bad=bad: FFT(C).plan(stream=bad)),
            ("execute", lambda bad=bad: _planned(C).execute(stream=bad)),
        )
    ],
]


def _read_only(a: np.ndarray) -> np.ndarray:
    out = a.copy()
    out.flags.writeable = False
    return out


@pytest.mark.parametrize("case, call, error, text", CASES, ids=[c[0] for c in CASES])
def test_bad_input(case, call, error, text):
    """The case raises exactly the expected exception type, with the offending value in the message."""
    with pytest.raises(error, match=text) as info:
        call()
    assert type(info.value) is error, f"{case}: {type(info.value).__name__}: {info.value}"


def test_unsupported_layout_is_a_value_error():
    """UnsupportedLayoutError is a ValueError carrying the suggested permutation and axes."""
    err = UnsupportedLayoutError("x", (1, 0), (1,))
    assert isinstance(err, ValueError) and err.permutation == (1, 0) and err.axes == (1,)


def test_at_least_thirty_distinct_cases():
    """The table covers at least 30 distinct bad inputs."""
    assert len({c[0] for c in CASES}) >= 30


def test_errors_before_gpu_work(monkeypatch):
    """Pure checks run before any stream or driver call, even for CUDA execution."""
    from nvmath._internal import streams

    def boom(*a, **k):
        raise AssertionError("GPU work started")

    monkeypatch.setattr(streams, "get_stream", boom)
    with pytest.raises(ValueError, match="axis 5"):
        FFT(C, axes=[5], execution="cuda")
    with pytest.raises(TypeError, match="complex32"):
        FFT(np.ones(8, np.float16), execution="cuda")
    with pytest.raises(ValueError, match="options|FFTOptions|'x'"):
        FFT(C, options=FFTOptions(result_layout="x"), execution="cuda")
