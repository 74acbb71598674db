"""What one ``Matmul.plan()`` builds: the epilog, the cuBLASLt problem, descriptors and algorithms.

:func:`build_plan` sequences the pure traits (:mod:`._epilogs`, :mod:`._traits`) and the RAII
objects (:mod:`._descriptors`) into a :class:`Plan`. Everything it creates is closed again if a
later step fails, so a failing ``plan()`` leaves the planner as it was.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, NamedTuple

from nvmath._errors import NotSupportedError
from nvmath._internal import caches
from nvmath._internal.logging import debug, lazy
from nvmath._internal.plan_cache import PlanCache
from nvmath._internal.streams import StreamHandle
from nvmath.bindings import cublasLt as lt
from nvmath.linalg.advanced import _algorithm, _device
from nvmath.linalg.advanced._aux_broadcast import BroadcastAux
from nvmath.linalg.advanced._descriptors import LayoutSet, MatmulDesc, PointerAttribute, Preference
from nvmath.linalg.advanced._epilogs import AUX_QUANTIZATION_SCALE, AuxOutputSpec, EpilogTraits, epilog_traits
from nvmath.linalg.advanced._layout import Op
from nvmath.linalg.advanced._operands import ScaleSlot, Slot, spec_of, wrap_epilog_inputs
from nvmath.linalg.advanced._options import (
    AUTOTUNE_NARROW_WORKSPACE_CAP,
    MatmulEpilog,
    MatmulNumericalImplFlags,
    MatmulPlanPreferences,
    MatmulReductionScheme,
    workspace_limit_bytes,
)
from nvmath.linalg.advanced._spec import Spec
from nvmath.linalg.advanced._traits import MatmulProblem, get_problem, row_order_problem

__all__ = [
    "HEURISTICS",
    "Plan",
    "Spec",
    "build_plan",
    "row_order_possible",
    "row_plan",
    "signature",
]

RESULT_AMAX = "result_amax"
_CAPS = caches.memo("nvmath.linalg.advanced: workspace caps", 64)
"""(memory_limit, device_id, autotune) -> the workspace cap in bytes."""




@dataclasses.dataclass
class Plan:
    """The products of one successful ``plan()``.

    Attributes:
        problem: the cuBLASLt problem (layouts, ops, orientation, result shape).
        epilog: the validated epilog.
        desc, layouts, preference: the RAII cuBLASLt objects (no preference when the heuristic
            result came from :data:`HEURISTICS`).
        algorithms: the candidates, best first.
        epilog_slots: epilog input tensors (bias, relu_aux, gelu_aux).
        epilog_scales: the epilog's scale inputs (``aux_quantization_scale``).
        aux: per aux output, its spec and the descriptor pointer that receives it (``None``: an
            output the library writes after ``cublasLtMatmul``, see ``epilog.aux_quantization``).
        input_pointers: per epilog-input or quantization-scale name, the descriptor pointers it feeds.
        alignments: the pointer alignments the heuristic was told (A, B, C, D of cuBLASLt).
        workspace_cap: ``MAX_WORKSPACE_BYTES``.
        broadcast: the batched copy of an aux input shared by every batch entry (the descriptor
            points at it; the launch refreshes it), or ``None``.
    """

    problem: MatmulProblem
    epilog: EpilogTraits
    desc: MatmulDesc
    layouts: LayoutSet
    preference: Preference | None
    algorithms: list[_algorithm.Algorithm]
    epilog_slots: dict[str, Slot]
    epilog_scales: dict[str, ScaleSlot]
    aux: list[tuple[AuxOutputSpec, PointerAttribute | None]]
    input_pointers: dict[str, list[PointerAttribute]]
    alignments: tuple[int, int, int, int]
    workspace_cap: int
    broadcast: BroadcastAux | None = None

    def close(self) -> None:
        """Destroy the cuBLASLt objects and drop the broadcast aux buffer (idempotent)."""
        self.broadcast = None
        self.desc.close()
        self.layouts.close()
        if self.preference is not None:
            self.preference.close()

    @property
    def workspace_size(self) -> int:
        """The largest workspace any candidate algorithm needs."""
        return max((a.workspace_size for a in self.algorithms), default=0)

    def signature(self, spec: Spec) -> tuple[Any, ...]:
        """Everything that decides which algorithms are valid and fast (the autotune cache key)."""
        return signature(spec, self.problem, self.epilog, self.alignments, self.workspace_cap)


def signature(
    spec: Spec, p: MatmulProblem, ep: EpilogTraits, alignments: tuple[int, ...], cap: int
) -> tuple[Any, ...]:
    """The problem's signature: dtypes, compute and scale types, ops, the four layouts, the epilog's
    descriptor attributes, the alignments, the workspace cap and the options that reach cuBLASLt."""
    t = spec.types
    parts = (
        t.a_dtype, t.b_dtype, t.c_dtype, t.d_dtype, int(t.compute_type), int(t.scale_type),
        int(p.transa), int(p.transb), p.a, p.b, p.c, p.d, ep.attributes, alignments,
        cap, spec.options.sm_count_target, spec.options.fast_accumulation,
    )  # fmt: skip
    modes = spec.scaling.descriptor_attributes(p.a_operand, p.b_operand)
    return parts + (tuple(modes),) if modes else parts


def _epilog(
    spec: Spec,
    prefs: MatmulPlanPreferences,
    epilog: Any,
    epilog_inputs: Mapping[str, Any] | None,
    stream: StreamHandle,
    undo: list[Callable[[], Any]],
) -> tuple[EpilogTraits, MatmulProblem, dict[str, Slot], dict[str, ScaleSlot]]:
    """Validate the epilog on the user's tensors, then move host inputs to the device."""
    tensors, scales = wrap_epilog_inputs(
        epilog_inputs, spec.package, spec.user_device, (AUX_QUANTIZATION_SCALE,)
    )

    def traits(adapters: Mapping[str, Any]) -> tuple[EpilogTraits, MatmulProblem]:
        specs: dict[str, Any] = {n: spec_of(t) for n, t in adapters.items()}
        specs.update(dict.fromkeys(scales))
        return epilog_and_problem(spec, prefs, epilog, specs)

    ep, problem = traits(tensors)  # every check happens here, before any copy
    slots = {n: Slot(f"epilog input {n!r}", t, spec.device_id, stream) for n, t in tensors.items()}
    if spec.host and slots:
        ep, problem = traits({n: s.device for n, s in slots.items()})
    scale_slots: dict[str, ScaleSlot] = {}
    for name, value in scales.items():
        scale_slots[name] = ScaleSlot(
            f"epilog input {name!r}", value, spec.package, spec.user_device, spec.device_id, stream
        )
    undo.append(lambda: [s.release() for s in slots.values()])
    return ep, problem, slots, scale_slots


_PROBLEMS = caches.memo("nvmath.linalg.advanced: matmul problems", 256)
"""(spec key, epilog, epilog input specs, epilog preferences) -> (epilog traits, problem)."""


def epilog_and_problem(
    spec: Spec, prefs: MatmulPlanPreferences, epilog: Any, specs: Mapping[str, Any]
) -> tuple[EpilogTraits, MatmulProblem]:
    """Validate the epilog and compute the cuBLASLt problem (pure; memoised per problem and epilog)."""
    key = None
    if spec.key is not None:
        key = (spec.key, epilog, tuple(specs.items()), prefs.epilog)
        try:
            hit = _PROBLEMS.get(key)
        except TypeError:  # an unhashable epilog: let epilog_traits report it
            hit = key = None
        if hit is not None:
            return hit
    mm = spec.mm
    ep = epilog_traits(
        epilog, specs, m=mm.m, n=mm.n, k=mm.k, batch=mm.batch, types=spec.types,
        preferences=prefs.epilog, cublaslt_version=spec.version,
    )  # fmt: skip
    result = ep, get_problem(mm, spec.types, **ep.problem_options)
    if key is not None:
        _PROBLEMS.put(key, result)
    return result


def _aux_specs(spec: Spec, ep: EpilogTraits) -> list[AuxOutputSpec]:
    aux = list(ep.aux_outputs)
    if spec.options.result_amax:
        aux.append(AuxOutputSpec(RESULT_AMAX, (1,), (1,), "float32"))
    return aux


def _descriptor(
    spec: Spec,
    problem: MatmulProblem,
    ep: EpilogTraits,
    inputs: Mapping[str, int],
    aux: Sequence[AuxOutputSpec],
    attributes: tuple[tuple[str, int], ...],
) -> tuple[
    MatmulDesc, list[tuple[AuxOutputSpec, PointerAttribute | None]], dict[str, list[PointerAttribute]]
]:
    """The matmul descriptor with ``attributes`` (:func:`_desc_attributes`) and the pointers known at
    plan time."""
    opts, t = spec.options, spec.types
    desc = MatmulDesc(t.compute_type, t.scale_type, attributes)
    try:
        pointers = list(ep.pointer_attributes)
        if t.narrow_inputs:
            pointers += [
                ("A_SCALE_POINTER", "scale:" + problem.a_operand),
                ("B_SCALE_POINTER", "scale:" + problem.b_operand),
            ]
        pointers += [
            (f"{n.upper()}_SCALE_POINTER", f"scale:{n}") for n in ("c", "d") if "scale:" + n in inputs
        ]
        if opts.result_amax:
            pointers.append(("AMAX_D_POINTER", RESULT_AMAX))
        if not pointers:  # (a plain problem: a recycled descriptor stays recyclable)
            return desc, [(a, None) for a in aux], {}
        by_input: dict[str, list[PointerAttribute]] = {}
        aux_names = {a.name for a in aux}
        by_aux: dict[str, PointerAttribute] = {}
        for attr, source in pointers:
            slot = desc.pointer(attr)
            if source in aux_names:
                by_aux[source] = slot
            else:
                slot.set(inputs[source])
                by_input.setdefault(source, []).append(slot)
        # outputs no descriptor pointer receives (an FP8 aux, its amax) are the library's to write
        return desc, [(a, by_aux.get(a.name)) for a in aux], by_input
    except BaseException:
        desc.close()
        raise


def _desc_attributes(spec: Spec, problem: MatmulProblem, ep: EpilogTraits) -> tuple[tuple[str, int], ...]:
    """The scalar attributes of the problem's matmul descriptor (those not at their defaults)."""
    opts, t = spec.options, spec.types
    attrs: list[tuple[str, int]] = []
    if problem.transa != Op.N:
        attrs.append(("TRANSA", int(problem.transa)))
    if problem.transb != Op.N:
        attrs.append(("TRANSB", int(problem.transb)))
    attrs += [(name, int(value)) for name, value in ep.attributes if not (name == "EPILOGUE" and value == 1)]
    if opts.sm_count_target:
        attrs.append(("SM_COUNT_TARGET", int(opts.sm_count_target)))
    if t.narrow_inputs and opts.fast_accumulation:
        attrs.append(("FAST_ACCUM", 1))
    attrs += [(n, int(v)) for n, v in spec.scaling.descriptor_attributes(problem.a_operand, problem.b_operand)]
    return tuple(attrs)


def workspace_cap(memory_limit: Any, device_id: int, *, autotune: bool = False) -> int:
    """``MAX_WORKSPACE_BYTES`` for ``memory_limit`` on ``device_id`` (memoised: it parses strings);
    ``autotune``: the cap of autotuning's extra candidates."""
    key = (memory_limit, device_id, autotune)
    cap = _CAPS.get(key)
    if cap is None:
        total = _device.device_info(device_id).total_memory
        cap = _CAPS.put(key, workspace_limit_bytes(memory_limit, total, autotune=autotune))
    return cap


def _preference_settings(
    spec: Spec, prefs: MatmulPlanPreferences, aligns: tuple[int, ...], cap: int | None = None
) -> list[tuple[str, Any]]:
    """The preference attributes to set, ``MAX_WORKSPACE_BYTES`` (``cap``, default: the plan's) first."""
    if cap is None:
        cap = workspace_cap(spec.options.memory_limit, spec.device_id)
    settings: list[tuple[str, Any]] = [("MAX_WORKSPACE_BYTES", cap)]
    settings += [
        (f"MIN_ALIGNMENT_{n}_BYTES", a) for n, a in zip("ABCD", aligns) if a != _device.MAX_ALIGNMENT
    ]
    if prefs.reduction_scheme_mask != MatmulReductionScheme.MASK:
        settings.append(("REDUCTION_SCHEME_MASK", prefs.reduction_scheme_mask))
    if prefs.max_waves_count:
        settings.append(("MAX_WAVES_COUNT", prefs.max_waves_count))
    if prefs.numerical_impl_mask != MatmulNumericalImplFlags.ALL:
        settings.append(("IMPL_MASK", prefs.numerical_impl_mask))
    return settings


def _alignments(spec: Spec, problem: MatmulProblem, slots: Mapping[str, Slot]) -> tuple[int, int, int, int]:
    a = slots[problem.a_operand].alignment
    b = slots[problem.b_operand].alignment
    d = slots["c"].alignment if problem.inplace else _device.MAX_ALIGNMENT
    c = slots["c"].alignment if spec.has_c else d
    return a, b, c, d


def _algorithms(
    handle: int, desc: MatmulDesc, layouts: LayoutSet, pref: Preference, prefs: MatmulPlanPreferences,
    algorithms: Sequence[Any] | None, memo_key: Any = None,
) -> list[_algorithm.Algorithm]:  # fmt: skip
    if algorithms is not None:
        if (
            isinstance(algorithms, _algorithm.Algorithm)
            or not isinstance(algorithms, Sequence)
            or not algorithms
        ):
            raise TypeError(
                f"algorithms must be a non-empty sequence of Algorithm objects; got {algorithms!r}"
            )
        found = list(algorithms)
        for alg in found:
            if not isinstance(alg, _algorithm.Algorithm):
                raise TypeError(
                    f"algorithms must contain Algorithm objects; got {type(alg).__name__}: {alg!r}"
                )
            _algorithm.check_algorithm(handle, desc.ptr, layouts.ptrs, alg)
        return found
    found = _algorithm.query_heuristics(handle, desc.ptr, layouts.ptrs, pref.ptr, prefs.limit)
    if found and memo_key is not None:
        HEURISTICS.put(memo_key, _algorithm.to_records(found))
    if not found:
        raise NotSupportedError(
            "cuBLASLt found no algorithm for this problem (dtypes, layouts, epilog and alignments); try a larger "
            "memory_limit, other preferences, or operands with 16-byte aligned pointers and leading dimensions"
        )
    return found


HEURISTICS: PlanCache[Any] = caches.register(
    "nvmath.linalg.advanced: heuristics", PlanCache(256, name="matmul heuristics memo")
)
"""Heuristic results (numpy records) by problem signature, process-wide and bounded (LRU).

cuBLASLt's heuristic is deterministic for a signature, so a second ``Matmul`` of the same problem
skips ``cublasLtMatmulAlgoGetHeuristic``. Only plain problems are memoised: no epilog pointer inputs
and tensor-wide scales (pointer values the heuristic might look at never enter the key)."""


class HashedKey:
    """A memo key hashed once: a key kept (in a :class:`Recipe`) and looked up again and again."""

    __slots__ = ("_hash", "key")

    def __init__(self, key: Hashable):
        self.key, self._hash = key, hash(key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (type(other) is HashedKey and self._hash == hash(other) and self.key == other.key)

    def __repr__(self) -> str:
        return f"HashedKey({self.key!r})"


def _memo_key(
    spec: Spec, problem: MatmulProblem, ep: EpilogTraits, aligns: tuple[int, ...], cap: int,
    prefs: MatmulPlanPreferences, context: int | None,
) -> HashedKey | None:  # fmt: skip
    """The :data:`HEURISTICS` key of a plain problem, or ``None`` (epilog pointer inputs,
    non-tensor-wide scales).

    ``context`` is the planning stream's green context (``None``: the device's primary context): a
    partition's SM count may change the heuristic's answer.
    """
    if ep.pointer_attributes or not spec.scaling.tensor_wide:
        return None
    return HashedKey((spec.device_id, context, spec.version, prefs, signature(spec, problem, ep, aligns, cap)))


class Recipe(NamedTuple):
    """The pure part of a plan: what one problem (:attr:`Spec.key <._spec.Spec>`), epilog, preferences,
    operand alignments and context always give (memoised in :data:`RECIPES` when no epilog input is
    given). Attributes: the epilog traits and problem; the aux outputs; the descriptor's scalar
    attributes; the preference settings and workspace cap; the :data:`HEURISTICS` key (or ``None``)."""

    ep: EpilogTraits
    problem: MatmulProblem
    aux: tuple[AuxOutputSpec, ...]
    attributes: tuple[tuple[str, int], ...]
    aligns: tuple[int, int, int, int]
    settings: tuple[tuple[str, Any], ...]
    cap: int
    memo_key: HashedKey | None


RECIPES = caches.memo("nvmath.linalg.advanced: plan recipes", 256)
"""(problem key, options that reach cuBLASLt, epilog, preferences, alignments, context, row order) ->
:class:`Recipe`."""


def _recipe_key(
    spec: Spec, prefs: MatmulPlanPreferences, epilog: Any, slots: Mapping[str, Slot], context: int | None,
    row_order: bool,
) -> Any:  # fmt: skip
    """The :data:`RECIPES` key, or ``None`` (a problem that is not memoisable); it may be unhashable
    (an epilog that is no :class:`MatmulEpilog`: ``epilog_traits`` reports it)."""
    if spec.key is None:
        return None
    o = spec.options
    return (
        spec.key, spec.device_id, o.memory_limit, o.sm_count_target, o.fast_accumulation, epilog, prefs,
        tuple(s.alignment for s in slots.values()), context, row_order,
    )  # fmt: skip


def _recipe(
    spec: Spec, prefs: MatmulPlanPreferences, ep: EpilogTraits, problem: MatmulProblem,
    slots: Mapping[str, Slot], context: int | None,
) -> Recipe:  # fmt: skip
    aligns = _alignments(spec, problem, slots)
    settings = tuple(_preference_settings(spec, prefs, aligns))
    cap = int(settings[0][1])
    return Recipe(
        ep, problem, tuple(_aux_specs(spec, ep)), _desc_attributes(spec, problem, ep), aligns, settings, cap,
        _memo_key(spec, problem, ep, aligns, cap, prefs, context),
    )  # fmt: skip


def row_plan(
    spec: Spec, slots: Mapping[str, Slot], scales: Mapping[str, ScaleSlot], prefs: MatmulPlanPreferences | None,
    current: Plan, stream: StreamHandle, handle: int, log: logging.Logger | logging.LoggerAdapter,
) -> Plan | None:  # fmt: skip
    """The ``ORDER_ROW`` formulation of ``current``'s problem for autotuning to try, or ``None``.

    ``prefs`` are the preferences ``current`` was planned with (``None``: it was given algorithms).
    """
    ep = current.epilog
    if prefs is None or not current.problem.transposed or not row_order_possible(spec, ep.epilog, ep.inputs):
        return None
    try:
        return build_plan(spec, slots, scales, prefs, None, None, None, stream, handle, log, row_order=True)
    except (NotSupportedError, lt.cuBLASLtError) as exc:
        log.info("Matmul: autotuning tries the default formulation only: %s", exc)
        return None


def widen(
    plan: Plan, spec: Spec, prefs: MatmulPlanPreferences | None, handle: int,
    log: logging.Logger | logging.LoggerAdapter,
) -> int:  # fmt: skip
    """Append to ``plan``'s candidates the algorithms cuBLASLt offers its problem under autotuning's
    other workspace caps: the larger :data:`~._options.AUTOTUNE_WORKSPACE_CAP` (under the default
    ``memory_limit``) and the smaller :data:`~._options.AUTOTUNE_NARROW_WORKSPACE_CAP`; return how many
    were new.

    The descriptor and layouts are the plan's, so the extra candidates run as its own do. Nothing is
    added when the plan was given its algorithms (``prefs`` is ``None``).
    """
    if prefs is None:
        return 0
    wide = workspace_cap(spec.options.memory_limit, spec.device_id, autotune=True)
    caps = [wide] if wide > plan.workspace_cap else []  # (equal under an explicit memory_limit)
    if AUTOTUNE_NARROW_WORKSPACE_CAP < plan.workspace_cap:
        caps.append(AUTOTUNE_NARROW_WORKSPACE_CAP)
    seen = {a.config_key() for a in plan.algorithms}
    added = 0
    for cap in caps:
        pref = Preference(_preference_settings(spec, prefs, plan.alignments, cap))
        try:
            found = _algorithm.query_heuristics(handle, plan.desc.ptr, plan.layouts.ptrs, pref.ptr, prefs.limit)
        except lt.cuBLASLtError as exc:
            log.info("Matmul: no candidates with a %d-byte workspace: %s", cap, exc)
            continue
        finally:
            pref.close()
        new = [a for a in found if a.config_key() not in seen]
        seen.update(a.config_key() for a in new)
        plan.algorithms.extend(new)
        added += len(new)
    return added


def trim_workspace(plan: Plan) -> None:
    """Drop the candidates after the first whose workspace exceeds both the plan's cap and the first's
    (after autotuning: a losing wide candidate must not size the workspace every execution uses)."""
    algorithms = plan.algorithms
    if not algorithms:
        return
    limit = max(plan.workspace_cap, algorithms[0].workspace_size)
    plan.algorithms = [algorithms[0]] + [a for a in algorithms[1:] if a.workspace_size <= limit]


def row_order_possible(spec: Spec, epilog: Any, epilog_inputs: Any) -> bool:
    """Whether the product (with this epilog request) has an ``ORDER_ROW`` formulation at all."""
    return (
        epilog in (None, MatmulEpilog.DEFAULT)
        and not epilog_inputs
        and not spec.options.result_amax
        and row_order_problem(spec.mm, spec.types) is not None
    )


def _row_problem(spec: Spec, ep: EpilogTraits) -> MatmulProblem:
    problem = row_order_problem(spec.mm, spec.types)
    if problem is None or ep.epilog != MatmulEpilog.DEFAULT:
        raise ValueError("the ORDER_ROW formulation needs row-major operands and no epilog")
    return problem


def build_plan(
    spec: Spec,
    slots: Mapping[str, Slot],
    scales: Mapping[str, ScaleSlot],
    prefs: MatmulPlanPreferences,
    algorithms: Sequence[Any] | None,
    epilog: Any,
    epilog_inputs: Mapping[str, Any] | None,
    stream: StreamHandle,
    handle: int,
    log: logging.Logger | logging.LoggerAdapter,
    *,
    row_order: bool = False,
) -> Plan:
    """Validate the epilog, compute the cuBLASLt problem, build descriptors and find algorithms.

    ``row_order=True`` builds the ``ORDER_ROW`` formulation (:func:`._traits.row_order_problem`) of
    a problem without epilog; autotuning tries it beside the default one.

    Raises:
        TypeError, ValueError: bad epilog, epilog inputs or algorithms (before any cuBLASLt object exists).
        NotSupportedError: cuBLASLt has no algorithm for the problem.
    """
    undo: list[Callable[[], Any]] = []  # closers of what this call made, run if a later step fails
    try:
        key = None if epilog_inputs else _recipe_key(spec, prefs, epilog, slots, stream.ctx, row_order)
        recipe = None
        if key is not None:
            try:
                recipe = RECIPES.get(key)
            except TypeError:  # an unhashable epilog: epilog_traits reports it
                key = None
        ep_slots: dict[str, Slot] = {}
        ep_scales: dict[str, ScaleSlot] = {}
        if recipe is None:
            ep, problem, ep_slots, ep_scales = _epilog(spec, prefs, epilog, epilog_inputs, stream, undo)
            if row_order:
                problem = _row_problem(spec, ep)
            recipe = _recipe(spec, prefs, ep, problem, slots, stream.ctx)
            if key is not None:
                RECIPES.put(key, recipe)
        ep, problem = recipe.ep, recipe.problem
        inputs = {n: s.ptr for n, s in ep_slots.items()}
        inputs.update({n: s.ptr for n, s in ep_scales.items()})
        inputs.update({"scale:" + n: s.ptr for n, s in scales.items()})
        broadcast = _broadcast(ep, ep_slots, inputs, stream)
        desc, aux_pointers, input_pointers = _descriptor(spec, problem, ep, inputs, recipe.aux, recipe.attributes)
        if broadcast is not None:  # the descriptor keeps the buffer's address whatever the aux
            input_pointers.pop(broadcast.spec.name, None)
        undo.append(desc.close)
        layouts = LayoutSet(problem)
        undo.append(layouts.close)
        memo_key = recipe.memo_key if algorithms is None else None
        records = None if memo_key is None else HEURISTICS.get(memo_key, count_miss=False)
        if records is not None:  # a problem planned before: no preference object, no heuristic query
            pref, found = None, _algorithm.from_records(records)
        else:
            pref = Preference(recipe.settings)
            undo.append(pref.close)
            found = _algorithms(handle, desc, layouts, pref, prefs, algorithms, memo_key)
        plan = Plan(
            problem, ep, desc, layouts, pref, found, ep_slots, ep_scales, aux_pointers, input_pointers,
            recipe.aligns, recipe.cap, broadcast,
        )  # fmt: skip
    except BaseException:
        for close in reversed(undo):
            close()
        raise
    debug(log, "problem: %s", lazy(_describe, plan))
    return plan


def _broadcast(
    ep: EpilogTraits, slots: Mapping[str, Slot], inputs: dict[str, int], stream: StreamHandle
) -> BroadcastAux | None:
    """The batched buffer of an aux input shared by every batch entry (allocated here, once per plan),
    whose address replaces the input's in ``inputs``; ``None`` when the epilog has none."""
    spec = ep.broadcast_input
    if spec is None:
        return None
    broadcast = BroadcastAux(spec, slots[spec.name], stream)
    inputs[spec.name] = broadcast.ptr
    return broadcast


def _describe(plan: Plan) -> str:
    p = plan.problem
    lines = [
        (
            f"transposed={p.transposed} m={p.m} n={p.n} k={p.k} ops={p.transa.name}{p.transb.name} "
            f"batch={p.batch.shape} result={p.result_shape}/{p.result_strides}"
        ),
        *(f"layout {n.upper()}: {getattr(p, n)}" for n in "abcd"),
        f"descriptor: {plan.desc.attributes}; per-call pointers: {[a.name for a, _ in plan.aux]}",
        f"preference: {plan.preference.settings if plan.preference is not None else '(memoised heuristic)'}",
        f"algorithms: {plan.algorithms}",
    ]
    return "\n  ".join(lines)
