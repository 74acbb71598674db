"""What a check or an example needs (:mod:`nvmath._diagnostics.requirements`)."""

from __future__ import annotations

import pytest

from nvmath._diagnostics import requirements
from nvmath._internal import devices


def test_missing_package_is_named_with_an_install_hint():
    """An uninstalled package is reported with a ``pip install`` line."""
    why = requirements.unmet(["surely_not_a_module_xyz"])
    assert "surely_not_a_module_xyz" in why and "pip install surely_not_a_module_xyz" in why


def test_known_optional_package_names_its_extra():
    """The hint for scipy names the distribution and the 'cpu' extra."""
    hint = requirements.install_hint("scipy")
    assert "pip install scipy" in hint and "'.[cpu]'" in hint


def test_installed_package_is_met():
    """numpy (a dependency) is always met; no needs at all are met."""
    assert requirements.unmet(["numpy"]) is None
    assert requirements.unmet([]) is None


@pytest.mark.parametrize("present", [False, True])
def test_gpu_need_follows_the_driver_probe(present, monkeypatch):
    """``gpu`` is unmet exactly when no GPU is usable, and the reason says so."""
    monkeypatch.setattr(devices, "gpu_available", lambda: present)
    why = requirements.unmet(["gpu"])
    assert (why is None) == present
    if not present:
        assert "GPU" in why


def test_torch_without_cuda_is_unmet_on_a_gpu_machine(torch, monkeypatch):
    """With a GPU present, a torch that cannot use CUDA is an unmet need with a reason."""
    monkeypatch.setattr(devices, "gpu_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "CUDA" in requirements.unmet(["gpu", "torch"])


def test_require_exits_77_with_a_message(monkeypatch, capsys):
    """require() exits with status 77 and prints what is missing."""
    monkeypatch.setattr(devices, "gpu_available", lambda: False)
    with pytest.raises(SystemExit) as info:
        requirements.require("gpu")
    assert info.value.code == requirements.SKIP_EXIT_CODE == 77
    assert capsys.readouterr().out.startswith("skipped: this example needs an NVIDIA GPU")


def test_require_returns_when_met():
    """require() returns quietly when every need is met."""
    assert requirements.require("numpy") is None
