"""Multi-GPU math (placeholder package).

The runtime (``initialize``, ``finalize``, ``get_context``, process groups) lives on another branch;
this file only makes :mod:`nvmath.distributed.distribution` importable until that lands.
"""
