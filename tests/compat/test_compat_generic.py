"""The generic ``nvmath.linalg.matmul`` / ``Matmul`` as nvmath-python 1.0 programs use it: ``c``
broadcast over the batch dimensions, on the CPU (numpy, torch) and the GPU (torch)."""

from __future__ import annotations

import numpy as np
import pytest

import nvmath.linalg


def _operands(rng, c_shape):
    a = rng.standard_normal((3, 2, 8, 4))
    b = rng.standard_normal((3, 2, 4, 5))
    c = rng.standard_normal(c_shape)
    return a, b, c


@pytest.mark.parametrize("c_shape", [(8, 5), (2, 8, 5), (3, 1, 8, 5)])
def test_c_broadcast_over_batch_numpy(rng, c_shape):
    """numpy operands (CPU execution): c of the matrix shape, or with broadcastable batch dims."""
    a, b, c = _operands(rng, c_shape)
    out = nvmath.linalg.matmul(a, b, c, alpha=2.0, beta=0.5)
    np.testing.assert_allclose(out, 2.0 * (a @ b) + 0.5 * c, rtol=1e-12, atol=1e-12)


def test_c_broadcast_over_batch_torch_cpu_stateful(rng):
    """torch-CPU operands through the stateful object; a new c of the same shape after reset."""
    torch = pytest.importorskip("torch")
    a, b, c = (torch.from_numpy(x) for x in _operands(rng, (8, 5)))
    with nvmath.linalg.Matmul(a, b, c, beta=1.0) as mm:
        mm.plan()
        torch.testing.assert_close(mm.execute(), a @ b + c)
        c2 = torch.from_numpy(rng.standard_normal((8, 5)))
        mm.reset_operands(c=c2)
        torch.testing.assert_close(mm.execute(), a @ b + c2)


@pytest.mark.gpu
@pytest.mark.parametrize("c_shape", [(8, 5), (1, 2, 8, 5)])
def test_c_broadcast_over_batch_torch_gpu(torch_cuda, rng, c_shape):
    """torch CUDA operands (cuBLAS): the broadcast c is added to every batch entry."""
    torch = torch_cuda
    a, b, c = (torch.from_numpy(x).cuda() for x in _operands(rng, c_shape))
    out = nvmath.linalg.matmul(a, b, c, beta=0.25)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, a @ b + 0.25 * c)
    an, bn, cn = a.cpu().numpy(), b.cpu().numpy(), c.cpu().numpy()
    host = nvmath.linalg.matmul(an, bn, cn, beta=0.25, execution="cuda")
    np.testing.assert_allclose(host, (a @ b + 0.25 * c).cpu().numpy(), rtol=1e-10, atol=1e-10)


def test_reset_operands_with_another_package_is_type_error(rng):
    """Resetting a numpy-planned Matmul with a torch tensor raises TypeError (nvmath-python's type)."""
    torch = pytest.importorskip("torch")
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    with nvmath.linalg.Matmul(a, b) as mm:
        mm.plan()
        with pytest.raises(TypeError):
            mm.reset_operands(a=torch.from_numpy(a))
        with pytest.raises(ValueError):
            mm.reset_operands(a=a.astype(np.float32))


def test_free_drops_the_operands(rng):
    """free() releases the references to the operands (they can be collected)."""
    import gc
    import weakref

    a, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    mm = nvmath.linalg.Matmul(a, b)
    mm.plan()
    mm.execute()
    ref = weakref.ref(a)
    mm.free()
    del a
    gc.collect()
    assert ref() is None


def test_qualifier_to_string():
    """Every matrix qualifier class has nvmath-python's ``to_string(record)`` classmethod."""
    from nvmath.linalg import (
        DiagonalMatrixQualifier,
        DiagType,
        FillMode,
        GeneralMatrixQualifier,
        HermitianMatrixQualifier,
        SymmetricMatrixQualifier,
        TriangularMatrixQualifier,
    )

    tr = TriangularMatrixQualifier.create(uplo=FillMode.UPPER, diag=DiagType.UNIT)
    assert TriangularMatrixQualifier.to_string(tr) == "(tr, conjugate=False, uplo=UPPER, diag=UNIT, incx=1)"
    for cls in (GeneralMatrixQualifier, SymmetricMatrixQualifier, HermitianMatrixQualifier,
                DiagonalMatrixQualifier):  # fmt: skip
        text = cls.to_string(cls.create(conjugate=True))
        assert text.startswith(f"({cls.create()['abbreviation']}, conjugate=True, uplo=")
