"""Tests of benchmarks.merge: later rows win, order and provenance are kept, bad input is refused."""

from __future__ import annotations

import json

import pytest

from benchmarks import merge, report


def _row(case, lib, median):
    return {
        "suite": "s", "case": case, "lib": lib, "status": "ok", "mode": "device", "unit": "ms",
        "median": median, "spread": 0.0, "min": median, "n": 3, "samples": [median] * 3, "note": "",
        "flops": None, "bytes": None, "description": "", "tflops": None, "gbps": None,
    }  # fmt: skip


def _doc(rows, created, suite="s"):
    return report.make_document(suite, rows, gpu="G", libs=["nvmath", "torch"], settings={"x": 1}, created=created)


def test_later_rows_win_and_order_is_kept():
    """A second run's row replaces the first's for the same (case, lib); new cases are appended."""
    a = _doc([_row("c1", "nvmath", 2.0), _row("c1", "torch", 1.0), _row("c2", "nvmath", 5.0)], "t1")
    b = _doc([_row("c1", "nvmath", 1.5), _row("c3", "torch", 7.0)], "t2")
    m = merge.merge_documents([a, b])
    assert [(r["case"], r["lib"], r["median"]) for r in m["results"]] == [
        ("c1", "nvmath", 1.5), ("c1", "torch", 1.0), ("c2", "nvmath", 5.0), ("c3", "torch", 7.0),
    ]  # fmt: skip
    assert [s["created"] for s in m["settings"]["merged_from"]] == ["t1", "t2"] and m["created"] == "t2"


def test_refuses_mixed_suites_and_nothing():
    """Documents of two suites, or none, are refused with the reason."""
    with pytest.raises(ValueError, match="different suites"):
        merge.merge_documents([_doc([], "t1"), _doc([], "t2", suite="other")])
    with pytest.raises(ValueError, match="nothing"):
        merge.merge_documents([])


def test_cli_writes_named_outputs(tmp_path):
    """The CLI writes STEM.json and STEM.md that validate and render."""
    paths = []
    for i, created in enumerate(("t1", "t2")):
        path = tmp_path / f"{i}.json"
        path.write_text(json.dumps(_doc([_row("c1", "nvmath", 1.0 + i)], created)))
        paths.append(str(path))
    assert merge.main([*paths, "--out", str(tmp_path / "out"), "--name", "sweep", "--no-plots"]) == 0
    doc = json.loads((tmp_path / "out" / "sweep.json").read_text())
    report.validate_document(doc)
    assert doc["results"][0]["median"] == 2.0 and "c1" in (tmp_path / "out" / "sweep.md").read_text()
