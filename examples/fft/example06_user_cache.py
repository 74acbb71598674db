"""Your own cache of planners, keyed by FFT.create_key (the nvmath-python pattern)."""

import numpy as np

import nvmath.fft

planners: dict = {}


def cached_fft(x: np.ndarray, axes=None) -> np.ndarray:
    key = nvmath.fft.FFT.create_key(x, axes=axes)
    planner = planners.get(key)
    if planner is None:
        planner = planners[key] = nvmath.fft.FFT(x, axes=axes)
        planner.plan()
    else:
        planner.reset_operand(x)
    try:
        return planner.execute()
    finally:
        planner.release_operand()


rng = np.random.default_rng(2)
for _ in range(3):
    a = rng.standard_normal((16, 64)) + 0j
    assert np.allclose(cached_fft(a, axes=[1]), np.fft.fft(a, axis=1))
print(len(planners), "planner(s)")
for planner in planners.values():
    planner.free()
