"""nvmath.distributed.fft.allocate_operand against the fake runtime (host memory as the symmetric heap,
CPU torch tensors standing in for GPU ones): local shapes, padded real rows, one symmetric size on
every rank, collective checks; and the FFT's capacity check of buffers that are too small."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from dist_fakes import SingleRank, ThreadGroup
from mp_fakes import OWNERS, FakeDevice, host_view

import nvmath.distributed as nd
import nvmath.distributed.fft as dfft
from nvmath.distributed.distribution import Box, Slab
from nvmath.distributed.fft._layout import slab_capacity_bytes


def torch_view(address, shape, strides, dtype, device_id, owner, package):
    """Symmetric tensors come back as CPU torch tensors viewing the fake heap."""
    OWNERS.append(owner)
    return torch.from_numpy(host_view(address, shape, strides, dtype))


def mallocs(env):
    return [e[1] for e in env.nvshmem.log if e[0] == "malloc"]


def test_r2c_operand_is_padded_and_sized_for_the_spectrum(make_env):
    """A float32 X-slab operand of local shape (3, 4, 10) on rank 0 of 2 has rows padded to 12 and a
    buffer that holds any transform of the (6, 4, 10) problem on every rank."""
    env = make_env(ThreadGroup(2), views=torch_view)
    results = env.run(
        lambda r: dfft.allocate_operand((3, 4, 10), torch, input_dtype=torch.float32, distribution=Slab.X)
    )
    a = results[0]
    assert (tuple(a.shape), a.stride(), a.dtype) == ((3, 4, 10), (48, 12, 1), torch.float32)
    assert mallocs(env) == [slab_capacity_bytes((6, 4, 10), "float32", 0, 2)] * 2
    env.run(lambda r: nd.free_symmetric_memory(results[r]))
    assert [e[0] for e in env.nvshmem.log].count("free") == 2


def test_uneven_slabs_get_one_symmetric_size(make_env):
    """Ranks with different local extents (3, 2, 2 of 7) all allocate the largest size any needs."""
    env = make_env(ThreadGroup(3), views=torch_view)
    shapes = [(3, 5), (2, 5), (2, 5)]
    results = env.run(lambda r: dfft.allocate_operand(shapes[r], "torch", input_dtype=torch.complex64,
                                                      distribution=Slab.X))  # fmt: skip
    assert [tuple(a.shape) for a in results] == shapes
    assert mallocs(env) == [slab_capacity_bytes((7, 5), "complex64", 0, 3)] * 3
    env.run(lambda r: nd.free_symmetric_memory(results[r]))


def test_c2r_operand_fits_either_parity(make_env):
    """A C2R operand's buffer fits the real result of either last-axis parity."""
    env = make_env(SingleRank(), views=torch_view)
    a = dfft.allocate_operand(
        (4, 5), torch, input_dtype=torch.complex128, distribution=Slab.Y, fft_type="c2r"
    )
    odd = slab_capacity_bytes((4, 5), "complex128", 1, 1, fft_type="C2R", last_axis_parity="odd")
    assert mallocs(env) == [max(odd, slab_capacity_bytes((4, 5), "complex128", 1, 1, fft_type="C2R"))]
    assert a.is_contiguous()
    nd.free_symmetric_memory(a)


def test_extents_that_are_no_slab_split_raise_on_every_rank(make_env):
    """Local shapes that no slab split gives raise RankDisagreementError on every rank; nothing is
    allocated."""
    env = make_env(ThreadGroup(2), views=torch_view)
    results = env.run(lambda r: dfft.allocate_operand((1 + 2 * r, 4), torch, input_dtype=torch.complex64,
                                                      distribution=Slab.X))  # fmt: skip
    assert all(isinstance(e, nd.RankDisagreementError) for e in results) and not mallocs(env)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"memory_space": "cpu"}, ValueError, "GPU memory"),
        ({"shape": 8}, ValueError, "local shape"),
        ({"package": "numpy"}, ValueError, "cupy"),
        ({"input_dtype": torch.float16}, ValueError, "cuFFTMp transforms"),
        ({"fft_type": "C3C"}, ValueError, "fft_type"),
        ({"fft_type": "C2R"}, ValueError, "complex operand"),
        ({"distribution": Box((0, 0), (4, 4))}, TypeError, "pair"),
    ],
)
def test_bad_arguments(make_env, kwargs, error, match):
    """Bad arguments raise typed errors naming the value, before allocating."""
    env = make_env(SingleRank(), views=torch_view)
    args = {"shape": (4, 4), "package": torch, "input_dtype": torch.float32, "distribution": Slab.X, **kwargs}
    shape, package = args.pop("shape"), args.pop("package")
    with pytest.raises(error, match=match):
        dfft.allocate_operand(shape, package, **args)
    assert not mallocs(env)


def test_fft_refuses_a_symmetric_buffer_too_small(make_env):
    """An operand on a symmetric allocation smaller than the transform needs raises on every rank,
    saying to use allocate_operand (an R2C writes more bytes than its real operand holds)."""
    make_env(SingleRank())
    flat = nd.allocate_symmetric_memory((3 * 6 + 4,), "cupy", dtype="float32")  # fake view_at: numpy
    operand = FakeDevice(np.lib.stride_tricks.as_strided(flat, (4, 4), (24, 4)))
    with pytest.raises(ValueError, match="needs 96 on every rank.*allocate_operand"):
        dfft.FFT(operand, distribution=Slab.X)
    nd.free_symmetric_memory(FakeDevice(flat))
