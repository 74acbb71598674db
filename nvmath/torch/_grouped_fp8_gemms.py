"""The per-group FP8 GEMMs of the FP8 :class:`~nvmath.torch.GroupedLinear` on planners that run on bare
addresses: :class:`GroupedFP8Gemms`.

Why not the FP8 Linear layers' planner caches (:data:`~._fp8_linear.fp8_gemm_cache`,
:data:`~._fp8_epilogs.fp8_epilog_gemms`). They hand every call's dequantization scales to
``reset_operands`` and release the operands afterwards, so each GEMM runs the full reset (the scales
checked as options and re-pointed; ~100 us of host time per GEMM measured on this machine's fake GPU
against ~12 us for a pointer swap of ``a`` and ``b``), and a grouped layer runs three GEMMs per group
(24 per step with 8 experts): host-bound. Here:

* every planner is made with scale tensors that never move: two float32 slots of one device buffer
  per planner (:attr:`GroupedFP8Gemms.slots`). Before a product's GEMMs run, one ``index_put_``
  writes every group's dequantization scales into its planner's slots (stream-ordered before the
  GEMMs, so a planner shared by two layers of equal shapes reads each layer's scales), from a tensor
  of the caller that holds both operands' scales as rows where it has one (no op joining them);
* a call then runs each planner on its operands' addresses (an
  :class:`~nvmath.linalg.advanced._direct.AddressRun` whose plan keeps its scale slots: the key
  vouches for shapes, strides, dtypes and alignments; the forward's bias, the ``BIAS`` epilogue as in
  FP8 ``Linear``, an address too), writing the product straight into the caller's ``out`` view (a
  group's rows of the layer's ``y`` or ``dx``, its slice of the ``(G, N, K)`` weight gradient) where
  the view has the plan's result layout and alignment (:data:`D_ALIGNMENT`), else into a new tensor
  copied there; a plan that cannot run on addresses swaps ``a`` and ``b`` by pointer
  (``reset_operands_unchecked``) and executes;
* with a ``signature`` (:func:`~._grouped_fp8_kernels.signature`: the counts and the bases' layouts
  and addresses modulo 256) the planners of a product are looked up and the results' layouts checked
  once, not per call (the memo, :class:`_Memo`, is forgotten whenever a planner is freed); after the
  first run on addresses the memo also holds the product's compiled group
  (:mod:`._grouped_fp8_group`: every group's launch in one C call, when the extension is built) and,
  where the caller gives the ``bases`` its views are cut from, each group's address offsets from
  them: later calls make no view (the caller passes a function that makes them, called only on a
  look-up or a per-group run) and launch on the bases' addresses plus those offsets, by the group or,
  without one, by each planner's address run;
* one planner per (product, group, problem): groups of equal counts do not share a planner (each has
  its own scale slots).

The planners hold no operands (released after planning: every run gives its addresses). GPU tensors
only (CPU tensors run the torch emulation of the caches; the tests run this class on the fake GPU with
``cpu_planned``); one stream at a time (the scale slots are shared). If planning or a run raises, the
class logs it once, switches itself off (``enabled``) and the layer runs the FP8 Linear caches from
then on.

CUDA graphs: a planner (and the scale-slot index tensor of a product) used while a graph is captured
is pinned: never evicted nor dropped (a graph replays the planner's workspace, descriptors and slots,
and the index's memory) until :meth:`GroupedFP8Gemms.clear`. A problem or an index not made before
the capture raises :class:`~nvmath.torch._capture.CaptureError` (planning and host-to-device copies
cannot be captured); that error propagates and does not switch the class off.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any

import torch

from nvmath.linalg.advanced._direct import AddressRun, address_run_possible
from nvmath.torch._capture import CaptureError, capturing, refuse_planning
from nvmath.torch._grouped_fp8_group import build as build_group

__all__ = ["GroupedFP8Gemms", "grouped_fp8_gemms"]

logger = logging.getLogger(__name__)

SLOT = 4
"""Floats per scale slot: cuBLASLt's FP8 kernels refuse (``NOT_SUPPORTED`` at the launch) scale pointers
that are not 16-byte aligned (seen on the H200: a slot at byte offset 0x24), so every slot starts on
16 bytes."""

D_ALIGNMENT = 256
"""A planned product writes its result assuming this pointer alignment (the planner tells cuBLASLt the
largest): an ``out`` view less aligned gets the product copied in."""

_RESULT = {torch.bfloat16: "CUDA_R_16BF", torch.float16: "CUDA_R_16F", torch.float32: "CUDA_R_32F"}


def _align(t: torch.Tensor) -> int:
    p = t.data_ptr() | 256
    return p & -p


def _fits(t: torch.Tensor, layout: tuple) -> bool:
    """Whether ``t`` is a result of ``layout`` = ``(shape, strides, dtype)`` on :data:`D_ALIGNMENT` bytes
    (the strides of dimensions of size 1 do not matter)."""
    shape, strides, dtype = layout
    if t.dtype != dtype or tuple(t.shape) != shape or t.data_ptr() % D_ALIGNMENT:
        return False
    return all(s == e for s, e, d in zip(t.stride(), strides, shape) if d > 1)


class _Entry:
    """A planner, its scale slots, its address run (``None`` where the plan cannot run on addresses)
    and the operands it holds (their addresses; only without an address run)."""

    __slots__ = ("address", "bias", "device", "layout", "mm", "ptrs", "slots")

    def __init__(self, mm: Any, slots: tuple[int, int], device: torch.device):
        self.mm, self.slots, self.device = mm, slots, device
        self.ptrs: tuple = ()
        self.bias: int = 0
        self.address: Any = None
        self.layout: tuple = ()
        """``(shape, strides, dtype)`` of the result the address run writes."""


class _Memo:
    """What :meth:`GroupedFP8Gemms.run` keeps per ``(kind, dtype, signature)``: the entries and their
    keys, ``direct`` (every entry runs on addresses straight into its ``out``), the scale-slot index
    ``where``, the compiled group (``None``: not built yet, ``False``: cannot be) and the members'
    address offsets from the caller's bases (``None``: not known)."""

    __slots__ = ("direct", "entries", "group", "keys", "offsets", "where")

    def __init__(self, entries: list[_Entry], keys: list[tuple], direct: bool, where: tuple):
        self.entries, self.keys, self.direct, self.where = entries, keys, direct, where
        self.group: Any = None
        self.offsets: tuple | None = None


def _offsets(bases: tuple, problems: list, biases: list, outs: list) -> tuple:
    """Every member's ``qa``, ``qb``, ``out`` (and bias) byte offsets from ``bases`` = ``(a, b, d, bias or
    None)`` (fixed by the caller's signature)."""
    pa, pb, pd = (t.data_ptr() for t in bases[:3])
    oa = tuple(qa.data_ptr() - pa for _, qa, _ in problems)
    ob = tuple(qb.data_ptr() - pb for _, _, qb in problems)
    od = tuple(t.data_ptr() - pd for t in outs)
    obias = None
    if biases[0] is not None:
        pbias = bases[3].data_ptr()
        obias = tuple(t.data_ptr() - pbias for t in biases)
    return oa, ob, od, obias


class GroupedFP8Gemms:
    """Planned per-group FP8 GEMMs ``D_k = (qa_k @ qb_k.T) * inv_a[k] * inv_b[k]`` (see the module notes).

    Args:
        maxsize: the most planners kept (least recently used freed), >= 1.
    """

    def __init__(self, maxsize: int = 256):
        self.maxsize = maxsize
        self.enabled = True
        """``False``: :meth:`run` returns ``None`` (the layer runs the FP8 Linear caches)."""
        self.cpu_planned = False
        """Run CPU tensors on planners too (the fake GPU of the tests)."""
        self.plans = 0
        """How many planners were made."""
        self._entries: OrderedDict[tuple, _Entry] = OrderedDict()
        self._slots: dict[torch.device, torch.Tensor] = {}
        self._free: dict[torch.device, list[int]] = {}
        self._index: dict[tuple, torch.Tensor] = {}
        self._memo: dict[tuple, _Memo] = {}
        """``(kind, dtype, signature)`` -> :class:`_Memo` (cleared when a
        planner is freed)."""
        self._pinned: set[tuple] = set()
        """Keys of ``_entries`` and ``_index`` a CUDA graph capture used (never evicted or dropped)."""
        self._lock = threading.Lock()

    def applies(self, t: torch.Tensor) -> bool:
        """Whether :meth:`run` takes ``t``'s device."""
        return self.enabled and (t.is_cuda or self.cpu_planned)

    def run(
        self, kind: str, problems: Any, inv_a: torch.Tensor, inv_b: torch.Tensor, dtype: torch.dtype,
        bias: list | None = None, out: list | None = None, signature: tuple | None = None,
        bases: tuple | None = None, scales: tuple | None = None,
    ) -> Any:  # fmt: skip
        """``[D_k]`` for ``problems`` = ``[(k, qa_k, qb_k)]`` (FP8, both contiguous along K) with the
        dequantization scales ``inv_a[k]``, ``inv_b[k]`` ((G,) float32), in ``dtype``; with ``bias``
        (one tensor per problem) the forward's ``BIAS`` epilogue along D's rows. ``out``: one tensor
        per problem (views of the caller's result, D's shape and ``dtype``) that the products are
        written into (straight, where the plan's result layout is the view's; else copied) and
        returned. ``signature``: a tuple the caller vouches determines every problem's (and ``out``'s)
        shapes, strides, dtypes, device and address alignments, and the problems' groups: the planners
        looked up and the results' layouts checked once per signature, not per call. ``None`` when
        this runner is off or failed (nothing to use: the caller runs its other path).

        ``problems`` may instead be a zero-argument callable returning ``(problems, bias, out)`` (``out``
        given), called only where the views are needed: with a ``signature`` and ``bases`` = ``(a, b, d,
        bias or None)``, the tensors every problem's ``qa``, ``qb``, ``out`` (and bias) are views of at
        offsets the signature fixes, a product whose compiled group is built (:mod:`._grouped_fp8_group`)
        runs on the bases' addresses plus those offsets, no view made. It then returns ``True``.

        ``scales``: ``(src, row_a, row_b)``, a (R, G) float32 tensor whose rows ``row_a`` and ``row_b``
        are ``inv_a`` and ``inv_b`` (the caller's tensor holding both): the scale slots are filled from
        it (no torch operation joining the two; :meth:`_fill`)."""
        if not self.enabled:
            return None
        try:
            capture = capturing(inv_a)  # (once per product: a capture pins what it uses)
            with self._lock:
                memo = None if signature is None else self._memo.get((kind, dtype, signature))
                if memo is not None and memo.offsets is not None and bases is not None:
                    if capture:
                        self._pinned.update(memo.keys)
                    self._fill(memo, inv_a, inv_b, scales, capture)
                    if self._run_bases(memo, bases):
                        return True
                return self._run_views(kind, problems, inv_a, inv_b, dtype, bias, out, signature, bases,
                                       memo, capture, scales)  # fmt: skip
        except CaptureError:
            raise  # (a warm-up step is missing: the caller's error, not this class's)
        except Exception as exc:  # noqa: BLE001 (a planner refused: the FP8 Linear caches from now on)
            logger.warning("grouped FP8 GEMM planners failed (%s); using the FP8 Linear planner caches", exc)
            self.enabled = False
            self.clear()
            return None

    def _run_views(
        self, kind: str, problems: Any, inv_a: torch.Tensor, inv_b: torch.Tensor, dtype: torch.dtype,
        bias: list | None, out: list | None, signature: tuple | None, bases: tuple | None, memo: Any,
        capture: bool, scales: tuple | None = None,
    ) -> Any:  # fmt: skip
        """:meth:`run` on the problems' views (the lock held)."""
        lazy = callable(problems)
        if lazy:
            problems, bias, out = problems()
        if not problems:
            return None
        biases, outs = bias or [None] * len(problems), out or [None] * len(problems)
        if memo is None:
            entries, keys, direct = self._look_up(kind, problems, dtype, biases, outs, capture)
            memo = _Memo(entries, keys, direct, self._where(entries, problems, inv_a.shape[0]))
            if signature is not None:
                if len(self._memo) > 4 * self.maxsize:  # (new counts every step: a bound)
                    self._memo.clear()
                self._memo[(kind, dtype, signature)] = memo
        elif capture:
            self._pinned.update(memo.keys)
        self._fill(memo, inv_a, inv_b, scales, capture)
        done = True if lazy else outs
        if memo.direct:  # (every product on addresses straight into its out: the steady state)
            if memo.group and self._run_group(memo, problems, biases, outs):
                return done
            for e, (_, qa, qb), b, d in zip(memo.entries, problems, biases, outs):
                ptrs = () if b is None else (b.data_ptr(),)
                e.address(qa.data_ptr(), qb.data_ptr(), d.data_ptr(), ptrs)
            if memo.group is None and signature is not None:  # (the compiled group from now on)
                memo.group = build_group([e.address for e in memo.entries]) or False
                if bases is not None:
                    memo.offsets = _offsets(bases, problems, biases, outs)
            return done
        made = [self._execute(e, qa, qb, biases[i], outs[i])
                for i, (e, (_, qa, qb)) in enumerate(zip(memo.entries, problems))]  # fmt: skip
        return True if lazy else made

    @staticmethod
    def _run_bases(memo: _Memo, bases: tuple) -> bool:
        """The product on ``bases``' addresses plus ``memo``'s offsets: by its compiled group, or (where
        none can be built: the pure-Python path) each member's address run; ``False`` (nothing launched,
        the group dropped, to be built again after the per-group runs) where the group cannot run now."""
        if memo.group is None or not memo.direct:
            return False
        oa, ob, od, obias = memo.offsets
        pa, pb, pd = bases[0].data_ptr(), bases[1].data_ptr(), bases[2].data_ptr()
        a = tuple([pa + o for o in oa])
        b = tuple([pb + o for o in ob])
        d = tuple([pd + o for o in od])
        bias = None
        if obias is not None:
            pbias = bases[3].data_ptr()
            bias = tuple([pbias + o for o in obias])
        if memo.group is False:
            for e, pa, pb, pd, i in zip(memo.entries, a, b, d, range(len(a))):
                e.address(pa, pb, pd, () if bias is None else (bias[i],))
            return True
        if memo.group(a, b, d, bias):
            return True
        memo.group = memo.offsets = None
        return False

    @staticmethod
    def _run_group(memo: _Memo, problems: list, biases: list, outs: list) -> bool:
        """Every product of ``problems`` by ``memo``'s compiled group
        (:class:`~._grouped_fp8_group.GroupCall`); ``False`` (nothing launched, the group dropped, to be
        built again after the per-group runs) where it cannot run now."""
        a = tuple([qa.data_ptr() for _, qa, _ in problems])
        b = tuple([qb.data_ptr() for _, _, qb in problems])
        d = tuple([t.data_ptr() for t in outs])
        bias = None if biases[0] is None else tuple([t.data_ptr() for t in biases])
        if memo.group(a, b, d, bias):
            return True
        memo.group = memo.offsets = None
        return False

    def _look_up(
        self, kind: str, problems: list, dtype: torch.dtype, biases: list, outs: list, capture: bool
    ) -> tuple[list[_Entry], list[tuple], bool]:
        """``(entries, their keys, direct)`` of ``problems`` (planned where new); ``direct``: every entry
        runs on addresses and every ``out`` is given in its result layout."""
        keys, entries = [], []
        for (k, qa, qb), bias in zip(problems, biases):
            b_key = None if bias is None else (bias.dtype, _align(bias))
            key = (kind, k, qa.shape, qb.shape, qa.stride(), qb.stride(), qa.dtype, qb.dtype, dtype,
                   qa.device, _align(qa), _align(qb), b_key)  # fmt: skip
            keys.append(key)
            entries.append(self._entry(key, qa, qb, dtype, bias, capture))
        direct = all(e.address is not None and d is not None and _fits(d, e.layout)
                     for e, d in zip(entries, outs))  # fmt: skip
        return entries, keys, direct

    def _entry(self, key: tuple, qa: Any, qb: Any, dtype: torch.dtype, bias: Any, capture: bool) -> _Entry:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
            if capture:
                self._pinned.add(key)
            return entry
        refuse_planning("a grouped FP8 layer would plan a new GEMM (first use of these shapes)", qa)
        self._make_room()
        entry = self._entries[key] = self._plan(qa, qb, dtype, bias)
        return entry

    def _make_room(self) -> None:
        """Free the least recently used planners not pinned by a capture until one more fits in
        ``maxsize`` (before planning: the new planner's scale slots come from the freed ones)."""
        extra = len(self._entries) + 1 - self.maxsize
        for old in [k for k in self._entries if k not in self._pinned][: max(0, extra)]:
            self._evict(self._entries.pop(old))

    def _plan(self, qa: Any, qb: Any, dtype: torch.dtype, bias: Any) -> _Entry:
        from nvmath._internal.dtypes import CudaDataType
        from nvmath.linalg.advanced import Matmul, MatmulEpilog

        slots = self._take_slots(qa.device)
        buf = self._slots[qa.device]
        scales = {"a": buf[slots[0] : slots[0] + 1], "b": buf[slots[1] : slots[1] + 1]}
        options = {"result_type": getattr(CudaDataType, _RESULT[dtype])}
        mm = Matmul(qa, qb.T, quantization_scales=scales, options=options)
        try:
            if bias is None:
                mm.plan()
            else:
                mm.plan(epilog=MatmulEpilog.BIAS, epilog_inputs={"bias": bias.reshape(-1, 1)})
        except BaseException:
            mm.free()
            self._free[qa.device].extend(slots)
            raise
        self.plans += 1
        entry = _Entry(mm, slots, qa.device)
        entry.ptrs = (qa.data_ptr(), qb.data_ptr())
        entry.bias = 0 if bias is None else bias.data_ptr()
        names = () if bias is None else ("bias",)
        if address_run_possible(mm, names, scales=True):  # (the scale slots never move)
            entry.address = AddressRun(mm, names, scales=True)
            shape, strides = entry.address.result_layout[:2]
            entry.layout = (tuple(shape), tuple(strides), dtype)
            mm.release_operands()  # (the runs give every address: the planner holds no operand)
        return entry

    def _take_slots(self, device: torch.device) -> tuple[int, int]:
        """Two free scale slots of ``device``'s buffer (slot 0: scratch, where absent groups' scales go)."""
        free = self._free.get(device)
        if free is None:
            size = 2 * self.maxsize + 1
            self._slots[device] = torch.ones(size * SLOT, dtype=torch.float32, device=device)
            free = self._free[device] = [SLOT * i for i in range(size - 1, 0, -1)]
        if len(free) < 2:
            raise RuntimeError(
                f"all {self.maxsize} grouped FP8 planners are pinned by captured CUDA graphs; a larger "
                "GroupedFP8Gemms(maxsize=...) or clear() (after dropping those graphs) makes room"
            )
        return free.pop(), free.pop()

    @staticmethod
    def _where(entries: list[_Entry], problems: list, groups: int) -> tuple:
        """The scale-slot index of ``problems`` (group ``k``'s ``inv_a``, ``inv_b`` at ``2k``, ``2k + 1``:
        its planner's slots; absent groups' into slot 0, scratch)."""
        where = [0] * (2 * groups)
        for e, (k, _, _) in zip(entries, problems):
            where[2 * k], where[2 * k + 1] = e.slots
        return tuple(where)

    @staticmethod
    def _rows(where: tuple, rows: int, row_a: int, row_b: int) -> list[list[int]]:
        """The (rows, G) scale-slot index of a source whose rows ``row_a``, ``row_b`` are ``inv_a``, ``inv_b``
        (``where``: :meth:`_where`'s pairs); the other rows go to slot 0 (scratch, as absent groups)."""
        index = [[0] * (len(where) // 2) for _ in range(rows)]
        index[row_a], index[row_b] = list(where[0::2]), list(where[1::2])
        return index

    def _fill(
        self, memo: _Memo, inv_a: torch.Tensor, inv_b: torch.Tensor, scales: tuple | None, capture: bool
    ) -> None:
        """Write every group's ``inv_a[k]``, ``inv_b[k]`` into its planner's slots: one ``index_put_`` from
        ``scales`` = ``(src (R, G), row_a, row_b)`` (:meth:`run`), else from the two stacked."""
        src, row_a, row_b = (torch.stack((inv_a, inv_b)), 0, 1) if scales is None else scales
        device = src.device
        key = (device, memo.where, src.shape[0], row_a, row_b)
        index = self._index.get(key)
        if index is None:
            if capture:
                raise CaptureError(
                    "a grouped FP8 layer would copy a new scale-slot index to the device while a CUDA graph "
                    "is being captured (first use of these groups' planners together). Run the same step "
                    "once before the capture (a warm-up iteration), then capture."
                )
            if len(self._index) > 4 * self.maxsize:
                self._drop_indices()
            rows = self._rows(memo.where, src.shape[0], row_a, row_b)
            index = self._index[key] = torch.tensor(rows, dtype=torch.int64, device=device)
        if capture:
            self._pinned.add(key)
        self._slots[device].index_put_((index,), src)

    @staticmethod
    def _execute(entry: _Entry, qa: Any, qb: Any, bias: Any, out: Any) -> torch.Tensor:
        """The product of ``entry``'s planner on ``qa``, ``qb`` (and ``bias``) into ``out`` (``None``: a
        new tensor): on addresses where it can, else by a pointer swap and ``execute``."""
        run = entry.address
        if run is not None:
            shape, strides, dtype = entry.layout
            if out is None:
                out = torch.empty_strided(shape, strides, dtype=dtype, device=qa.device)
            elif not _fits(out, entry.layout):
                out.copy_(GroupedFP8Gemms._execute(entry, qa, qb, bias, None))
                return out
            run(qa.data_ptr(), qb.data_ptr(), out.data_ptr(), () if bias is None else (bias.data_ptr(),))
            return out
        made = GroupedFP8Gemms._swap_execute(entry, qa, qb, bias)
        if out is None:
            return made
        out.copy_(made)
        return out

    @staticmethod
    def _swap_execute(entry: _Entry, qa: Any, qb: Any, bias: Any) -> torch.Tensor:
        mm = entry.mm
        ptrs = (qa.data_ptr(), qb.data_ptr())
        if bias is not None and bias.data_ptr() != entry.bias:
            mm.reset_operands_unchecked(a=qa, b=qb.T, epilog_inputs={"bias": bias.reshape(-1, 1)})
            entry.bias = bias.data_ptr()
        elif ptrs != entry.ptrs:
            mm.reset_operands_unchecked(a=qa, b=qb.T)  # (the GPU fast path: a pointer swap)
        entry.ptrs = ptrs
        out = mm.execute()
        return out[0] if isinstance(out, tuple) else out

    def _evict(self, entry: _Entry) -> None:
        self._memo.clear()
        entry.mm.free()
        self._free[entry.device].extend(entry.slots)
        self._drop_indices()

    def _drop_indices(self) -> None:
        """Forget the scale-slot indices, except those a capture used."""
        self._index = {k: v for k, v in self._index.items() if k in self._pinned}

    def clear(self) -> None:
        """Free every planner (and the operands they hold) and the scale slots, also those captured CUDA
        graphs replay (drop such graphs first)."""
        with self._lock:
            self._pinned.clear()
            for entry in self._entries.values():
                entry.mm.free()
            self._entries.clear()
            self._memo.clear()
            self._slots.clear()
            self._free.clear()
            self._index.clear()


grouped_fp8_gemms = GroupedFP8Gemms()
"""The planners of FP8 grouped layers (shared by layers of equal shapes)."""
