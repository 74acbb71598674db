"""``nvmath._internal.compiled_hits.public_entry``: the public function of a stateless matmul asks the
compiled table first only for a call it may serve (no keyword argument, or only ``None`` ones the checked
function takes), and otherwise runs the checked function, which binds and rejects arguments as before;
it shows the checked function's signature; on the pure path it *is* the checked function. (No GPU and no
extension needed: the table is a recording stand-in.)"""

from __future__ import annotations

import inspect

import pytest

from nvmath._internal import compiled_hits


def _checked(a, b, /, c=None, *, alpha=None, stream=None):
    """The checked call (a stand-in): says it ran, with what."""
    return ("checked", a, b, c, alpha, stream)


class _Hits:
    """A ``StatelessHits`` as the entry reads it: a table that serves when ``serve`` is set, and the
    tracer flag."""

    def __init__(self, serve: bool = True, compiling: bool = False) -> None:
        self.calls: list[tuple] = []
        self.serve, self.compiling = serve, compiling
        self.table = self._table
        self.is_compiling = lambda: self.compiling

    def _table(self, *args):
        self.calls.append(args)
        return ("table",) + args if self.serve else None


@pytest.fixture
def enabled(monkeypatch):
    monkeypatch.setattr(compiled_hits, "ENABLED", True)


def test_a_plain_call_is_served_by_the_table(enabled):
    """Two operands (and ``c``) go to the table as ``(a, b, c, None)``; its result is the call's."""
    hits = _Hits()
    entry = compiled_hits.public_entry(_checked, hits)
    assert entry(1, 2) == ("table", 1, 2, None, None)
    assert entry(1, 2, 3) == ("table", 1, 2, 3, None)
    assert entry(1, 2, c=3) == ("table", 1, 2, 3, None)


def test_none_keywords_the_function_takes_are_served(enabled):
    """Keywords given as ``None`` (the defaults) still reach the table."""
    hits = _Hits()
    entry = compiled_hits.public_entry(_checked, hits)
    assert entry(1, 2, alpha=None, stream=None) == ("table", 1, 2, None, None)


@pytest.mark.parametrize("kwargs", [{"alpha": 2.0}, {"stream": 0}, {"alpha": None, "stream": 7}])
def test_a_keyword_with_a_value_runs_the_checked_function(enabled, kwargs):
    """Any keyword other than ``None`` skips the table: the checked function runs with it."""
    hits = _Hits()
    entry = compiled_hits.public_entry(_checked, hits)
    out = entry(1, 2, **kwargs)
    assert out[0] == "checked" and hits.calls == []
    assert (out[4], out[5]) == (kwargs.get("alpha"), kwargs.get("stream"))


def test_an_unknown_keyword_is_a_type_error_even_as_none(enabled):
    """A misspelled keyword is never served by the table, even as ``None``: the checked function
    raises Python's ``TypeError`` naming it, under the public name."""
    hits = _Hits()
    entry = compiled_hits.public_entry(_checked, hits)
    with pytest.raises(TypeError, match="unexpected keyword argument 'strem'"):
        entry(1, 2, strem=None)
    assert hits.calls == []
    with pytest.raises(TypeError, match="positional"):
        entry(1, 2, 3, 4)
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        entry(1)


def test_a_miss_traced_call_or_no_table_runs_the_checked_function(enabled):
    """The table's ``None`` (a miss), a call torch.compile traces and a table not made yet all run the
    checked function; a traced call never calls the table."""
    miss = _Hits(serve=False)
    assert compiled_hits.public_entry(_checked, miss)(1, 2)[0] == "checked" and len(miss.calls) == 1
    traced = _Hits(compiling=True)
    assert compiled_hits.public_entry(_checked, traced)(1, 2)[0] == "checked" and traced.calls == []
    none = _Hits()
    none.table = None
    assert compiled_hits.public_entry(_checked, none)(1, 2)[0] == "checked"


def test_the_entry_shows_the_checked_signature_and_doc(enabled):
    """``inspect.signature``, ``__name__`` and ``__doc__`` are the checked function's."""
    entry = compiled_hits.public_entry(_checked, _Hits())
    assert entry is not _checked
    assert inspect.signature(entry) == inspect.signature(_checked)
    assert entry.__name__ == "_checked" and entry.__doc__ == _checked.__doc__


def test_the_pure_path_exports_the_checked_function(monkeypatch):
    """Without the compiled path there is no table: the public function is the checked one itself."""
    monkeypatch.setattr(compiled_hits, "ENABLED", False)
    assert compiled_hits.public_entry(_checked, _Hits()) is _checked


def test_the_public_matmuls_show_their_full_signatures():
    """``nvmath.linalg.advanced.matmul`` and ``nvmath.linalg.matmul`` list every keyword-only argument
    (whichever path is active), as nvmath-python's do."""
    import nvmath

    adv = inspect.signature(nvmath.linalg.advanced.matmul).parameters
    gen = inspect.signature(nvmath.linalg.matmul).parameters
    assert list(adv)[:3] == ["a", "b", "c"] and {"epilog", "quantization_scales", "stream"} <= set(adv)
    assert all(adv[n].kind is inspect.Parameter.KEYWORD_ONLY for n in list(adv)[3:])
    assert list(gen)[:3] == ["a", "b", "c"] and {"qualifiers", "execution", "stream"} <= set(gen)
    assert nvmath.linalg.matmul.__name__ == nvmath.linalg.advanced.matmul.__name__ == "matmul"
