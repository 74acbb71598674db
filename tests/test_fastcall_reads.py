"""nvmath/_fastcall.d/reads.c: the hits' attribute reads through a ReadSlot give what Python's own
``getattr`` / method call gives, for every kind of attribute (getset, method and ``__slots__`` member
descriptors read directly; anything else the generic way), across type changes, with Python's errors;
and they leak nothing. (The probe ``_slot_read`` reads through one test slot, as the hits do.)"""

from __future__ import annotations

import gc
import sys

import pytest
from fastcall_probes import NOT_BUILT

fastcall = pytest.importorskip("nvmath._fastcall", reason=NOT_BUILT)
read = fastcall._slot_read

GENERIC, GETSET, METHOD, MEMBER = 0, 1, 2, 3


class Slotted:
    __slots__ = ("live", "unset")

    def __init__(self, live):
        self.live = live


class Plain:
    def __init__(self):
        self.size = 7

    @property
    def doubled(self):
        return 2 * self.size

    def locked(self):
        return "method"

    @property
    def broken(self):
        raise ValueError("a getter's own error")


def test_torch_tensor_reads_match_python():
    """shape, dtype, device and requires_grad (getset descriptors of torch's TensorBase), stride() and
    data_ptr() (method descriptors) equal Python's reads, directly through the descriptors."""
    torch = pytest.importorskip("torch")
    t = torch.zeros(3, 5)[:, 1:]
    for name, kind in (("shape", GETSET), ("dtype", GETSET), ("device", GETSET), ("requires_grad", GETSET)):
        assert read(t, name, False) == (getattr(t, name), kind)
    for name in ("stride", "data_ptr", "is_conj"):
        assert read(t, name, True) == (getattr(t, name)(), METHOD)


def test_slots_members_are_read_directly_and_an_unset_one_raises():
    """A ``__slots__`` member reads its value; an unset one raises Python's AttributeError."""
    assert read(Slotted(True), "live", False) == (True, MEMBER)
    assert read(Slotted(None), "live", False) == (None, MEMBER)
    with pytest.raises(AttributeError):
        read(Slotted(1), "unset", False)


def test_other_attributes_are_read_the_generic_way():
    """An instance attribute, a property, a plain Python method, a lock's method (C) and a missing name
    read as Python reads them (the generic path for all but the C method descriptor)."""
    import threading

    p = Plain()
    assert read(p, "size", False) == (7, GENERIC)
    assert read(p, "doubled", False) == (14, GENERIC)
    assert read(p, "locked", True) == ("method", GENERIC)
    lock = threading.Lock()
    assert read(lock, "locked", True) == (False, METHOD)
    with lock:
        assert read(lock, "locked", True) == (True, METHOD)
    with pytest.raises(AttributeError):
        read(p, "missing", False)
    with pytest.raises(ValueError, match="own error"):
        read(p, "broken", False)


def test_the_slot_follows_the_type_it_is_given():
    """One slot read alternately on objects of different types re-resolves each time: each read is the
    value (and kind) of its own object's type."""
    import threading

    lock, plain = threading.Lock(), Plain()
    for _ in range(3):
        assert read(lock, "locked", True) == (False, METHOD)
        assert read(plain, "locked", True) == ("method", GENERIC)


def test_reads_leak_no_references():
    """Many reads of every kind leave the objects' reference counts as they were."""
    torch = pytest.importorskip("torch")
    t, s = torch.zeros(4), Slotted(object())
    before = (sys.getrefcount(t), sys.getrefcount(s.live))
    for _ in range(1000):
        read(t, "shape", False)
        read(t, "data_ptr", True)
        read(s, "live", False)
    gc.collect()
    assert (sys.getrefcount(t), sys.getrefcount(s.live)) == before
