"""Run matmul (advanced, generic) and FFT problems once and save the results (torch.save) to argv[1].

Run as a subprocess by ``test_call_paths_gpu.py``, once with ``NVMATH_PURE_PYTHON=1`` and once on the
compiled path, so the two results can be compared bit for bit. Also saves the active path.
"""

from __future__ import annotations

import sys

import torch

import nvmath
from nvmath._internal import fastpath
from nvmath.linalg.advanced import MatmulEpilog


def _rand(shape, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(shape, device="cuda", generator=g, dtype=torch.float32).to(dtype)


def main(path: str) -> None:
    out: dict[str, object] = {"compiled": fastpath.available()}
    adv = nvmath.linalg.advanced
    for i, dtype in enumerate((torch.float32, torch.float16, torch.bfloat16, torch.float64)):
        a, b = _rand((64, 48), dtype, i), _rand((48, 32), dtype, 10 + i)
        out[f"advanced {dtype}"] = adv.matmul(a, b)
        with adv.Matmul(a, b, alpha=0.5) as mm:  # execute() through the planner's launch, twice
            mm.plan()
            out[f"advanced execute {dtype}"] = mm.execute()
            out[f"advanced execute again {dtype}"] = mm.execute()
    f32 = torch.float32
    a, b, bias = _rand((64, 48), f32, 1), _rand((48, 32), f32, 2), _rand((64,), f32, 3)
    out["advanced relu_bias"] = adv.matmul(
        a, b, epilog=MatmulEpilog.RELU_BIAS, epilog_inputs={"bias": bias}
    )
    la = nvmath.linalg
    out["generic gemm"] = la.matmul(a, b)
    out["generic gemm alpha beta"] = la.matmul(a, b, _rand((64, 32), torch.float32, 4), alpha=2.0, beta=0.5)
    out["generic batched"] = la.matmul(_rand((8, 64, 48), f32, 5), _rand((8, 48, 32), f32, 6))
    xs = [_rand((m, 7), torch.float32, 20 + m) for m in (5, 16, 2)]
    ys = [_rand((7, n), torch.float32, 30 + n) for n in (3, 1, 9)]
    out["generic grouped"] = la.matmul(xs, ys, alpha=[1.0, 2.0, -1.0])
    z = torch.complex(_rand((16, 256), torch.float32, 7), _rand((16, 256), torch.float32, 8))
    out["fft c2c"] = nvmath.fft.fft(z)
    out["fft c2c inverse"] = nvmath.fft.ifft(z)
    out["fft r2c"] = nvmath.fft.rfft(_rand((16, 256), torch.float32, 9))
    torch.cuda.synchronize()
    saved = {}
    for k, v in out.items():
        if isinstance(v, torch.Tensor):
            v = v.cpu()
        elif isinstance(v, list):
            v = [t.cpu() for t in v]
        saved[k] = v
    torch.save(saved, path)


if __name__ == "__main__":
    main(sys.argv[1])
