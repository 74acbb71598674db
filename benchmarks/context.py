"""The run context handed to every setup: device, stream, L2 size, settings."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

__all__ = ["COOLDOWN_ENV", "Context", "Settings", "cooldown_from_env", "make_context", "rotation_count"]


@dataclass(frozen=True)
class Settings:
    """How hard to measure.

    Attributes:
        warmup: untimed calls before device timing.
        iterations: timed calls (device mode).
        host_calls: calls per loop (host mode).
        host_repeats: loops (host mode), one sample each.
        seed: random seed for inputs.
        quick: a fast, less precise run.
        budget_s: device time one library may spend on one case; a slow call (a solver that takes
            a second) gets fewer iterations, never fewer than ``min_iterations``.
        min_iterations: the floor for a budget-limited run.
        cooldown_s: idle seconds before each device measurement, so that every library starts a
            case from a similar clock and power state (``$NVMATH_BENCH_COOLDOWN``; default 0).
    """

    warmup: int = 5
    iterations: int = 30
    host_calls: int = 2000
    host_repeats: int = 7
    seed: int = 1234
    quick: bool = False
    budget_s: float = 3.0
    min_iterations: int = 3
    cooldown_s: float = 0.0

    @classmethod
    def for_run(cls, *, quick: bool, seed: int = 1234) -> Settings:
        """The default settings for a normal or a ``--quick`` run (cool-down from the environment)."""
        cooldown = cooldown_from_env()
        if quick:
            return cls(
                warmup=2, iterations=10, host_calls=300, host_repeats=3, seed=seed, quick=True, budget_s=1.0,
                cooldown_s=cooldown,
            )  # fmt: skip
        return cls(seed=seed, cooldown_s=cooldown)


COOLDOWN_ENV = "NVMATH_BENCH_COOLDOWN"


def cooldown_from_env() -> float:
    """``$NVMATH_BENCH_COOLDOWN`` as seconds (0 when unset); a bad value raises ``ValueError``."""
    text = os.environ.get(COOLDOWN_ENV, "").strip()
    if not text:
        return 0.0
    value = float(text)
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"${COOLDOWN_ENV} must be a finite number of seconds >= 0; got {text!r}")
    return value


def rotation_count(input_bytes: int, l2_bytes: int, *, max_sets: int = 64) -> int:
    """How many input sets to rotate among so that one round touches more than twice the L2 size.

    Args:
        input_bytes: bytes read and written by one call (all its inputs and outputs).
        l2_bytes: the L2 cache size (0 when unknown: no rotation).
        max_sets: an upper bound on the number of sets.
    """
    if input_bytes <= 0 or l2_bytes <= 0:
        return 1
    return max(1, min(max_sets, math.floor(2 * l2_bytes / input_bytes) + 1))


@dataclass
class Context:
    """What a setup may use.

    Attributes:
        settings: the measurement settings.
        device_id: the CUDA device (``None`` when no GPU is available).
        stream: the cuda.core ``Stream`` every library must run on (``None`` without a GPU).
        stream_handle: that stream's ``cudaStream_t`` as an int (0 without a GPU).
        l2_bytes: the device's L2 size in bytes (0 without a GPU).
        gpu_name: the device name, e.g. ``"NVIDIA H200"``.
        no_gpu_reason: why there is no GPU, when there is none.
        extras: scratch space for setups (e.g. per-library stream objects).
        mode: the mode of the case being set up (``"device"`` or ``"host"``; set by the runner).
    """

    settings: Settings
    device_id: int | None = None
    stream: Any = None
    stream_handle: int = 0
    l2_bytes: int = 0
    gpu_name: str | None = None
    no_gpu_reason: str = ""
    extras: dict[str, Any] = field(default_factory=dict)
    mode: str = "device"

    @property
    def has_gpu(self) -> bool:
        """Whether a CUDA device is available."""
        return self.stream is not None

    @property
    def quick(self) -> bool:
        """Whether this is a ``--quick`` run."""
        return self.settings.quick

    def rotation(self, input_bytes: int, *, max_sets: int = 64) -> int:
        """The number of input sets to rotate among (see :func:`rotation_count`).

        One for host-mode cases: they time the per-call host cost, and rotating many planners (each
        with its own library plan) would time cold CPU caches instead, not an L2 effect.
        """
        if self.mode == "host":
            return 1
        return rotation_count(input_bytes, self.l2_bytes, max_sets=max_sets)

    def close(self) -> None:
        """Give torch and cupy back the current streams they had, then destroy the run's stream.

        Setups make the run's stream current in torch / cupy (``torch_on_ctx_stream``); leaving a
        destroyed stream current there would crash the process's next torch / cupy call.
        """
        for restore in self.extras.pop("restore", []):
            try:
                restore()
            except Exception:  # noqa: BLE001 - best effort: the process may be exiting
                pass
        if self.stream is not None:
            self.stream.sync()
            self.stream.close()
            self.stream = None

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def sync(self) -> None:
        """Wait for the run's stream (no-op without a GPU)."""
        if self.stream is not None:
            self.stream.sync()


def make_context(settings: Settings, device_id: int = 0) -> Context:
    """A context on ``device_id`` with a fresh stream, or a GPU-less context saying why."""
    try:
        from cuda.core import Device

        device = Device(device_id)
        device.set_current()
        stream = device.create_stream()
        return Context(
            settings=settings,
            device_id=device_id,
            stream=stream,
            stream_handle=int(stream.handle),
            l2_bytes=int(device.properties.l2_cache_size),
            gpu_name=str(device.name),
        )
    except Exception as exc:  # noqa: BLE001 - no driver, no device, ...
        return Context(settings=settings, no_gpu_reason=f"no CUDA device: {type(exc).__name__}: {exc}")
