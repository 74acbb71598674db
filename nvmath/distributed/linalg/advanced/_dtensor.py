"""torch DTensors in and out of the distributed matmul, and autograd through it.

:func:`matmul` (reached from :func:`~._stateless.matmul` when ``a`` or ``b`` is a DTensor) reads
each operand's placement on a one-dimensional device mesh of every rank (see
:mod:`nvmath.distributed.distribution._dtensor`): ``Shard(0)`` is a :class:`BlockNonCyclic` on a
P x 1 grid (``torch.chunk``'s split: blocks of ``ceil(n / P)``, the last ranks short), ``Shard(1)``
the same on 1 x P. A ``Replicate()`` operand is given to cuBLASMp as this rank's chunk of its rows
(``a``) or columns (``b``), a view, so cuBLASMp gathers what it needs itself. The result is a
DTensor sharded as ``c`` when given, else along its columns when ``b`` is ``Shard(1)`` (the
column-parallel layout of tensor parallelism), else along its rows (the row-parallel one: with
``a`` ``Shard(1)`` and ``b`` ``Shard(0)`` cuBLASMp runs GEMM + ReduceScatter).

When grad mode is on and ``a`` or ``b`` requires a gradient, the product runs in
:class:`DistributedMatmulFunction`, whose backward issues the two distributed GEMMs
``grad_a = grad @ b^T`` (sharded as ``a``) and ``grad_b = a^T @ grad`` (sharded as ``b``); a
replicated operand's gradient is computed sharded and all-gathered by DTensor. Autograd covers the
plain product ``alpha * a @ b`` (no ``c``, epilog, qualifiers or scales: those raise
NotImplementedError when a gradient is required).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from nvmath.distributed import _runtime
from nvmath.distributed.distribution import BlockNonCyclic, ProcessGrid
from nvmath.distributed.distribution._dtensor import is_dtensor, placement_spec
from nvmath.distributed.distribution._index import noncyclic_block_size

__all__ = ["DistributedMatmulFunction", "Sharded", "is_dtensor", "matmul"]


@dataclasses.dataclass(frozen=True)
class Sharded:
    """One operand as this module handles it: the local tensor, its placement spec
    (``("shard", 0 | 1)`` or ``("replicate", None)``) and the global shape."""

    local: Any
    spec: tuple[str, int | None]
    shape: tuple[int, int]

    def t(self) -> Sharded:
        """The transpose (a view; the shard dimension flips)."""
        spec = self.spec if self.spec[0] == "replicate" else ("shard", 1 - self.spec[1])  # type: ignore[operator]
        return Sharded(self.local.t(), spec, (self.shape[1], self.shape[0]))


def _nranks() -> tuple[int, int]:
    group = _runtime.context().process_group
    return group.rank, group.nranks


def sharded(x: Any, name: str) -> Sharded:
    """The :class:`Sharded` view of a 2-D DTensor on a 1-D mesh of every rank.

    Raises:
        ValueError: not 2-D, a mesh that is not 1-D or not of every rank, a ``Partial`` placement.
        TypeError: not a DTensor.
    """
    if not is_dtensor(x):
        raise TypeError(
            f"operand {name}: with DTensor operands every operand must be a DTensor; got {type(x).__name__}"
        )
    _, nranks = _nranks()
    mesh = x.device_mesh
    if mesh.ndim != 1 or mesh.size() != nranks:
        raise ValueError(
            f"operand {name}: the distributed matmul takes DTensors on a 1-D device mesh of all {nranks} ranks; "
            f"got a mesh of shape {tuple(mesh.shape)}"
        )
    if len(x.shape) != 2:
        raise ValueError(f"operand {name}: a 2-D DTensor is needed; got shape {tuple(x.shape)}")
    spec = placement_spec(x.placements[0])
    return Sharded(x.to_local(), spec, (int(x.shape[0]), int(x.shape[1])))


def _grid_distribution(dim: int, nranks: int) -> BlockNonCyclic:
    shape = (nranks, 1) if dim == 0 else (1, nranks)
    return BlockNonCyclic(ProcessGrid(shape=shape, layout=ProcessGrid.Layout.ROW_MAJOR))


def _chunk(x: Sharded, dim: int) -> Any:
    """This rank's ``torch.chunk`` piece of a replicated operand along ``dim`` (a view)."""
    rank, nranks = _nranks()
    extent = x.shape[dim]
    block = noncyclic_block_size(extent, nranks)
    start = min(rank * block, extent)
    return x.local.narrow(dim, start, min(start + block, extent) - start)


def local_matmul(x: Sharded, y: Sharded, out_dim: int, **kwargs: Any) -> Any:
    """This rank's block (sharded along ``out_dim``) of ``op(x) @ op(y)`` through the distributed
    matmul; ``kwargs`` go to it (``alpha``, ``epilog``, ...)."""
    from ._planner import matmul as distributed_matmul

    _, nranks = _nranks()
    dims = []
    locals_ = []
    for op, default in ((x, 0), (y, 1)):
        dim = default if op.spec[0] == "replicate" else int(op.spec[1])  # type: ignore[arg-type]
        locals_.append(_chunk(op, dim) if op.spec[0] == "replicate" else op.local)
        dims.append(dim)
    distributions = [_grid_distribution(d, nranks) for d in (*dims, out_dim)]
    options = {"inplace": "c" in kwargs, **_options_dict(kwargs.pop("options", None))}
    return distributed_matmul(*locals_, distributions=distributions, options=options, **kwargs)


def _options_dict(options: Any) -> dict[str, Any]:
    """``MatmulOptions`` fields as a dict (a dict or None as given)."""
    if options is None or isinstance(options, dict):
        return dict(options or {})
    return {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}


def result_dim(a: Sharded, b: Sharded) -> int:
    """The result's shard dimension without ``c`` (see the module docstring)."""
    return 1 if b.spec == ("shard", 1) else 0


def _wrap(local: Any, like: Any, dim: int, shape: tuple[int, int], replicate: bool = False) -> Any:
    """A DTensor on ``like``'s mesh from this rank's block sharded along ``dim``; ``replicate``:
    all-gathered into a replicated DTensor."""
    from torch.distributed.tensor import DTensor, Replicate, Shard

    mesh = like.device_mesh
    _, nranks = _nranks()
    stride = (shape[1], 1)
    if replicate and nranks == 1:
        return DTensor.from_local(local, mesh, [Replicate()], run_check=False, shape=shape, stride=stride)
    out = DTensor.from_local(local, mesh, [Shard(dim)], run_check=False, shape=shape, stride=stride)
    return out.redistribute(mesh, [Replicate()]) if replicate else out


def _autograd_needed(a: Any, b: Any) -> bool:
    import torch

    return torch.is_grad_enabled() and (a.requires_grad or b.requires_grad)


def matmul(a: Any, b: Any, c: Any = None, **kwargs: Any) -> Any:
    """The distributed matmul of DTensors (see the module docstring); returns a DTensor, or
    ``(DTensor, aux)`` with aux outputs (this rank's parts, local tensors)."""
    if kwargs.get("qualifiers") is not None:
        raise ValueError("qualifiers are not taken with DTensor operands: transpose the DTensor (x.mT)")
    if kwargs.pop("distributions", None) is not None:
        raise ValueError("distributions come from the DTensors' placements: do not pass them")
    if _autograd_needed(a, b):
        extra = {k: v for k, v in kwargs.items() if v is not None and k not in ("alpha", "options", "stream")}
        if c is not None or extra:
            raise NotImplementedError(
                f"autograd through the distributed matmul covers alpha * a @ b only; got c={c is not None}, "
                f"{sorted(extra)}"
            )
        return DistributedMatmulFunction.apply(a, b, kwargs.get("alpha"), kwargs.get("options"))
    sa, sb = sharded(a, "a"), sharded(b, "b")
    shape = (sa.shape[0], sb.shape[1])
    if c is not None:
        sc = sharded(c, "c")
        if sc.spec[0] != "shard":
            raise ValueError(
                "c must be sharded (Shard(0) or Shard(1)); a replicated result is not a cuBLASMp layout"
            )
        out_dim = int(sc.spec[1])  # type: ignore[arg-type]
        out = local_matmul(sa, sb, out_dim, c=sc.local, **kwargs)
    else:
        out_dim = result_dim(sa, sb)
        out = local_matmul(sa, sb, out_dim, **kwargs)
    if isinstance(out, tuple):
        return _wrap(out[0], a, out_dim, shape), out[1]
    return _wrap(out, a, out_dim, shape)


def _function_base() -> type:
    import torch

    return torch.autograd.Function


class _Lazy(type):
    """Builds :class:`DistributedMatmulFunction` on first use, so importing this module needs no torch."""

    _cls: Any = None

    def __getattr__(cls, name: str) -> Any:
        if _Lazy._cls is None:
            _Lazy._cls = _make_function()
        return getattr(_Lazy._cls, name)


def _make_function() -> type:
    base = _function_base()

    class DistributedMatmulFunctionImpl(base):  # type: ignore[misc, valid-type]
        """``alpha * a @ b`` of DTensors; backward: two distributed GEMMs."""

        @staticmethod
        def forward(ctx: Any, a: Any, b: Any, alpha: Any, options: Any) -> Any:
            sa, sb = sharded(a, "a"), sharded(b, "b")
            out_dim = result_dim(sa, sb)
            ctx.save_for_backward(a, b)
            ctx.alpha, ctx.options, ctx.out_dim = alpha, options, out_dim
            out = local_matmul(sa, sb, out_dim, alpha=alpha, options=options)
            return _wrap(out, a, out_dim, (sa.shape[0], sb.shape[1]))

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            from torch.distributed.tensor import Shard

            a, b = ctx.saved_tensors
            if tuple(grad.placements) != (Shard(ctx.out_dim),):
                grad = grad.redistribute(grad.device_mesh, [Shard(ctx.out_dim)])
            sa, sb, sg = sharded(a, "a"), sharded(b, "b"), sharded(grad, "grad")
            sg = Sharded(sg.local.contiguous(), sg.spec, sg.shape)  # autograd may hand an expanded grad
            grads: list[Any] = [None, None, None, None]
            for i, (x, y, target) in enumerate(((sg, sb.t(), sa), (sa.t(), sg, sb))):
                if not ctx.needs_input_grad[i]:
                    continue
                replicated = target.spec[0] == "replicate"  # computed sharded, then all-gathered
                dim = i if replicated else int(target.spec[1])  # type: ignore[arg-type]
                local = local_matmul(x, y, dim, alpha=ctx.alpha, options=ctx.options)
                grads[i] = _wrap(local, a, dim, target.shape, replicated)
            return tuple(grads)

    DistributedMatmulFunctionImpl.__name__ = "DistributedMatmulFunction"
    return DistributedMatmulFunctionImpl


class DistributedMatmulFunction(metaclass=_Lazy):
    """The ``torch.autograd.Function`` of the distributed matmul (made on first use; call
    ``DistributedMatmulFunction.apply(a, b, alpha, options)``)."""
