"""Count the live objects of the CUDA math libraries: every successful ``*Create*`` call of the bindings
adds one, every successful matching ``*Destroy*`` removes one (a test helper, importable from any test).

The counting wraps the resolved C functions (``_p_<symbol>`` of each generated module), which every
Python caller reaches however it holds the binding (module attribute, class attribute, alias).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from nvmath._errors import FunctionNotFoundError


class HandleCounter:
    """Live library objects per C create function, for the duration of a test (undone by ``monkeypatch``).

    Args:
        monkeypatch: the test's fixture.
        modules: binding module names (default: cublasLt, cufft, cusolverDn, cublas).
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, modules: tuple[str, ...] = ()):
        import importlib

        self.live: Counter[str] = Counter()
        self.lock = threading.Lock()
        for name in modules or ("cublasLt", "cufft", "cusolverDn", "cublas"):
            module = importlib.import_module(f"nvmath.bindings.{name}")
            symbols = {k[3:] for k in vars(module) if k.startswith("_p_")}
            for create in sorted(s for s in symbols if "Create" in s):
                destroy = create.replace("Create", "Destroy")
                if destroy not in symbols:
                    continue
                try:  # the loaded library may be older than the headers: count what it has
                    pair = [(s, step, module._bind.resolve(s)) for s, step in ((create, +1), (destroy, -1))]
                except FunctionNotFoundError:
                    continue
                for symbol, step, real in pair:
                    monkeypatch.setattr(module, "_p_" + symbol, self._wrap(real, create, step))

    def _wrap(self, function: Callable, key: str, step: int) -> Callable:
        def counted(*args: Any) -> Any:
            status = function(*args)
            if not status:
                with self.lock:
                    self.live[key] += step
            return status

        return counted

    def snapshot(self) -> dict[str, int]:
        """The non-zero live counts, by C create function."""
        with self.lock:
            return {k: v for k, v in self.live.items() if v}
