"""Matmul suite, FP8 GELU aux rows: an e4m3 product with GELU_AUX and an e4m3 aux with its amax.

``fp8-gelu-aux-e4m3-amax-<M>x<N>x<K>``: nvmath (cuBLASLt's wide aux quantized by nvmath's own kernel,
see ``nvmath/linalg/advanced/_aux_quantize.py``) against torch's best unfused expression
(``torch._scaled_mm`` to float16, GELU, the scaled aux saturated to e4m3, its amax) and nvmath-python
(whose cuBLASLt call is refused on cuBLASLt 13.1: an error row). ``fp8-gelu-aux-wide-<M>x<N>x<K>``
is the same product with cuBLASLt's own float16 aux (nvmath only): the difference between the rows
is the cost of the quantization pass.
"""

from __future__ import annotations

from typing import Any

from benchmarks.registry import Case, Prepared, Skip, register
from benchmarks.suites._data import torch_on_ctx_stream, torch_random

_SHAPES = ((8192, 8192, 8192), (4096, 14336, 4096))
_SCALE = 0.1


def _fp8_operands(ctx: Any, m: int, n: int, k: int) -> tuple[Any, Any, Any]:
    torch = torch_on_ctx_stream(ctx)
    if torch.cuda.get_device_capability(ctx.device_id) < (8, 9):
        raise Skip("FP8 needs compute capability 8.9")
    a = torch_random(torch, (m, k), torch.float32).to(torch.float8_e4m3fn)
    b = torch_random(torch, (n, k), torch.float32).to(torch.float8_e4m3fn).T  # column-major (TN)
    return torch, a, b


def _nvmath(m: int, n: int, k: int, fp8_aux: bool):
    def setup(ctx: Any) -> Prepared:
        import nvmath.linalg.advanced as adv

        _, a, b = _fp8_operands(ctx, m, n, k)
        mm = adv.Matmul(a, b, quantization_scales={"a": 1.0, "b": 1.0, "d": 1.0})
        if fp8_aux:
            mm.plan(
                epilog=adv.MatmulEpilog.GELU_AUX,
                preferences={"epilog": {"aux_type": 28, "aux_amax": True}},  # CUDA_R_8F_E4M3
                epilog_inputs={"aux_quantization_scale": _SCALE},
            )
        else:
            mm.plan(epilog=adv.MatmulEpilog.GELU_AUX)
        return Prepared(fn=mm.execute, teardown=mm.free)

    return setup


def _torch(m: int, n: int, k: int):
    def setup(ctx: Any) -> Any:
        torch, a, b = _fp8_operands(ctx, m, n, k)
        one = torch.ones((), device="cuda", dtype=torch.float32)
        gelu = torch.nn.functional.gelu

        def run() -> Any:
            pre = torch._scaled_mm(a, b, one, one, out_dtype=torch.float16)
            out = gelu(pre, approximate="tanh").to(torch.float8_e4m3fn)
            aux = (pre.float() * _SCALE).clamp_(-448.0, 448.0).to(torch.float8_e4m3fn)
            return out, aux, pre.abs().amax().float()

        return run

    return setup


for _m, _n, _k in _SHAPES:
    _shape = f"{_m}x{_n}x{_k}"
    register(
        Case(
            suite="matmul",
            name=f"fp8-gelu-aux-e4m3-amax-{_shape}",
            setups={"nvmath": _nvmath(_m, _n, _k, True), "torch": _torch(_m, _n, _k),
                    "nvmath-python": _nvmath(_m, _n, _k, True)},  # fmt: skip
            flops=2.0 * _m * _n * _k,
            description=f"e4m3 GELU_AUX {_shape}, e4m3 aux (scale {_SCALE}) + amax; torch: _scaled_mm + gelu + quantize",
        )
    )
    register(
        Case(
            suite="matmul",
            name=f"fp8-gelu-aux-wide-{_shape}",
            setups={"nvmath": _nvmath(_m, _n, _k, False)},
            flops=2.0 * _m * _n * _k,
            description=f"e4m3 GELU_AUX {_shape}, cuBLASLt's float16 aux (the baseline of the e4m3-aux row)",
        )
    )
