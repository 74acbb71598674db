"""Checks of a distributed matmul before planning: this rank's operands locally, then every rank's
facts and verdict in one collective (bad input raises on every rank, naming the ranks)."""

from __future__ import annotations

from typing import Any

from nvmath._internal.tensors import TensorAdapter, wrap, wrap_operands
from nvmath.distributed._agreement import gather_by_rank

from ._extras import check_scale
from ._options import MatmulOptions
from ._problem import COMPUTE_TYPES, local_order, local_orders, parse_qualifiers
from ._quantize import FP8, TypePlan, scales_given, type_plan

__all__ = ["gather_checked", "local_check", "not_yet", "wrap_inputs"]

WHAT = "nvmath.distributed.linalg.advanced.Matmul"


def not_yet(**given: Any) -> None:
    for name, value in given.items():
        if value not in (None, False):
            raise NotImplementedError(f"{WHAT}: {name} is not implemented yet in the distributed matmul")


def wrap_inputs(epilog_inputs: Any) -> dict[str, TensorAdapter]:
    """The epilog inputs, wrapped (``{}`` for None)."""
    if epilog_inputs is None:
        return {}
    if not isinstance(epilog_inputs, dict):
        raise TypeError(f"epilog_inputs must be a dict of tensors; got {type(epilog_inputs).__name__}")
    return {name: wrap(value, f"epilog input {name!r}") for name, value in epilog_inputs.items()}


def local_check(ops: dict[str, TensorAdapter], device: int, options: MatmulOptions,
                 scales: dict[str, Any]) -> tuple[TypePlan, dict[str, Any]]:  # fmt: skip
    """This rank's operands: GPU tensors of the runtime's device, describable layouts, ``a`` and
    ``b`` of one supported dtype (or both FP8, not both e5m2), ``c`` and the scales as the types
    need; returns the problem's types and the checked scales."""
    for name, op in ops.items():
        if op.device_id != device:
            raise ValueError(
                f"operand {name} is on device {op.device_id}; nvmath.distributed runs on {device}"
            )
        if len(op.shape) != 2 or local_order(tuple(op.shape), tuple(op.strides)) is None:
            raise ValueError(
                f"operand {name}: shape {tuple(op.shape)} strides {tuple(op.strides)}: cuBLASMp "
                "needs a 2-D local matrix in Fortran or C order"
            )
    ta, tb = ops["a"].dtype, ops["b"].dtype
    both_fp8 = ta in FP8 and tb in FP8 and (ta, tb) != ("float8_e5m2", "float8_e5m2")
    if ta not in COMPUTE_TYPES or (ta != tb and not both_fp8) or (ta == tb == "float8_e5m2"):
        raise ValueError(
            f"operand dtypes a={ta}, b={tb}: the distributed matmul takes a and b of one of "
            f"{', '.join(COMPUTE_TYPES)} (or two FP8 types, not both float8_e5m2)"
        )
    c_dtype = ops["c"].dtype if "c" in ops else None
    if c_dtype is not None and ta not in FP8 and c_dtype != ta:
        raise ValueError(f"operand c is {c_dtype}; a and b are {ta}: c must have their dtype")
    types = type_plan(ta, c_dtype, options.result_type, set(scales), options.result_amax,
                      options.block_scaling)  # fmt: skip
    checked = {n: check_scale(n, v, ops["a"].package, device) for n, v in scales.items()}
    return types, checked


def gather_checked(
    group: Any,
    device: int,
    operands: dict[str, Any],
    distributions: Any,
    qualifiers: Any,
    options: MatmulOptions,
    quantization_scales: Any,
) -> tuple[dict[str, TensorAdapter], tuple, dict[int, Any], TypePlan, dict[str, Any]]:
    """Check this rank's operands locally, then gather every rank's facts and verdict in one
    collective; raise on every rank if any rank's operands are unusable. Returns the wrapped
    operands, the qualifiers, ``{rank: facts}``, the types and the checked scales."""
    problem: BaseException | None = None
    try:
        ops = wrap_operands(**operands)
        types, scales = local_check(ops, device, options, scales_given(quantization_scales))
        quals = parse_qualifiers(qualifiers)
        agreed = {
            "dtype": ops["a"].dtype,
            "distributions": tuple(repr(d) for d in distributions),
            "qualifiers": quals,
            "c": "c" in ops,
            "options": (options.inplace, options.compute_type, options.algo_type,
                        options.sm_count_communication, options.result_type, options.result_amax),
            "types": (ops["b"].dtype, types.result, types.scales),
        }  # fmt: skip
        shapes = {name: tuple(op.shape) for name, op in ops.items()}
        orders = {name: local_orders(tuple(op.shape), tuple(op.strides)) for name, op in ops.items()}
    except (TypeError, ValueError, NotImplementedError) as exc:
        problem, agreed, shapes, orders = exc, {}, {}, {}
    facts = {
        "agreed": agreed,
        "shapes": shapes,
        "orders": orders,
        "problem": None if problem is None else repr(problem),
    }
    everyone = gather_by_rank(group, facts)
    if problem is not None:
        raise problem
    bad = {r: f["problem"] for r, f in everyone.items() if f["problem"]}
    if bad:
        raise ValueError(f"{WHAT}: the operands of rank(s) {sorted(bad)} are not usable: {bad}")
    return ops, quals, everyone, types, scales
