"""The stateful API: plan once, execute many times, swap operands in place of re-planning.

Works for host (CPU) and device (GPU) operands alike; here numpy on the CPU.
"""

import numpy as np

import nvmath.fft

rng = np.random.default_rng(1)
batches = [rng.standard_normal((32, 1024)) + 0j for _ in range(4)]

with nvmath.fft.FFT(batches[0], axes=[1]) as fft:
    fft.plan()
    print("input layout", fft.get_input_layout(), "output layout", fft.get_output_layout())
    for batch in batches:
        fft.reset_operand(batch)  # same shape, strides and dtype: no new plan
        forward = fft.execute()  # FORWARD by default for C2C
        assert np.allclose(forward, np.fft.fft(batch, axis=1))
        inverse = fft.execute(direction=nvmath.fft.FFTDirection.INVERSE)
        assert np.allclose(inverse, 1024 * np.fft.ifft(batch, axis=1))
    fft.release_operand()  # drop the reference to the last batch
