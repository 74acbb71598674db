"""Misuse is reported before any GPU work, with the offending value and what is allowed (runs on a CPU)."""

import numpy as np

import nvmath.linalg.advanced as adv

a, b = np.ones((4, 3)), np.ones((3, 5))
for call in (
    lambda: adv.Matmul(a, np.ones((4, 5))),  # K does not match
    lambda: adv.Matmul(a, b, np.ones((4, 5))),  # c without beta
    lambda: adv.Matmul(a.astype(np.int32), b.astype(np.int32)),  # integer GEMMs are not supported
    lambda: adv.Matmul(a, b, options={"blocking": False}),
):
    try:
        call()
    except (TypeError, ValueError) as exc:
        print(f"{type(exc).__name__}: {exc}")
    else:
        raise AssertionError("accepted bad input")
