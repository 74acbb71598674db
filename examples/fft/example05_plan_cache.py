"""The stateless functions keep planned transforms in a bounded, thread-safe LRU cache."""

import numpy as np

import nvmath.fft

cache = nvmath.fft.plan_cache
cache.clear()
x = np.ones((128, 128), dtype=np.complex64)
for _ in range(10):
    nvmath.fft.fft(x)  # one plan, nine hits
print(cache.stats)
assert cache.stats.size == 1

cache.resize(4)  # keep at most 4 plans (each holds its cuFFT workspace on the GPU)
cache.enabled = False  # plan and free on every call
nvmath.fft.fft(x)
assert cache.stats.size == 0
cache.enabled = True
cache.resize(32)  # the default size
