"""FP8 GEMMs with fused cuBLASLt epilogues for the FP8 layers (:mod:`._fp8_linear`, :mod:`._fp8_mlp`).

Every product here is ``D = epilog((qa @ qb.T) * inv_a * inv_b)`` of FP8 ``qa`` (M, K) and ``qb``
(N, K), both contiguous along K (cuBLASLt's FP8 "TN" layout), in the transposed orientation of
:mod:`._kernels`: a layer ``y = act(x @ w.T + b)`` runs as ``y.T = act(w @ x.T + b[:, None])`` (``qa`` the
weight, ``qb`` the tokens), so the bias runs along D's rows (cuBLASLt's bias) and D, column-major in
that orientation, is ``y`` row-major: ``D.mT``.

A :class:`GemmConfig` says what the epilogue fuses and which dtypes and scales go to the planned
:class:`nvmath.linalg.advanced.Matmul`:

* ``epilog``: ``BIAS``, ``RELU`` / ``RELU_BIAS``, ``GELU_AUX_BIAS`` / ``GELU_AUX`` (bias and GELU, the pre-activation kept in the
  aux output ``gelu_aux`` for the backward) or ``DGELU`` (``D = acc * gelu'(gelu_aux)``, the aux an
  epilog input);
* ``result``: D's dtype. An FP8 D (e4m3) takes a D scale (``quantization_scales["d"]``, the
  quantization scale ``s``: ``D = fp8(s * epilog(...))``) and, with ``result_amax``, returns
  ``max |epilog(...)|`` (before the D scale, cuBLASLt's ``AMAX_D`` semantics) as ``"result_amax"``;
* ``bias``: the bias dtype (cuBLASLt's FP8 table: float16 over an FP8 D, whose C is float16; D's
  dtype over a bfloat16 / float16 D);
* ``aux_type``: an explicit GELU aux dtype (``preferences.epilog.aux_type``, ``EPILOGUE_AUX_DATA_TYPE``)
  or ``None``: cuBLASLt's default, :attr:`GemmConfig.aux_dtype` (D's dtype; C's, float16, over an FP8
  D). The FP8-D config of the MLP block takes the default: cuBLASLt 13.1 on the H200 refused
  ``GELU_AUX_BIAS`` with an e4m3 D, a float16 bias and a bfloat16 ``EPILOGUE_AUX_DATA_TYPE``
  (INVALID_VALUE), while the same epilogue with the float16 bias and the default float16 aux runs
  (the library's FP8 GELU aux path, ``tests/compat/test_compat_matmul_fp8_gpu.py``, passes there).

cuBLASLt may refuse a combination at planning (no algorithm for this epilogue with these types). That
has not been measured for every combination on the H200 yet, so :class:`FP8EpilogGemms` treats a
refusal as an answer, not an error: :meth:`FP8EpilogGemms.supported` plans on placeholder operands
before any scaling state is updated, remembers a refusal per problem (logged once, listed by
:meth:`FP8EpilogGemms.report`) and the caller then runs the unfused path (a plain FP8 GEMM and torch's
bias / GELU / quantize).

CPU tensors run :func:`emulate`: the same arithmetic in torch float32 (the bias rounded to its
dtype, the aux to its dtype, GELU / DGELU on the float32 accumulator, an FP8 D quantized with the
recipe's saturating cast, the amax of the float32 values before the D scale).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import OrderedDict
from typing import Any

import torch

from nvmath.torch._capture import refuse_planning
from nvmath.torch._fp8 import FP8_MAX
from nvmath.torch._capture import evict, pin_if_capturing

__all__ = ["FP8EpilogGemms", "GemmConfig", "emulate", "fp8_epilog_gemms"]

logger = logging.getLogger(__name__)

EPILOGS = ("BIAS", "RELU", "RELU_BIAS", "GELU_AUX", "GELU_AUX_BIAS", "DGELU")
"""The epilogues the FP8 layers fuse (names of :class:`nvmath.linalg.advanced.MatmulEpilog`)."""

_WIDE = (torch.bfloat16, torch.float16, torch.float32)


@dataclasses.dataclass(frozen=True)
class GemmConfig:
    """What one fused FP8 GEMM computes (see the module docstring)."""

    epilog: str
    result: torch.dtype
    bias: torch.dtype | None = None
    aux_type: torch.dtype | None = None
    result_amax: bool = False

    def __post_init__(self) -> None:
        if self.epilog not in EPILOGS:
            raise ValueError(f"epilog must be one of {EPILOGS}; got {self.epilog!r}")
        if self.result_amax and self.result not in FP8_MAX:
            raise ValueError(f"result_amax needs an FP8 result; got {self.result}")

    @property
    def fp8_result(self) -> bool:
        """D is FP8 (takes a D scale)."""
        return self.result in FP8_MAX

    @property
    def aux_dtype(self) -> torch.dtype:
        """The GELU aux's dtype: ``aux_type``, else cuBLASLt's default (float16, C's dtype, over an FP8
        D; D's dtype otherwise)."""
        if self.aux_type is not None:
            return self.aux_type
        return torch.float16 if self.fp8_result else self.result

    @property
    def has_bias(self) -> bool:
        return self.epilog in ("BIAS", "RELU_BIAS", "GELU_AUX_BIAS")

    @property
    def gelu_aux_out(self) -> bool:
        return self.epilog in ("GELU_AUX", "GELU_AUX_BIAS")

    def matmul_arguments(self) -> tuple[dict, dict]:
        """``(options, plan keyword arguments)`` for :class:`nvmath.linalg.advanced.Matmul` (pure)."""
        from nvmath.linalg.advanced import MatmulEpilog

        options: dict[str, Any] = {"result_type": _cuda_type(self.result)}
        if self.result_amax:
            options["result_amax"] = True
        plan: dict[str, Any] = {"epilog": MatmulEpilog[self.epilog]}
        if self.aux_type is not None:
            plan["preferences"] = {"epilog": {"aux_type": _cuda_type(self.aux_type)}}
        return options, plan


def _cuda_type(dtype: torch.dtype) -> Any:
    from nvmath._internal.dtypes import CudaDataType

    table = {torch.bfloat16: CudaDataType.CUDA_R_16BF, torch.float16: CudaDataType.CUDA_R_16F,
             torch.float32: CudaDataType.CUDA_R_32F, torch.float8_e4m3fn: CudaDataType.CUDA_R_8F_E4M3,
             torch.float8_e5m2: CudaDataType.CUDA_R_8F_E5M2}  # fmt: skip
    return table[dtype]


def _fp8_cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Round to nearest even, finite values saturated, NaN kept (``cvt.rn.satfinite``)."""
    f = FP8_MAX[dtype]
    return torch.where(torch.isnan(x), x, x.clamp(-f, f)).to(dtype)


def emulate(
    cfg: GemmConfig, qa: torch.Tensor, qb: torch.Tensor, inv_a: torch.Tensor, inv_b: torch.Tensor, *,
    d_scale: torch.Tensor | None = None, bias: torch.Tensor | None = None, gelu_aux: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:  # fmt: skip
    """The fused GEMM's arithmetic in torch: ``(D (M, N), extras)`` (``extras``: ``gelu_aux`` (M, N) in
    ``cfg.aux_type``, ``result_amax`` (1,)), as the planned path returns them."""
    acc = (qa.float() @ qb.float().T) * (inv_a.float() * inv_b.float())
    extras: dict[str, torch.Tensor] = {}
    if cfg.has_bias:
        acc = acc + bias.to(cfg.bias).float()[:, None]
    if cfg.gelu_aux_out:
        extras["gelu_aux"] = acc.to(cfg.aux_dtype)
        acc = torch.nn.functional.gelu(acc, approximate="tanh")
    elif cfg.epilog in ("RELU", "RELU_BIAS"):
        acc = torch.relu(acc)
    elif cfg.epilog == "DGELU":
        acc = torch.ops.aten.gelu_backward(acc, gelu_aux.float(), approximate="tanh")
    if cfg.result_amax:
        extras["result_amax"] = torch.linalg.vector_norm(acc, float("inf")).reshape(1)
    if cfg.fp8_result:
        return _fp8_cast(acc * d_scale.float(), cfg.result), extras
    return acc.to(cfg.result), extras


class FP8EpilogGemms:
    """Planned fused FP8 GEMMs (one ``Matmul`` per config and problem, swapped by ``reset_operands``).

    ``plans`` counts the planners made; :meth:`report` says which configs cuBLASLt refused.
    """

    def __init__(self, maxsize: int = 64):
        self.maxsize = maxsize
        self._planners: OrderedDict[tuple, Any] = OrderedDict()
        self._pinned: set[tuple] = set()
        self._refused: dict[tuple, str] = {}
        self._verdicts: dict[tuple, bool] = {}
        self._lock = threading.Lock()
        self.plans = 0

    @staticmethod
    def _key(cfg: GemmConfig, qa: torch.Tensor, qb: torch.Tensor, aux_dtype: torch.dtype | None) -> tuple:
        pa, pb = qa.data_ptr() | 256, qb.data_ptr() | 256  # a plan assumes its operands' alignment
        return (cfg, qa.shape, qb.shape, qa.dtype, qb.dtype, qa.device, pa & -pa, pb & -pb, aux_dtype)

    def supported(
        self, cfg: GemmConfig, qa: torch.Tensor, qb: torch.Tensor, *, aux_dtype: torch.dtype | None = None
    ) -> bool:
        """Whether cuBLASLt plans ``cfg`` for operands like ``qa``, ``qb`` (and a GELU aux input of
        ``aux_dtype``). Decided once per problem (a dictionary lookup after that) by planning on
        placeholders of the operands' shapes, before the caller updates any scaling state; a refusal
        is remembered and logged once. CPU tensors: always (the emulation)."""
        if not qa.is_cuda:
            return True
        key = self._key(cfg, qa, qb, aux_dtype)
        verdict = self._verdicts.get(key)
        if verdict is None:  # (inside a capture: refused with the fix, not taken for cuBLASLt's answer)
            refuse_planning(f"an FP8 layer would try a new fused GEMM ({cfg.epilog})", qa)
            verdict = self._verdicts[key] = self._try_plan(key, cfg, qa, qb, aux_dtype)
        return verdict

    def _try_plan(
        self, key: tuple, cfg: GemmConfig, qa: torch.Tensor, qb: torch.Tensor, aux_dtype: torch.dtype | None
    ) -> bool:
        a, b = torch.empty_like(qa), torch.empty_like(qb)
        aux = None  # (M, N) column-major, as GELU_AUX wrote it
        if aux_dtype is not None:
            aux = torch.zeros((qb.shape[0], qa.shape[0]), dtype=aux_dtype, device=qa.device).mT
        one = torch.ones(1, dtype=torch.float32, device=qa.device)
        bias = torch.zeros(qa.shape[0], dtype=cfg.bias, device=qa.device) if cfg.has_bias else None
        try:
            self._planned(cfg, a, b, one, one, one if cfg.fp8_result else None, bias, aux)
        except Exception as exc:  # noqa: BLE001 (cuBLASLt's answer for these types: use the unfused path)
            self._refused[key] = f"{type(exc).__name__}: {exc}"
            logger.warning("fused FP8 GEMM %s refused (%s); running it unfused", cfg, exc)
            return False
        return True

    def __call__(
        self, cfg: GemmConfig, qa: torch.Tensor, qb: torch.Tensor, inv_a: torch.Tensor, inv_b: torch.Tensor, *,
        d_scale: torch.Tensor | None = None, bias: torch.Tensor | None = None, gelu_aux: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:  # fmt: skip
        """``(D (M, N), extras)`` as :func:`emulate` returns them (D column-major on the GPU: ``D.mT``
        row-major; ``gelu_aux`` likewise (M, N) column-major, what ``DGELU`` takes back)."""
        if not qa.is_cuda:
            return emulate(cfg, qa, qb, inv_a, inv_b, d_scale=d_scale, bias=bias, gelu_aux=gelu_aux)
        if bias is not None:
            bias = bias.to(cfg.bias)
        out = self._planned(cfg, qa, qb, inv_a, inv_b, d_scale, bias, gelu_aux)
        return out if isinstance(out, tuple) else (out, {})

    def _planned(
        self, cfg: GemmConfig, qa: Any, qb: Any, inv_a: Any, inv_b: Any, d_scale: Any, bias: Any, aux: Any,
    ) -> Any:  # fmt: skip
        key = self._key(cfg, qa, qb, None if aux is None else aux.dtype)
        scales = {"a": inv_a.reshape(1), "b": inv_b.reshape(1)}
        if cfg.fp8_result:
            scales["d"] = d_scale.reshape(1).float()
        inputs = {}
        if bias is not None:
            inputs["bias"] = bias.reshape(-1, 1)
        if aux is not None:
            inputs["gelu_aux"] = aux
        with self._lock:
            mm = self._planners.get(key)
            if mm is None:
                mm = self._plan(key, cfg, qa, qb, scales, inputs)
            else:
                self._planners.move_to_end(key)
                mm.reset_operands(a=qa, b=qb.T, quantization_scales=scales, epilog_inputs=inputs or None)
            pin_if_capturing(self._pinned, key, qa)
            try:
                return mm.execute()
            finally:
                mm.release_operands()

    def _plan(self, key: tuple, cfg: GemmConfig, qa: Any, qb: Any, scales: dict, inputs: dict) -> Any:
        from nvmath.linalg.advanced import Matmul

        refuse_planning(f"an FP8 MLP block would plan a new fused GEMM ({cfg.epilog})", qa)
        options, plan = cfg.matmul_arguments()
        mm = Matmul(qa, qb.T, quantization_scales=scales, options=options)
        try:
            mm.plan(epilog_inputs=inputs or None, **plan)
        except BaseException:
            mm.free()
            raise
        self.plans += 1
        self._planners[key] = mm
        evict(self._planners, self._pinned, self.maxsize)
        return mm

    def report(self) -> dict[str, str]:
        """``{config: why cuBLASLt refused it}`` for every refused fused GEMM (empty: all ran fused)."""
        return {f"{k[0]} a={tuple(k[1])} b={tuple(k[2])}": v for k, v in self._refused.items()}

    def clear(self) -> None:
        """Free every planner (also those captured CUDA graphs replay: drop such graphs first) and
        forget refusals."""
        with self._lock:
            for mm in self._planners.values():
                mm.free()
            self._planners.clear()
            self._pinned.clear()
            self._refused.clear()
            self._verdicts.clear()


fp8_epilog_gemms = FP8EpilogGemms()
"""The fused FP8 GEMM planners of FP8 MLP blocks (shared by blocks of equal shapes)."""
