"""torch_bridge: the planners' cheap check for calls that belong to nvmath.torch."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from nvmath._internal import torch_bridge


def test_import_nvmath_does_not_import_torch():
    """``import nvmath`` (and the advanced matmul module with its hook) leaves torch unimported."""
    code = "import sys, nvmath, nvmath.linalg.advanced; assert sys.modules.get('torch') is None, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_non_torch_operands_never_route():
    """numpy operands, None and dicts of numpy arrays do not route, with or without torch loaded."""
    a = np.ones((2, 2))
    assert not torch_bridge.wants_torch(a, a, None, {"bias": a})


def test_torch_operands_route_only_for_grad(torch):
    """A torch tensor requiring grad routes (also inside epilog_inputs); no_grad or plain tensors do not."""
    t, g = torch.ones(2, 2), torch.ones(2, 2, requires_grad=True)
    assert not torch_bridge.wants_torch(t, t, None, None)
    assert torch_bridge.wants_torch(t, g)
    assert torch_bridge.wants_torch(t, t, None, {"bias": torch.ones(2, requires_grad=True)})
    with torch.no_grad():
        assert not torch_bridge.wants_torch(g, g)


def test_execute_wants_torch_reads_only_the_given_slots(torch):
    """``execute_wants_torch`` looks at the slots' caller tensors: one requiring grad (an operand or an
    epilog input) routes, plain tensors, released slots (``user=None``) and no_grad do not."""
    from types import SimpleNamespace

    from nvmath._internal.tensors import wrap

    def slot(t):
        return SimpleNamespace(user=None if t is None else wrap(t))

    plain, g = torch.ones(2, 2), torch.ones(2, 2, requires_grad=True)
    assert not torch_bridge.execute_wants_torch((slot(plain), slot(plain), slot(None)))
    assert torch_bridge.execute_wants_torch((slot(plain), slot(plain), slot(g)))
    with torch.no_grad():
        assert not torch_bridge.execute_wants_torch((slot(g),))


def test_route_runs_what_the_plugin_registered(monkeypatch):
    """route() calls the function nvmath.torch registered under the API name, with the call's arguments;
    the bridge imports no module of nvmath.torch itself (the plugin fills the registry)."""
    from nvmath._internal import torch_bridge

    monkeypatch.setattr(torch_bridge, "_ROUTES", {})
    torch_bridge.register({"generic.matmul": lambda *a, **k: ("ran", a, k)})
    assert torch_bridge.route("generic.matmul", 1, 2, stream=None) == ("ran", (1, 2), {"stream": None})
