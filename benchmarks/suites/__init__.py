"""Benchmark suites: each module registers its cases with :func:`benchmarks.registry.register`."""
