"""Library-vs-library benchmarks for nvmath (``python -m benchmarks --help``).

Suites register :class:`~benchmarks.registry.Case` objects; the CLI runs each case for several
libraries (nvmath, torch, cupy, cuda.core in this process; nvmath-python in its own process, since it
shares the import name ``nvmath``) and writes JSON, a Markdown table and plots under
``benchmarks/results/<date>-<gpu>/``. See ``benchmarks/README.md``.

Nothing here is imported by the library, and nothing here is collected by pytest.
"""
