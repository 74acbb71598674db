"""Tests of nvmath._internal.execution: execution-space classes and their resolution."""

from __future__ import annotations

import dataclasses

import pytest

from nvmath._internal.execution import ExecutionCPU, ExecutionCUDA, resolve_execution


def test_defaults_and_names():
    """The classes have nvmath-python 1.0's defaults and ClassVar names."""
    assert ExecutionCUDA().device_id == 0
    assert ExecutionCPU().num_threads is None
    assert (ExecutionCUDA.name, ExecutionCPU.name) == ("cuda", "cpu")
    assert [f.name for f in dataclasses.fields(ExecutionCUDA)] == ["device_id"]
    assert [f.name for f in dataclasses.fields(ExecutionCPU)] == ["num_threads"]


def test_frozen_slots_kw_only():
    """Both classes are frozen, slotted and keyword-only."""
    e = ExecutionCUDA(device_id=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.device_id = 2  # type: ignore[misc]
    assert not hasattr(e, "__dict__")
    with pytest.raises(TypeError):
        ExecutionCUDA(1)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "exc"), [({"device_id": -1}, ValueError), ({"device_id": "0"}, TypeError)]
)
def test_cuda_validation(kwargs, exc):
    """ExecutionCUDA validates device_id in __post_init__."""
    with pytest.raises(exc, match="ExecutionCUDA.device_id"):
        ExecutionCUDA(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "exc"),
    [
        ({"num_threads": 0}, ValueError),
        ({"num_threads": 2.0}, TypeError),
        ({"num_threads": 2**64 + 1}, ValueError),  # the CPU libraries take a C int
        ({"num_threads": 2**31}, ValueError),
    ],
)
def test_cpu_validation(kwargs, exc):
    """ExecutionCPU validates num_threads in __post_init__."""
    with pytest.raises(exc, match="ExecutionCPU.num_threads"):
        ExecutionCPU(**kwargs)


def test_none_follows_operands():
    """None resolves to the operands' memory space."""
    assert resolve_execution(None, 3) == ExecutionCUDA(device_id=3)
    assert resolve_execution(None, "cpu") == ExecutionCPU()
    assert resolve_execution(None, None) == ExecutionCPU()


@pytest.mark.parametrize("name", ["cuda", "CUDA", "Cuda"])
def test_string_cuda_any_case(name):
    """'cuda' in any case resolves to ExecutionCUDA on the operands' device (0 for host operands)."""
    assert resolve_execution(name, 2) == ExecutionCUDA(device_id=2)
    assert resolve_execution(name, "cpu") == ExecutionCUDA(device_id=0)


def test_string_cpu():
    """'cpu' resolves to ExecutionCPU even for GPU operands."""
    assert resolve_execution("CPU", 0) == ExecutionCPU()


def test_dict_with_name():
    """A dict with 'name' builds the class with the other keys as fields."""
    assert resolve_execution({"name": "cuda", "device_id": 1}, "cpu") == ExecutionCUDA(device_id=1)
    assert resolve_execution({"name": "cpu", "num_threads": 4}, 0) == ExecutionCPU(num_threads=4)


def test_dict_without_name_is_the_operands_space():
    """A dict without 'name' (or with None) describes the operands' memory space, as in nvmath-python."""
    assert resolve_execution({"num_threads": 2}, None) == ExecutionCPU(num_threads=2)
    assert resolve_execution({}, "cpu") == ExecutionCPU()
    assert resolve_execution({"device_id": 0}, 0) == ExecutionCUDA(device_id=0)
    assert resolve_execution({"name": None}, 0) == ExecutionCUDA(device_id=0)


def test_dict_errors():
    """A dict with an unknown name or unknown fields (also for the operands' space) is rejected clearly."""
    with pytest.raises(TypeError, match="unknown field.*'device_id'"):
        resolve_execution({"device_id": 1}, None)  # host operands: ExecutionCPU has no device_id
    with pytest.raises(ValueError, match="execution name must be one of 'cuda', 'cpu'; got 'tpu'"):
        resolve_execution({"name": "tpu"}, None)
    with pytest.raises(TypeError, match="unknown field.*'threads'.*num_threads"):
        resolve_execution({"name": "cpu", "threads": 2}, None)


def test_instance_passthrough_and_gpu_override():
    """Instances pass through; for GPU operands the operands' device replaces device_id."""
    cpu = ExecutionCPU(num_threads=2)
    assert resolve_execution(cpu, 0) is cpu
    cuda = ExecutionCUDA(device_id=1)
    assert resolve_execution(cuda, "cpu") is cuda
    assert resolve_execution(cuda, 1) is cuda
    assert resolve_execution(cuda, 0) == ExecutionCUDA(device_id=0)


@pytest.mark.parametrize("bad", [1, 2.5, object(), ["cuda"]])
def test_wrong_kind(bad):
    """Other kinds of execution raise TypeError listing the accepted forms."""
    with pytest.raises(TypeError, match="execution must be ExecutionCUDA, ExecutionCPU, 'cuda', 'cpu'"):
        resolve_execution(bad, None)


def test_unknown_string():
    """An unknown string raises ValueError naming the allowed names."""
    with pytest.raises(ValueError, match="'cuda', 'cpu'"):
        resolve_execution("gpu", None)


@pytest.mark.parametrize("bad", [-1, "cuda:0", 1.0, True])
def test_bad_operand_device(bad):
    """operand_device must be a device id, 'cpu' or None."""
    with pytest.raises(ValueError, match="operand_device"):
        resolve_execution(None, bad)
