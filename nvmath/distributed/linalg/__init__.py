"""Distributed linear algebra (cuBLASMp): see :mod:`nvmath.distributed.linalg.advanced`."""
