"""Slab FFT traits against numpy: the slab split (numpy.array_split), the result shapes of
numpy.fft.rfftn / irfftn, the complementary slab without redistribution, and cuFFTMp's limits."""

from __future__ import annotations

import numpy as np
import pytest

from nvmath.distributed.fft._traits import slab_extent, slab_fft_traits, slab_shape


@pytest.mark.parametrize("nranks", range(1, 9))
@pytest.mark.parametrize("n", [8, 9, 13, 64])
def test_slab_extents_match_array_split(n, nranks):
    """Rank r's extent is numpy.array_split's r-th piece (the first n % P ranks get one more)."""
    assert [slab_extent(n, r, nranks) for r in range(nranks)] == [
        len(p) for p in np.array_split(np.arange(n), nranks)
    ]


@pytest.mark.parametrize("shape", [(8, 9, 10), (9, 8), (16, 12, 7)])
@pytest.mark.parametrize("partition", [0, 1])
def test_slab_shapes_tile_the_global_shape(shape, partition):
    """The local slabs of all ranks concatenate to the global array along the slab axis."""
    nranks = 3
    parts = [np.empty(slab_shape(shape, partition, r, nranks)) for r in range(nranks)]
    assert np.concatenate(parts, axis=partition).shape == shape


@pytest.mark.parametrize("shape", [(8, 6, 5), (8, 6, 6), (7, 9)])
def test_r2c_and_c2r_result_shapes_match_numpy(shape):
    """R2C and C2R global result shapes equal numpy.fft.rfftn / irfftn's (both parities)."""
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    r2c = slab_fft_traits(shape, "float32", 0, 0, 2)
    assert (r2c.fft_type, r2c.result_dtype) == ("R2C", "complex64")
    assert r2c.global_result_shape == np.fft.rfftn(x).shape
    spectrum = np.fft.rfftn(x)
    for parity, last in (("even", 2 * (spectrum.shape[-1] - 1)), ("odd", 2 * spectrum.shape[-1] - 1)):
        c2r = slab_fft_traits(spectrum.shape, "complex64", 1, 0, 2, fft_type="C2R", last_axis_parity=parity)
        expected = np.fft.irfftn(spectrum, s=(*shape[:-1], last), axes=range(len(shape)))
        assert c2r.global_result_shape == expected.shape
        assert c2r.result_dtype == "float32"


def test_redistribute_false_returns_the_complementary_slab():
    """Without redistribution an X-slab operand gives a Y-slab result (cuFFTMp's shuffled layout)."""
    t = slab_fft_traits((10, 12, 4), "complex128", 0, 1, 4, redistribute=False)
    assert (t.partition, t.result_partition) == (0, 1)
    assert (t.operand_subformat, t.result_subformat) == ("INPLACE", "INPLACE_SHUFFLED")
    assert (t.local_shape, t.local_result_shape) == ((3, 12, 4), (10, 3, 4))
    same = slab_fft_traits((10, 12, 4), "complex128", 1, 3, 4)
    assert (same.result_partition, same.local_result_shape) == (1, (10, 3, 4))


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (((8,), "complex64", 0, 0, 2), {}, "2-D or 3-D"),
        (((4, 4, 4, 4), "complex64", 0, 0, 2), {}, "2-D or 3-D"),
        (((8, 0, 4), "complex64", 0, 0, 2), {}, ">= 1"),
        (((8, 8, 8), "complex64", 2, 0, 2), {}, "Slab.X"),
        (((8, 3, 8), "complex64", 0, 0, 4), {}, "first two extents"),
        (((8, 8), "float32", 1, 0, 2), {}, "2-D R2C needs a Slab.X"),
        (((8, 8), "complex64", 0, 0, 2), {"fft_type": "C2R"}, "2-D C2R needs a Slab.Y"),
        (((8, 8), "int32", 0, 0, 2), {}, "cuFFTMp transforms float32"),
        (((8, 8), "float16", 0, 0, 2), {}, "no half precision"),
        (((8, 8), "float32", 0, 0, 2), {"fft_type": "C2C"}, "needs a complex operand"),
    ],
)
def test_cufftmp_limits_are_value_errors(args, kwargs, match):
    """Shapes, slabs and dtypes cuFFTMp cannot transform raise ValueError saying why."""
    with pytest.raises(ValueError, match=match):
        slab_fft_traits(*args, **kwargs)
