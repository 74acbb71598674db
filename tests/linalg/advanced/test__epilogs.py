"""Tests of nvmath.linalg.advanced._epilogs: the epilog table, input validation and aux-output specs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvmath.linalg.advanced import _epilogs as EP
from nvmath.linalg.advanced import _traits as T
from nvmath.linalg.advanced._layout import Op, OperandSpec, Order, collapse_batch
from nvmath.linalg.advanced._options import MatmulEpilog as E
from nvmath.linalg.advanced._options import MatmulEpilogPreferences
from nvmath.linalg.advanced._typemaps import resolve_types

S = OperandSpec
F32 = resolve_types("float32", "float32")
BF16 = resolve_types("bfloat16", "bfloat16")
C64 = resolve_types("complex64", "complex64")
FP8 = resolve_types("float8_e4m3fn", "float8_e4m3fn", "bfloat16")
NOBATCH = collapse_batch([("a", (), ()), ("b", (), ())])
BATCH = collapse_batch([("a", (2, 3), (3, 1)), ("b", (), ())])
M, N, K = 10, 6, 4

# epilog: (inputs, aux outputs, forces column-major D)
TABLE = {
    E.DEFAULT: ((), (), False),
    E.RELU: ((), (), False),
    E.GELU: ((), (), False),
    E.BIAS: (("bias",), (), True),
    E.RELU_BIAS: (("bias",), (), True),
    E.GELU_BIAS: (("bias",), (), True),
    E.RELU_AUX: ((), ("relu_aux",), True),
    E.RELU_AUX_BIAS: (("bias",), ("relu_aux",), True),
    E.GELU_AUX: ((), ("gelu_aux",), True),
    E.GELU_AUX_BIAS: (("bias",), ("gelu_aux",), True),
    E.DRELU: (("relu_aux",), (), True),
    E.DRELU_BGRAD: (("relu_aux",), ("drelu_bgrad",), True),
    E.DGELU: (("gelu_aux",), (), True),
    E.DGELU_BGRAD: (("gelu_aux",), ("dgelu_bgrad",), True),
    E.BGRADA: ((), ("bgrada",), True),
    E.BGRADB: ((), ("bgradb",), True),
}


def good_inputs(epilog, m=M, n=N, batch=NOBATCH, types=F32):
    """Valid epilog inputs of ``epilog`` for an (m x n) result."""
    out = {}
    if "bias" in TABLE[epilog][0]:
        out["bias"] = S((m,), (1,), types.d_dtype)
    bs = batch.shape
    if "relu_aux" in TABLE[epilog][0]:
        rows = EP.relu_aux_rows(m)
        out["relu_aux"] = S(bs + (rows, n), _dense(bs, rows, n), "uint8")
    if "gelu_aux" in TABLE[epilog][0]:
        rows = EP.gelu_aux_rows(m)
        out["gelu_aux"] = S(bs + (rows, n), _dense(bs, rows, n), types.d_dtype)
    return out


def _dense(bs, rows, n):
    """Column-major dense strides of a (*bs, rows, n) tensor."""
    strides, acc = [], rows * n
    for e in reversed(bs):
        strides.insert(0, acc)
        acc *= e
    return tuple(strides) + (1, rows)


def traits(epilog, inputs, *, m=M, n=N, k=K, batch=NOBATCH, types=F32, prefs=None, version=None):
    """Shorthand for epilog_traits."""
    return EP.epilog_traits(epilog, inputs, m=m, n=n, k=k, batch=batch, types=types, preferences=prefs,
                            cublaslt_version=version)  # fmt: skip


# ----------------------------------------------------------------------------------- the table
@pytest.mark.parametrize("epilog", list(E))
def test_table_row(epilog):
    """Each epilog's spec lists the documented inputs, aux outputs and forced D order."""
    spec = EP.epilog_spec(epilog)
    inputs, outputs, forces = TABLE[epilog]
    assert spec.inputs == inputs and spec.forces_col == forces
    assert ((spec.aux_output,) if spec.aux_output else ()) == outputs


@pytest.mark.parametrize("epilog", list(E))
def test_valid_inputs_give_traits(epilog):
    """Valid inputs give traits whose EPILOGUE attribute is the epilog and whose aux names match the table."""
    t = traits(epilog, good_inputs(epilog))
    assert dict(t.attributes)["EPILOGUE"] == int(epilog) and t.aux_names == TABLE[epilog][1]
    assert not t.transpose_problem and t.forces_col == TABLE[epilog][2]
    assert set(dict(t.pointer_attributes).values()) == set(TABLE[epilog][0]) | set(TABLE[epilog][1])


@pytest.mark.parametrize("epilog", [e for e in E if TABLE[e][0]])
def test_missing_input_raises(epilog):
    """An epilog that needs inputs raises ValueError naming them when they are missing."""
    with pytest.raises(ValueError, match=rf"{epilog.name} needs epilog_inputs \['{TABLE[epilog][0][0]}'\]"):
        traits(epilog, {})


@pytest.mark.parametrize("epilog", list(E))
def test_extra_input_raises(epilog):
    """An input the epilog does not take raises ValueError naming what was given."""
    inputs = dict(good_inputs(epilog), extra=S((M,), (1,), "float32"))
    with pytest.raises(ValueError, match="'extra'"):
        traits(epilog, inputs)


def test_none_epilog_is_default():
    """epilog=None means DEFAULT."""
    assert traits(None, None).epilog == E.DEFAULT


@pytest.mark.parametrize(("value", "exc", "match"), [("RELU", TypeError, "'RELU'"), (3, ValueError, "epilog=3"),
                                                     (True, TypeError, "True")])  # fmt: skip
def test_bad_epilog_value(value, exc, match):
    """A non-int epilog raises TypeError, an unknown int ValueError listing the epilogs."""
    with pytest.raises(exc, match=match):
        EP.epilog_spec(value)


# ------------------------------------------------------------------------------------------ bias
@pytest.mark.parametrize(
    ("shape", "strides", "transposed"),
    [((M,), (1,), False), ((M, 1), (1, 1), False), ((N,), (1,), True), ((1, N), (N, 1), True)],
)
def test_bias_shapes(shape, strides, transposed):
    """A bias along M keeps the product; a bias along N (torch.nn.Linear's) asks for the transposed one."""
    t = traits(E.BIAS, {"bias": S(shape, strides, "float32")})
    assert t.transpose_problem == transposed and dict(t.attributes)["BIAS_BATCH_STRIDE"] == 0


def test_square_1d_bias_is_along_m():
    """A 1-D bias of length M == N is a bias along M, as in nvmath-python."""
    assert not traits(E.BIAS, {"bias": S((5,), (1,), "float32")}, m=5, n=5).transpose_problem


def test_batched_bias_stride():
    """A (*batch, M, 1) bias sets BIAS_BATCH_STRIDE to its single batch stride."""
    t = traits(E.BIAS, {"bias": S((2, 3, M, 1), (3 * 16, 16, 1, 1), "float32")}, batch=BATCH)
    assert dict(t.attributes)["BIAS_BATCH_STRIDE"] == 16


def test_broadcast_batched_bias():
    """A (1, 3, M, 1)-shaped bias broadcasts over the first batch axis only if it tiles: here it cannot."""
    with pytest.raises(ValueError, match="'bias'"):
        traits(E.BIAS, {"bias": S((1, 3, M, 1), (3 * M, M, 1, 1), "float32")}, batch=BATCH)


def test_bias_dtype_must_match_d_for_regular_gemms():
    """A float32 bias with a bf16 result is rejected (cuBLASLt 13.1: INVALID_VALUE), listing the allowed dtype."""
    with pytest.raises(ValueError, match=r"float32 .* bfloat16; allowed: \('bfloat16',\)"):
        traits(E.BIAS, {"bias": S((M,), (1,), "float32")}, types=BF16)


def test_bias_dtype_same_as_d_sets_no_data_type():
    """A bias of D's dtype leaves BIAS_DATA_TYPE at its default."""
    assert "BIAS_DATA_TYPE" not in dict(traits(E.BIAS, {"bias": S((M,), (1,), "float32")}).attributes)


def test_fp8_bias_dtypes():
    """FP8 GEMMs take a bf16 bias for bf16 or float32 D (BIAS_DATA_TYPE set only when it differs from D)."""
    t = traits(E.BIAS, {"bias": S((M,), (1,), "bfloat16")}, types=FP8)
    assert "BIAS_DATA_TYPE" not in dict(t.attributes)
    fp8_f32 = resolve_types("float8_e4m3fn", "float8_e4m3fn", "float32")
    t = traits(E.BIAS, {"bias": S((M,), (1,), "bfloat16")}, types=fp8_f32)
    assert dict(t.attributes)["BIAS_DATA_TYPE"] == 14
    with pytest.raises(ValueError, match=r"float32.*\('bfloat16',\)"):
        traits(E.BIAS, {"bias": S((M,), (1,), "float32")}, types=fp8_f32)


BAD_EPILOG = [
    ("bias wrong length", E.BIAS, {"bias": S((7,), (1,), "float32")}, {}, "(7,)"),
    ("bias 2-D wrong", E.BIAS, {"bias": S((M, 2), (2, 1), "float32")}, {}, f"({M}, 2)"),
    ("bias strided", E.BIAS, {"bias": S((M,), (2,), "float32")}, {}, "(2,)"),
    ("bias dtype", E.BIAS, {"bias": S((M,), (1,), "float64")}, {}, "float64"),
    ("bias batch mismatch", E.BIAS, {"bias": S((4, M, 1), (M, 1, 1), "float32")}, {"batch": BATCH}, "'bias'"),
    ("bias batch unbatched problem", E.BIAS, {"bias": S((2, M, 1), (M, 1, 1), "float32")}, {}, "'bias'"),
    ("relu_aux dtype", E.DRELU, {"relu_aux": S((16, N), (1, 16), "int8")}, {}, "int8"),
    ("relu_aux shape", E.DRELU, {"relu_aux": S((M, N), (1, M), "uint8")}, {}, f"({M}, {N})"),
    ("relu_aux row-major", E.DRELU, {"relu_aux": S((16, N), (N, 1), "uint8")}, {}, f"({N}, 1)"),
    ("relu_aux ld", E.DRELU, {"relu_aux": S((16, N), (1, 24), "uint8")}, {}, "(1, 24)"),
    ("relu_aux part-batched", E.DRELU, {"relu_aux": S((3, 16, N), (16 * N, 1, 16), "uint8")}, {"batch": BATCH},
     "(2, 3, 16"),
    ("gelu_aux dtype", E.DGELU, {"gelu_aux": S((16, N), (1, 16), "float16")}, {}, "float16"),
    ("gelu_aux shape", E.DGELU_BGRAD, {"gelu_aux": S((M, N), (1, M), "float32")}, {}, f"({M}, {N})"),
    ("gelu_aux ld", E.DGELU, {"gelu_aux": S((16, N), (1, 20), "float32")}, {}, "(1, 20)"),
    ("gelu_aux batch stride", E.DGELU, {"gelu_aux": S((2, 3, 16, N), (3 * 100, 100, 1, 16), "float32")},
     {"batch": BATCH}, "stride 100"),
    ("relu on complex", E.RELU, {}, {"types": C64}, "complex64"),
    ("bias on complex", E.BIAS, {"bias": S((M,), (1,), "complex64")}, {"types": C64}, "complex64"),
    ("bgrada on complex", E.BGRADA, {}, {"types": C64}, "complex64"),
    ("old cublaslt", E.DRELU_BGRAD, {"relu_aux": S((16, N), (1, 16), "uint8")}, {"version": 110500}, "(11, 11, 3)"),
    ("aux_amax not fp8", E.GELU_AUX, {}, {"prefs": MatmulEpilogPreferences(aux_amax=True)}, "aux_amax=True"),
    ("fp8 aux needs scale", E.GELU_AUX, {}, {"prefs": MatmulEpilogPreferences(aux_type=28)}, "aux_quantization_scale"),
    ("relu_aux not a spec", E.DRELU, {"relu_aux": "mask"}, {}, "'relu_aux'"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "epilog", "inputs", "kw", "match"), BAD_EPILOG, ids=[c[0] for c in BAD_EPILOG]
)
def test_bad_epilog_inputs(case, epilog, inputs, kw, match):
    """Each bad epilog input raises ValueError (TypeError for a non-spec) naming the offending value."""
    exc = TypeError if case == "relu_aux not a spec" else ValueError
    with pytest.raises(exc) as info:
        traits(epilog, inputs, **kw)
    assert match in str(info.value), str(info.value)


def test_backward_epilogs_accept_k_1():
    """DRELU/DGELU with K=1 are accepted (measured to work on cuBLASLt 13.1, unlike nvmath-python's rule)."""
    for epilog in (E.DRELU, E.DGELU_BGRAD):
        assert traits(epilog, good_inputs(epilog), k=1).epilog == epilog


@pytest.mark.parametrize(
    ("epilog", "ops", "staged"),
    [(E.BGRADA, (Op.N, Op.N), "a"), (E.BGRADB, (Op.T, Op.T), "b"), (E.BIAS, (None, None), None)],
)
def test_required_ops_and_problem_options(epilog, ops, staged):
    """BGRADA needs transa=transb=N and BGRADB transa=transb=T, and its reduced operand is the one
    copied when needed; problem_options carries them to get_problem."""
    t = traits(epilog, good_inputs(epilog))
    assert t.required_ops == ops
    assert t.problem_options == {
        "forces_col": True, "transpose_problem": False, "required_ops": ops, "staged_operand": staged,
    }  # fmt: skip


# -------------------------------------------------------------------------------------- aux
def test_relu_aux_output_spec_and_bits():
    """RELU_AUX: uint8 (*batch, round_up(ceil(M/8),16), N) column-major; LD and batch stride in bits."""
    t = traits(E.RELU_AUX, {}, batch=BATCH)
    (aux,) = t.aux_outputs
    assert aux.shape == (2, 3, 16, N) and aux.strides == (3 * 16 * N, 16 * N, 1, 16) and aux.dtype == "uint8"
    attrs = dict(t.attributes)
    assert attrs["EPILOGUE_AUX_LD"] == 128 and attrs["EPILOGUE_AUX_BATCH_STRIDE"] == 16 * N * 8


@pytest.mark.parametrize(("m", "rows"), [(1, 16), (8, 16), (128, 16), (129, 32), (257, 48)])
def test_relu_aux_rows(m, rows):
    """relu_aux_rows rounds ceil(M/8) up to a multiple of 16 bytes (128 bits)."""
    assert EP.relu_aux_rows(m) == rows and (rows * 8) % 128 == 0 and rows * 8 >= m


def test_gelu_aux_output_default_and_preferred_dtype():
    """GELU_AUX's aux has D's dtype by default, the preferred aux_type otherwise (sets AUX_DATA_TYPE)."""
    (aux,) = traits(E.GELU_AUX, {}, types=BF16).aux_outputs
    assert aux.shape == (16, N) and aux.strides == (1, 16) and aux.dtype == "bfloat16"
    t = traits(E.GELU_AUX, {}, types=BF16, prefs=MatmulEpilogPreferences(aux_type=0))
    assert t.aux_outputs[0].dtype == "float32" and dict(t.attributes)["EPILOGUE_AUX_DATA_TYPE"] == 0


def test_gelu_aux_fp8_with_scale_and_amax():
    """An FP8 GELU aux takes aux_quantization_scale and, with aux_amax, returns gelu_aux_amax; the
    library quantizes it: cuBLASLt gets a wide aux and no AUX scale / amax pointer or aux type."""
    prefs = MatmulEpilogPreferences(aux_type=28, aux_amax=True)
    t = traits(E.GELU_AUX, {"aux_quantization_scale": 1.0}, types=FP8, prefs=prefs)
    assert t.aux_names == ("gelu_aux", "gelu_aux_amax")
    ptrs, attrs = dict(t.pointer_attributes), dict(t.attributes)
    assert not {"EPILOGUE_AUX_SCALE_POINTER", "EPILOGUE_AUX_AMAX_POINTER"} & set(ptrs)
    assert "EPILOGUE_AUX_DATA_TYPE" not in attrs
    wide, fp8, amax = t.aux_outputs
    assert ptrs["EPILOGUE_AUX_POINTER"] == wide.name == "_gelu_aux_wide"
    assert (wide.dtype, fp8.dtype, amax.dtype) == ("bfloat16", "float8_e4m3fn", "float32")
    assert wide.shape == fp8.shape == (16, N) and wide.strides == fp8.strides == (1, 16)
    q = t.aux_quantization
    assert (q.source, q.target, q.amax, q.scale) == ("_gelu_aux_wide", "gelu_aux", "gelu_aux_amax", "aux_quantization_scale")
    assert (q.rows, q.ld, q.total, q.source_dtype, q.target_dtype) == (M, 16, 16 * N, "bfloat16", "float8_e4m3fn")


@pytest.mark.parametrize("amax", [False, True])
def test_fp8_gelu_aux_quantization_batched_and_transposed(amax):
    """A batched FP8 aux counts every batch in the quantization; a bias along N (the transposed
    product) quantizes D^T's aux (N real rows of round_up(N, 8)); without aux_amax there is no amax."""
    prefs = MatmulEpilogPreferences(aux_type=29, aux_amax=amax)  # e5m2
    t = traits(E.GELU_AUX, {"aux_quantization_scale": 0.5}, types=FP8, prefs=prefs, batch=BATCH)
    q = t.aux_quantization
    assert (q.rows, q.ld, q.total, q.target_dtype) == (M, 16, 6 * 16 * N, "float8_e5m2")
    assert (q.amax is not None) == amax and t.aux_names == (("gelu_aux", "gelu_aux_amax") if amax else ("gelu_aux",))
    inputs = {"aux_quantization_scale": 0.5, "bias": S((N,), (1,), "bfloat16")}
    t = traits(E.GELU_AUX_BIAS, inputs, types=FP8, prefs=prefs)
    assert t.transpose_problem
    q = t.aux_quantization
    assert (q.rows, q.ld, q.total) == (N, 8, 8 * M)
    assert t.aux_outputs[1].shape == (8, M)


def test_wide_aux_has_no_quantization():
    """A wide aux (default or a wide aux_type) is cuBLASLt's alone: no quantization step, no internal output."""
    assert traits(E.GELU_AUX, {}, types=FP8).aux_quantization is None
    t = traits(E.GELU_AUX, {}, types=FP8, prefs=MatmulEpilogPreferences(aux_type=0))
    assert t.aux_quantization is None and t.aux_names == ("gelu_aux",)


def test_gelu_aux_of_fp8_result_uses_c_dtype():
    """With an FP8 D the GELU aux defaults to C's dtype."""
    types = resolve_types("float8_e4m3fn", "float8_e4m3fn")
    assert types.d_dtype == "float8_e4m3fn"
    assert traits(E.GELU_AUX, {}, types=types).aux_outputs[0].dtype == "float16"


@pytest.mark.parametrize(
    ("epilog", "length"), [(E.BGRADA, M), (E.BGRADB, N), (E.DRELU_BGRAD, M), (E.DGELU_BGRAD, M)]
)
def test_bgrad_outputs(epilog, length):
    """Bias gradients are (len,) unbatched and (*batch, len, 1) batched, with BIAS_BATCH_STRIDE = len."""
    out = [
        a
        for a in traits(epilog, good_inputs(epilog)).aux_outputs
        if a.name.endswith(("bgrad", "bgrada", "bgradb"))
    ]
    assert out[0].shape == (length,)
    t = traits(epilog, good_inputs(epilog, batch=BATCH), batch=BATCH)
    bg = next(a for a in t.aux_outputs if a.name == out[0].name)
    assert bg.shape == (2, 3, length, 1) and bg.strides == (3 * length, length, 1, length)
    assert dict(t.attributes)["BIAS_BATCH_STRIDE"] == length


def test_backward_aux_input_attributes():
    """A relu_aux input's LD and batch stride are passed in bits; a gelu_aux's in elements."""
    t = traits(E.DRELU_BGRAD, good_inputs(E.DRELU_BGRAD, batch=BATCH), batch=BATCH)
    attrs = dict(t.attributes)
    assert attrs["EPILOGUE_AUX_LD"] == 16 * 8 and attrs["EPILOGUE_AUX_BATCH_STRIDE"] == 16 * N * 8
    t = traits(E.DGELU, good_inputs(E.DGELU))
    assert dict(t.attributes)["EPILOGUE_AUX_LD"] == 16


@pytest.mark.parametrize("epilog", [E.DRELU, E.DRELU_BGRAD, E.DGELU, E.DGELU_BGRAD])
@pytest.mark.parametrize("batched_view", [False, True], ids=["unbatched", "stride0-view"])
def test_shared_aux_input_is_materialised_never_batch_stride_zero(epilog, batched_view):
    """An aux shared by every batch entry of a batched backward epilog (unbatched, or a view whose batch
    strides are 0) is never described with EPILOGUE_AUX_BATCH_STRIDE 0 (cuBLASLt does not honour it
    for DRELU's bit-mask): the descriptor describes a batched buffer of one copy per batch entry, and
    the traits say what to copy (slot size and the user's matrix span, in bytes)."""
    relu = epilog in (E.DRELU, E.DRELU_BGRAD)
    name, dtype, size, bits, ld = ("relu_aux", "uint8", 1, 8, 32)
    if not relu:
        name, dtype, size, bits, ld = ("gelu_aux", "float32", 4, 1, 24)
    rows = 16  # relu: ceil(M / 8) bytes rounded up to 16; gelu: M rows rounded up to 8
    aux = S((rows, N), (1, ld), dtype) if not batched_view else S((2, 3, rows, N), (0, 0, 1, ld), dtype)
    t = traits(epilog, {name: aux}, batch=BATCH)
    attrs = dict(t.attributes)
    assert attrs["EPILOGUE_AUX_BATCH_STRIDE"] == ld * N * bits != 0
    assert attrs["EPILOGUE_AUX_LD"] == ld * bits
    assert t.broadcast_input == EP.BroadcastInput(name, 6, ld * N * size, ((N - 1) * ld + rows) * size)


def test_batched_or_unbatched_problem_aux_input_needs_no_copy():
    """A batched aux over a batched problem, and any aux of an unbatched problem, are read where they
    are: no broadcast buffer."""
    t = traits(E.DRELU, {"relu_aux": S((2, 3, 16, N), (3 * 16 * N, 16 * N, 1, 16), "uint8")}, batch=BATCH)
    assert t.broadcast_input is None
    assert dict(t.attributes)["EPILOGUE_AUX_BATCH_STRIDE"] == 16 * N * 8
    t = traits(E.DGELU, {"gelu_aux": S((16, N), (1, 16), "float32")})
    assert t.broadcast_input is None


def test_transposed_aux_is_that_of_d_transposed():
    """With a bias along N the aux output describes D^T: rows from N, columns M."""
    t = traits(E.RELU_AUX_BIAS, {"bias": S((N,), (1,), "float32")}, m=40, n=N)
    assert t.transpose_problem and t.aux_outputs[0].shape == (16, 40)


# ------------------------------------------------------------------ end-to-end emulation (numpy)
def _emulate_epilog(emulator, problem, et, flats, bias_flat):
    """Emulate BIAS / GELU_AUX_BIAS / BGRADA / BGRADB from the traits' attributes; return (D, aux buffers)."""
    attrs = dict(et.attributes)
    aux_bufs = {
        a.name: np.full(1 + sum((e - 1) * s for e, s in zip(a.shape, a.strides)), np.nan)
        for a in et.aux_outputs
    }

    def epilog(d, i):
        if bias_flat is not None:
            start = i * attrs["BIAS_BATCH_STRIDE"]
            d = d + bias_flat[start : start + problem.m][:, None]
        if "gelu_aux" in aux_bufs:
            ld, bst = attrs["EPILOGUE_AUX_LD"], attrs["EPILOGUE_AUX_BATCH_STRIDE"]
            for j in range(problem.n):
                aux_bufs["gelu_aux"][i * bst + j * ld : i * bst + j * ld + problem.m] = d[:, j]
        for name in ("bgrada", "bgradb"):
            if name in aux_bufs:
                lay, op = (problem.a, problem.transa) if name == "bgrada" else (problem.b, problem.transb)
                mat = emulator.apply_op(emulator.lt_matrix(flats[problem.a_operand if name == "bgrada" else problem.b_operand],
                                               lay, i), op)  # fmt: skip
                vec = mat.sum(axis=1) if name == "bgrada" else mat.sum(axis=0)
                start = i * attrs["BIAS_BATCH_STRIDE"]
                aux_bufs[name][start : start + vec.size] = vec
        return d

    d = emulator.run_problem(problem, flats, epilog=epilog)
    return d, aux_bufs


def _view(buf, spec):
    return np.lib.stride_tricks.as_strided(buf, spec.shape, tuple(s * buf.itemsize for s in spec.strides))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    m=st.integers(1, 6), n=st.integers(1, 6), k=st.integers(1, 4), nb=st.integers(0, 2),
    a_row=st.booleans(), b_row=st.booleans(), along_n=st.booleans(), batched_bias=st.booleans(),
    epilog=st.sampled_from([E.BIAS, E.GELU_AUX_BIAS]),
)  # fmt: skip
def test_bias_epilog_emulation_matches_numpy(emulator, m, n, k, nb, a_row, b_row, along_n, batched_bias, epilog):
    """The bias (along M, or along N via the transposed product) and the GELU aux land where numpy expects."""
    rng = np.random.default_rng(7)
    batch = (2, 3)[:nb]
    a = (
        rng.standard_normal(batch + (m, k))
        if a_row
        else np.swapaxes(rng.standard_normal(batch + (k, m)), -1, -2)
    )
    b = (
        rng.standard_normal(batch + (k, n))
        if b_row
        else np.swapaxes(rng.standard_normal(batch + (n, k)), -1, -2)
    )
    length = n if along_n else m
    bshape = (batch + ((1, n) if along_n else (m, 1))) if (batched_bias and nb) else (length,)
    if along_n and m == n and bshape == (length,):
        bshape = (1, n)
    bias = rng.standard_normal(bshape)
    mm = T.get_mm_traits(emulator.spec_of(a), emulator.spec_of(b))
    types = resolve_types("float64", "float64")
    et = EP.epilog_traits(epilog, {"bias": emulator.spec_of(bias)}, m=m, n=n, k=k, batch=mm.batch, types=types)
    assert et.transpose_problem == (along_n and not m == n == 1)  # a (1, 1) bias is along M
    problem = T.get_problem(mm, types, **et.problem_options)
    flats = {"a": np.ascontiguousarray(a).reshape(-1) if a_row else np.ascontiguousarray(np.swapaxes(a, -1, -2)).reshape(-1),
             "b": np.ascontiguousarray(b).reshape(-1) if b_row else np.ascontiguousarray(np.swapaxes(b, -1, -2)).reshape(-1)}  # fmt: skip
    d, aux = _emulate_epilog(emulator, problem, et, flats, bias.reshape(-1))
    full_bias = (
        bias.reshape(bshape[:-2] + (1, n) if along_n else bshape[:-2] + (m, 1))
        if len(bshape) > 1
        else (bias[None, :] if along_n else bias[:, None])
    )
    want = np.matmul(a, b) + full_bias
    np.testing.assert_allclose(emulator.result_view(problem, d), want, rtol=1e-12)
    if epilog == E.GELU_AUX_BIAS:
        view = _view(aux["gelu_aux"], et.aux_outputs[0])
        pre = np.swapaxes(want, -1, -2) if along_n else want
        np.testing.assert_allclose(view[..., : pre.shape[-2], :], pre, rtol=1e-12)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 6), n=st.integers(1, 6), k=st.integers(1, 4), nb=st.integers(0, 2),
       a_row=st.booleans(), b_row=st.booleans(), epilog=st.sampled_from([E.BGRADA, E.BGRADB]))  # fmt: skip
def test_bgrad_emulation_matches_numpy(emulator, m, n, k, nb, a_row, b_row, epilog):
    """BGRADA reduces a over K (length M) and BGRADB reduces b over K (length N), read back via the
    output spec; operands in either memory order (the caller never reorders)."""
    rng = np.random.default_rng(8)
    batch = (2, 3)[:nb]
    a = (
        rng.standard_normal(batch + (m, k))
        if a_row
        else np.swapaxes(rng.standard_normal(batch + (k, m)), -1, -2)
    )
    b = (
        rng.standard_normal(batch + (k, n))
        if b_row
        else np.swapaxes(rng.standard_normal(batch + (n, k)), -1, -2)
    )
    mm = T.get_mm_traits(emulator.spec_of(a), emulator.spec_of(b))
    types = resolve_types("float64", "float64")
    et = EP.epilog_traits(epilog, {}, m=m, n=n, k=k, batch=mm.batch, types=types)
    strictly_row_a, strictly_col_b = a_row and m > 1 and k > 1, (not b_row) and k > 1 and n > 1
    problem = T.get_problem(mm, types, **et.problem_options)
    assert not problem.transposed
    # the reduced operand is never ORDER_ROW (cuBLASLt refuses it): in the other memory order it is
    # read from a dense copy (problem.staged) that gives the op; the other operand may be ORDER_ROW
    rows = {"a": a_row, "b": b_row}
    if epilog == E.BGRADA:
        assert (problem.transa, problem.transb, problem.a.order) == (Op.N, Op.N, Order.COL)
        assert problem.staged == (("a", "col") if strictly_row_a else None)
    if epilog == E.BGRADB:
        assert (problem.transa, problem.transb, problem.b.order) == (Op.T, Op.T, Order.COL)
        assert problem.staged == (("b", "row") if strictly_col_b else None)
    if problem.staged is not None:
        rows[problem.staged[0]] = problem.staged[1] == "row"
    flats = {n: np.ascontiguousarray(x if rows[n] else np.swapaxes(x, -1, -2)).reshape(-1)
             for n, x in (("a", a), ("b", b))}  # fmt: skip
    _, aux = _emulate_epilog(emulator, problem, et, flats, None)
    (spec,) = et.aux_outputs
    got = _view(aux[spec.name], spec)
    want = a.sum(axis=-1) if epilog == E.BGRADA else b.sum(axis=-2)
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-12)


def test_attribute_names_are_cublaslt_matmul_desc_attributes():
    """Every attribute name the traits emit is a cublasLtMatmulDescAttributes_t member without its prefix."""
    nvidia = pytest.importorskip("nvidia")
    from pathlib import Path

    headers = [Path(r) / "cu13" / "include" / "cublasLt.h" for r in nvidia.__path__]
    header = next((h for h in headers if h.exists()), None)
    if header is None:
        pytest.skip("cublasLt.h is not installed (the headers come with pip install -r tools/bindings-requirements.txt)")
    import re

    members = set(re.findall(r"\bCUBLASLT_MATMUL_DESC_([A-Z0-9_]+)\s*=", header.read_text()))
    emitted = set()
    prefs = MatmulEpilogPreferences(aux_type=28, aux_amax=True)
    for epilog in E:
        t = traits(epilog, good_inputs(epilog, batch=BATCH), batch=BATCH)
        emitted |= {name for name, _ in t.attributes + t.pointer_attributes}
    t = traits(E.GELU_AUX, {"aux_quantization_scale": 1.0}, types=FP8, prefs=prefs)
    emitted |= {name for name, _ in t.attributes + t.pointer_attributes}
    t = traits(E.GELU_AUX, {}, types=FP8, prefs=MatmulEpilogPreferences(aux_type=0))
    emitted |= {name for name, _ in t.attributes + t.pointer_attributes}
    fp8_f32 = resolve_types("float8_e4m3fn", "float8_e4m3fn", "float32")
    emitted |= {n for n, _ in traits(E.BIAS, {"bias": S((M,), (1,), "bfloat16")}, types=fp8_f32).attributes}
    assert emitted <= members, emitted - members
    assert {"EPILOGUE_AUX_POINTER", "EPILOGUE_AUX_DATA_TYPE", "BIAS_DATA_TYPE"} <= emitted


def test_fp8_aux_over_fp8_result_asks_cublaslt_for_c_type():
    """An FP8 aux over an FP8 D: cuBLASLt writes its default aux type (C's, float16 here) into the
    internal wide aux; no EPILOGUE_AUX_DATA_TYPE is set (cuBLASLt 13.1 refuses an FP8 aux type)."""
    types = resolve_types("float8_e4m3fn", "float8_e4m3fn")
    prefs = MatmulEpilogPreferences(aux_type=28, aux_amax=True)
    t = traits(E.GELU_AUX, {"aux_quantization_scale": 0.1}, types=types, prefs=prefs)
    assert "EPILOGUE_AUX_DATA_TYPE" not in dict(t.attributes)
    assert [a.dtype for a in t.aux_outputs] == ["float16", "float8_e4m3fn", "float32"]
