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


def test_missing_nvidia_library_is_unmet_with_the_loaders_reason(monkeypatch):
    """A need naming a distributed-extra library (``cufftMp``) that cannot be loaded is unmet, and
    the reason carries the loader's message (what was searched, the wheel to install)."""
    from nvmath._errors import LibraryNotFoundError
    from nvmath.bindings import _loader

    def missing(name):
        raise LibraryNotFoundError(f"lib{name} not found; pip install nvmath-kit[distributed]")

    monkeypatch.setattr(_loader, "library_info", missing)
    why = requirements.unmet(["numpy", "cufftMp"])
    assert why.startswith("needs cufftMp") and "nvmath-kit[distributed]" in why


def test_loadable_nvidia_library_is_met(monkeypatch):
    """A library need is met when the loader loads it (no import of a package by that name)."""
    from nvmath.bindings import _loader

    seen = []
    monkeypatch.setattr(_loader, "library_info", lambda name: seen.append(name) or {"name": name})
    assert requirements.unmet(["nccl", "cublasmp"]) is None
    assert seen == ["nccl", "cublasmp"]


def test_distributed_examples_name_the_libraries_they_load():
    """Each distributed example requires the libraries its engine loads, so that without the
    [distributed] wheels it skips itself (status 77) instead of failing half-way (as the three did
    on the H200 before)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "examples" / "distributed"
    wanted = {"example01_fft.py": ("nvshmem_host", "cufftMp"), "example02_matmul.py": ("nccl", "cublasmp"),
              "example03_dtensor_autograd.py": ("nccl", "cublasmp")}  # fmt: skip
    for name, libs in wanted.items():
        line = next(t for t in (root / name).read_text().splitlines() if t.startswith("require("))
        assert all(f'"{lib}"' in line for lib in libs), (name, line)
