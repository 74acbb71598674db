"""FFT suite: every FFT row of TARGETS.md (stateless and ``FFT.execute``), a callback-fused filter, a sweep.

Each target case comes twice: ``<name>`` times the stateless call (``nvmath.fft.fft`` ...) and
``<name>-execute`` a planned ``FFT.execute()``; torch and cupy have one API and appear in both, so
each row compares against the best peer. The nvmath and nvmath-python setups are the same code: in
nvmath-python's own process ``import nvmath`` is nvmath-python (whose C2R needs ``reset_operand``
before every execution, which it gets).

``bytes`` is the one-pass traffic (input read + output written), so the report's GB/s is the
*effective* bandwidth; divide by the ``ceilings`` suite's device-to-device copy rate (about 4.3 TB/s
on an H200) for the fraction of the copy ceiling.

The sweep (1-D 2^4..2^24 and non-power-of-two sizes, 2-D, 3-D, batches; ``FFT.execute`` only) is
registered only with ``NVMATH_BENCH_FFT_SWEEP=1`` in the environment::

    NVMATH_BENCH_FFT_SWEEP=1 python -m benchmarks fft --cases 'sweep-*'
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

from benchmarks.registry import Case, Prepared, Skip, register
from benchmarks.suites._data import cupy_on_ctx_stream, cupy_random, rotate, torch_on_ctx_stream, torch_random

SWEEP_ENV = "NVMATH_BENCH_FFT_SWEEP"
_ITEMSIZE = {"float32": 4, "float64": 8, "complex64": 8, "complex128": 16}
_COMPLEX = {"float32": "complex64", "float64": "complex128"}
_REAL = {v: k for k, v in _COMPLEX.items()}


@dataclasses.dataclass(frozen=True)
class Spec:
    """One transform: the operand's shape and dtype, the axes and the kind (fft / rfft / irfft)."""

    shape: tuple[int, ...]
    dtype: str = "complex64"
    axes: tuple[int, ...] | None = None
    kind: str = "fft"

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(range(len(self.shape))) if self.axes is None else self.axes

    @property
    def out_shape(self) -> tuple[int, ...]:
        shape, last = list(self.shape), self.dims[-1]
        if self.kind == "rfft":
            shape[last] = shape[last] // 2 + 1
        elif self.kind == "irfft":
            shape[last] = 2 * (shape[last] - 1)
        return tuple(shape)

    @property
    def out_dtype(self) -> str:
        return {"fft": self.dtype, "rfft": _COMPLEX.get(self.dtype), "irfft": _REAL.get(self.dtype)}[
            self.kind
        ]

    @property
    def bytes(self) -> int:
        """One pass: read the input, write the output."""
        size_in = math.prod(self.shape) * _ITEMSIZE[self.dtype]
        return size_in + math.prod(self.out_shape) * _ITEMSIZE[self.out_dtype]

    @property
    def fft_type(self) -> str:
        return {"fft": "C2C", "rfft": "R2C", "irfft": "C2R"}[self.kind]


# --------------------------------------------------------------------------- inputs
def _torch_input(torch: Any, spec: Spec) -> Any:
    if spec.dtype.startswith("complex"):
        part = torch.float32 if spec.dtype == "complex64" else torch.float64
        return torch.complex(torch_random(torch, spec.shape, part), torch_random(torch, spec.shape, part))
    return torch_random(torch, spec.shape, getattr(torch, spec.dtype))


def _cupy_input(cupy: Any, spec: Spec) -> Any:
    if spec.dtype.startswith("complex"):
        part = "float32" if spec.dtype == "complex64" else "float64"
        x = cupy_random(cupy, spec.shape, part) + 1j * cupy_random(cupy, spec.shape, part)
        return x.astype(spec.dtype)
    return cupy_random(cupy, spec.shape, spec.dtype)


def _torch_sets(ctx: Any, spec: Spec) -> tuple[Any, list[Any]]:
    torch = torch_on_ctx_stream(ctx)
    return torch, [_torch_input(torch, spec) for _ in range(ctx.rotation(spec.bytes))]


# --------------------------------------------------------------------------- setups
def _torch(spec: Spec):
    def setup(ctx: Any):
        torch, sets = _torch_sets(ctx, spec)
        fn = {
            "fft": lambda x: torch.fft.fftn(x, dim=spec.dims),
            "rfft": lambda x: torch.fft.rfftn(x, dim=spec.dims),
            "irfft": lambda x: torch.fft.irfftn(x, dim=spec.dims, norm="forward"),
        }[spec.kind]
        return rotate([lambda x=x: fn(x) for x in sets])

    return setup


def _cupy(spec: Spec):
    def setup(ctx: Any):
        cupy = cupy_on_ctx_stream(ctx)
        sets = [_cupy_input(cupy, spec) for _ in range(ctx.rotation(spec.bytes))]
        fn = {
            "fft": lambda x: cupy.fft.fftn(x, axes=spec.dims),
            "rfft": lambda x: cupy.fft.rfftn(x, axes=spec.dims),
            "irfft": lambda x: cupy.fft.irfftn(x, axes=spec.dims, norm="forward"),
        }[spec.kind]
        return rotate([lambda x=x: fn(x) for x in sets])

    return setup


def _stateless(spec: Spec):
    """nvmath's (or, in its process, nvmath-python's) stateless call."""

    def setup(ctx: Any):
        import nvmath.fft as nf

        _, sets = _torch_sets(ctx, spec)
        fn = getattr(nf, spec.kind)
        axes = list(spec.dims)
        return rotate([lambda x=x: fn(x, axes=axes) for x in sets])

    return setup


def _execute(spec: Spec):
    """A planned ``FFT.execute()`` per input set (nvmath-python's C2R gets ``reset_operand`` first)."""

    def setup(ctx: Any):
        import nvmath.fft as nf

        _, sets = _torch_sets(ctx, spec)
        planners = []
        for x in sets:
            f = nf.FFT(x, axes=list(spec.dims), options={"fft_type": spec.fft_type})
            f.plan()
            planners.append((f, x))
        stale = spec.kind == "irfft" and not hasattr(
            nf, "plan_cache"
        )  # nvmath-python: C2R operand goes stale
        if stale:
            calls = [lambda f=f, x=x: (f.reset_operand(x), f.execute()) for f, x in planners]
        else:
            calls = [f.execute for f, _ in planners]

        def teardown():
            for f, _ in planners:
                f.free()

        return Prepared(fn=rotate(calls), teardown=teardown, note="reset_operand + execute" if stale else "")

    return setup


def _register_pair(name: str, spec: Spec, description: str, *, quick: bool = True) -> None:
    peers = {"torch": _torch(spec), "cupy": _cupy(spec)}
    for suffix, ours in (("", _stateless(spec)), ("-execute", _execute(spec))):
        register(
            Case(
                suite="fft",
                name=name + suffix,
                setups={"nvmath": ours, **peers, "nvmath-python": ours},
                bytes=spec.bytes,
                quick=quick,
                description=f"{description} ({'FFT.execute' if suffix else 'stateless'}); bytes = read + write",
            )
        )


# --------------------------------------------------------------------------- TARGETS.md rows
_TARGETS = [
    ("c2c-1d-batch4096x8192", Spec((4096, 8192), axes=(1,)), "1-D C2C, batch 4096 x 8192, complex64"),
    ("c2c-3d-256", Spec((256, 256, 256)), "3-D C2C 256^3, complex64"),
    (
        "r2c-2d-batch64x1024x1024",
        Spec((64, 1024, 1024), "float32", (1, 2), "rfft"),
        "2-D R2C, batch 64, float32",
    ),
    ("c2c-1d-2^24", Spec((1 << 24,)), "1-D C2C of 2^24 points, complex64"),
    ("c2c-2d-4096", Spec((4096, 4096)), "2-D C2C 4096^2, complex64"),
    ("c2c-1d-batch65536x256", Spec((65536, 256), axes=(1,)), "1-D C2C, batch 65536 x 256, complex64"),
    ("c2r-3d-512x512x257", Spec((512, 512, 257), kind="irfft"), "3-D C2R 512x512x257 -> 512^3, complex64"),
    (
        "z2z-1d-batch1024x16384",
        Spec((1024, 16384), "complex128", (1,)),
        "1-D C2C, batch 1024 x 16384, complex128",
    ),
    (
        "c2c-axis0-16384x1024",
        Spec((16384, 1024), axes=(0,)),
        "1-D C2C along axis 0 of (16384, 1024), complex64",
    ),
]
for _name, _spec, _text in _TARGETS:
    _register_pair(_name, _spec, _text)


def _host_pair() -> None:
    spec = Spec((1024,))
    peers = {"torch": _torch(spec), "cupy": _cupy(spec)}
    for suffix, ours in (("", _stateless(spec)), ("-execute", _execute(spec))):
        register(
            Case(
                suite="fft",
                name="c2c-1024-host" + suffix,
                mode="host",
                setups={"nvmath": ours, **peers, "nvmath-python": ours},
                description="host us per call of a 1024-point C2C "
                + ("(FFT.execute)" if suffix else "(stateless)"),
            )
        )


_host_pair()


# --------------------------------------------------------------------------- callback-fused filter
FILTER_SHAPE = (4096, 4096)


def _filter_weights(torch: Any, m: int) -> Any:
    return torch.exp(-((torch.arange(m, device="cuda", dtype=torch.float32) / 300.0) ** 2))


def _filter_torch(ctx: Any):
    torch = torch_on_ctx_stream(ctx)
    x = torch_random(torch, FILTER_SHAPE, torch.float32)
    w = _filter_weights(torch, FILTER_SHAPE[1] // 2 + 1)
    return lambda: torch.fft.irfft(torch.fft.rfft(x, dim=1) * w, n=FILTER_SHAPE[1], dim=1)


def _filter_fused(ctx: Any):
    import numpy as np

    import nvmath.fft as nf

    torch = torch_on_ctx_stream(ctx)
    n = FILTER_SHAPE[1]
    m = np.uint64(n // 2 + 1)

    def gaussian(data_out, offset, value, user_info, unused):
        data_out[offset] = value * user_info[offset % m]

    try:
        fwd = nf.compile_epilog(gaussian, "complex64", "float32")
    except RuntimeError as exc:
        raise Skip(f"cannot compile callbacks: {exc}") from exc
    x = torch_random(torch, FILTER_SHAPE, torch.float32)
    w = _filter_weights(torch, int(m)) / n  # the inverse's 1/N folded into the filter: one callback
    forward = nf.FFT(x, axes=[1])
    forward.plan(epilog=nf.DeviceCallable(fwd, data=w.data_ptr()))
    spectrum = forward.execute()
    try:  # the spectrum is a temporary: let the C2R overwrite it (no protective copy)
        inverse = nf.FFT(spectrum, axes=[1], options={"fft_type": "C2R", "overwrite_operand": True})
        note = "R2C + epilog (filter/N), C2R overwriting the spectrum"
    except TypeError:  # nvmath-python has no overwrite_operand
        inverse = nf.FFT(spectrum, axes=[1], options={"fft_type": "C2R"})
        note = "R2C + epilog (filter/N), plain C2R"
    inverse.plan()

    def call():
        inverse.reset_operand(forward.execute())
        return inverse.execute()

    def teardown():
        forward.free()
        inverse.free()

    return Prepared(fn=call, teardown=teardown, note=note)


register(
    Case(
        suite="fft",
        name="gaussian-filter-4096x4096",
        setups={"nvmath": _filter_fused, "torch": _filter_torch, "nvmath-python": _filter_fused},
        bytes=2 * (math.prod(FILTER_SHAPE) * 4 + FILTER_SHAPE[0] * (FILTER_SHAPE[1] // 2 + 1) * 8),
        description="Gaussian low-pass: R2C with the filter (and 1/N) in its epilog, then C2R (2 transforms) "
        "vs rfft * w -> irfft (3 kernels)",
    )
)


# --------------------------------------------------------------------------- sweep (opt-in)
def _sweep_specs() -> list[tuple[str, Spec]]:
    total = 1 << 24
    specs = [(f"sweep-1d-2^{k}", Spec((total >> k, 1 << k), axes=(1,))) for k in range(4, 25)]
    for n in (1000, 2187, 3125, 10007, 16807, 100000):
        specs.append((f"sweep-1d-n{n}", Spec((max(1, total // n), n), axes=(1,))))
    for n in (64, 256, 1024, 4096):
        specs.append((f"sweep-2d-{n}", Spec((max(1, total // (n * n)), n, n), axes=(1, 2))))
    for n in (32, 64, 128, 256):
        specs.append((f"sweep-3d-{n}", Spec((max(1, total // n**3), n, n, n), axes=(1, 2, 3))))
    for batch in (1, 16, 256):
        specs.append(
            (f"sweep-r2c-2d-1024-batch{batch}", Spec((batch, 1024, 1024), "float32", (1, 2), "rfft"))
        )
    return specs


if os.environ.get(SWEEP_ENV) == "1":
    for _name, _spec in _sweep_specs():
        register(
            Case(
                suite="fft",
                name=_name,
                setups={
                    "nvmath": _execute(_spec),
                    "torch": _torch(_spec),
                    "cupy": _cupy(_spec),
                    "nvmath-python": _execute(_spec),
                },
                bytes=_spec.bytes,
                quick=False,
                description=f"sweep: {_spec.kind} {_spec.dtype}{list(_spec.shape)} axes {list(_spec.dims)}",
            )
        )
