"""Tests of benchmarks.report: JSON schema, ratios, the Markdown table and the output files."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from benchmarks.measure import Result
from benchmarks.report import (
    SCHEMA,
    copy_ceiling,
    find_ceiling,
    make_document,
    ratios,
    render_markdown,
    results_dir,
    slugify,
    validate_document,
    write_outputs,
)


def _r(case, lib, median, status="ok", **kw):
    r = Result(
        suite="s",
        case=case,
        lib=lib,
        status=status,
        mode=kw.pop("mode", "device"),
        unit=kw.pop("unit", "ms"),
        median=median,
        spread=0.01 if median else None,
        min=median,
        n=3 if median else 0,
        samples=[median] * 3 if median else [],
        **kw,
    )
    return r.to_dict()


def _doc(results):
    return make_document(
        "s",
        results,
        gpu="NVIDIA H200",
        libs=["nvmath", "torch"],
        settings={"iterations": 3},
        versions={"torch": "2.11"},
        created="2026-11-30T10:00:00+00:00",
    )


def test_slug_and_results_dir():
    """GPU names become slugs; results go to <date>-<slug>."""
    assert slugify("NVIDIA H200") == "nvidia-h200"
    assert slugify("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert slugify(None) == "no-gpu"
    assert results_dir(Path("r"), "NVIDIA H200", dt.date(2026, 11, 30)) == Path("r/2026-11-30-nvidia-h200")


def test_ratios():
    """Relative speeds put the fastest at 1.0; ours vs best peer is best peer time / our time."""
    rel, vs = ratios({"nvmath": 1.0, "torch": 1.25, "cupy": 2.0})
    assert rel == {"nvmath": 1.0, "torch": 0.8, "cupy": 0.5} and vs == 1.25
    rel, vs = ratios({"nvmath": 2.0, "torch": 1.0})
    assert rel["nvmath"] == 0.5 and vs == 0.5
    assert ratios({"torch": 1.0})[1] is None
    assert ratios({"nvmath": 0.2, "python": 0.1})[1] is None  # a baseline is not a peer


def test_document_validates_and_round_trips():
    """A built document passes the schema check and survives JSON."""
    doc = _doc(
        [
            _r("a", "nvmath", 1.0),
            _r("a", "torch", 2.0),
            _r("b", "cupy", None, status="skipped", note="no cupy"),
        ]
    )
    validate_document(doc)
    assert doc["schema"] == SCHEMA
    validate_document(json.loads(json.dumps(doc)))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(schema="other"), "schema must be"),
        (lambda d: d.pop("results"), "results must be a list"),
        (lambda d: d["results"][0].update(status="great"), "status must be ok/skipped/error"),
        (lambda d: d["results"][0].update(lib="tensorflow"), "unknown lib"),
        (lambda d: d["results"][0].update(median=None), "an ok result needs a median"),
        (lambda d: d["results"][0].update(median="1.0"), "median must be a number or null"),
        (lambda d: d["results"][0].pop("samples"), "samples must be a list"),
    ],
)
def test_schema_problems_are_reported(mutate, message):
    """validate_document names what is wrong."""
    doc = _doc([_r("a", "nvmath", 1.0)])
    mutate(doc)
    with pytest.raises(ValueError, match=message):
        validate_document(doc)


def test_markdown_table():
    """The table has one column per library, bold nvmath cells, ratios, a geomean and skip notes."""
    doc = _doc(
        [
            _r("gemm", "nvmath", 1.0, flops=2e12, tflops=2000.0),
            _r("gemm", "torch", 1.1, tflops=1818.0),
            _r("fft", "nvmath", 0.5),
            _r("fft", "torch", 0.4),
            _r("fft", "cupy", None, status="skipped", note="cupy missing"),
        ]
    )
    md = render_markdown(doc)
    lines = md.splitlines()
    assert lines[0] == "# s: NVIDIA H200, 2026-11-30"
    header = next(line for line in lines if line.startswith("| case"))
    assert header == "| case | unit | nvmath | torch | cupy | nvmath vs best peer |"
    gemm = next(line for line in lines if line.startswith("| gemm"))
    assert "**1 ±0.01, 2000.0 TFLOP/s (1.00x)**" in gemm
    assert "(0.91x)" in gemm and gemm.endswith("| **1.10x** |")
    fft = next(line for line in lines if line.startswith("| fft"))
    assert "(0.80x)" in fft and "| skipped |" in fft and fft.endswith("| **0.80x** |")
    assert "Geometric mean of nvmath vs best peer over 2 case(s): **0.94x**" in md
    assert "- skipped: cupy missing -- fft [cupy]" in md


def test_markdown_lists_the_notes_of_measured_rows():
    """Notes of measured rows (e.g. the algorithm a setup chose) follow the table, one line each."""
    doc = _doc([_r("gemm", "nvmath", 1.0, note="tile (64, 64), split-K 1"), _r("gemm", "torch", 1.1)])
    md = render_markdown(doc)
    assert "Notes:\n\n- gemm [nvmath]: tile (64, 64), split-K 1\n" in md
    assert "[torch]:" not in md


def test_markdown_without_nvmath_row():
    """Cases without an nvmath result show a dash in the last column."""
    md = render_markdown(_doc([_r("copy", "torch", 1.0), _r("copy", "cupy", 1.2)]))
    assert next(line for line in md.splitlines() if line.startswith("| copy")).endswith("| — |")


def test_write_outputs(tmp_path):
    """JSON and Markdown are always written; the PNG when matplotlib is present."""
    doc = _doc([_r("a", "nvmath", 1.0), _r("a", "torch", 2.0)])
    written = write_outputs(doc, tmp_path / "out")
    names = {p.name for p in written}
    assert {"s.json", "s.md"} <= names
    assert json.loads((tmp_path / "out" / "s.json").read_text())["suite"] == "s"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "s.png" not in names
    else:
        assert (tmp_path / "out" / "s.png").stat().st_size > 0
    assert "s.png" not in {p.name for p in write_outputs(doc, tmp_path / "np", plots=False)}


def test_plots_skipped_without_matplotlib(tmp_path, monkeypatch):
    """Without matplotlib the plot is skipped silently."""
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    written = write_outputs(_doc([_r("a", "nvmath", 1.0)]), tmp_path)
    assert {p.name for p in written} == {"s.json", "s.md"}


def test_invalid_document_is_not_written(tmp_path):
    """write_outputs refuses a document that fails the schema."""
    doc = _doc([_r("a", "nvmath", 1.0)])
    doc["results"][0]["status"] = "?"
    with pytest.raises(ValueError):
        write_outputs(doc, tmp_path)
    assert not list(tmp_path.iterdir())


def _fft_doc(settings=None):
    doc = _doc(
        [
            _r("fft-c2c", "nvmath", 1.0, bytes=2e9, gbps=2000.0),
            _r("fft-c2c", "torch", 1.25, bytes=2e9, gbps=1600.0),
            _r("fft-small", "nvmath", 0.1),
        ]
    )
    doc["settings"].update(settings or {})
    return doc


def _ceilings_doc(*rates):
    doc = make_document(
        "ceilings",
        [_r("copy-d2d-1024MiB", lib, 1.0, gbps=g) for lib, g in zip(("torch", "cupy"), rates, strict=False)]
        + [_r("copy-d2d-16MiB", "torch", 0.1, gbps=9999.0), _r("gemm-bf16-8192", "torch", 1.3, tflops=800.0)],
        gpu="NVIDIA H200",
        libs=["torch", "cupy"],
        settings={},
        created="2026-11-30T09:00:00+00:00",
    )
    return doc


def _line(md, case):
    return next(line for line in md.splitlines() if line.startswith(f"| {case} "))


def test_copy_ceiling_is_the_best_1024mib_copy():
    """The ceiling is the best copy-d2d-1024MiB GB/s (not the 16 MiB case, not failed rows)."""
    doc = _ceilings_doc(4229.0, 4187.0)
    assert copy_ceiling(doc) == 4229.0
    doc["results"][0]["status"] = "error"
    assert copy_ceiling(doc) == 4187.0
    assert copy_ceiling(_fft_doc()) is None


def test_gbps_cells_show_the_fraction_of_the_copy_ceiling_from_settings():
    """--ceiling-gbps (settings) adds "x% of copy" to GB/s cells only, with a note on the ceiling."""
    md = render_markdown(_fft_doc({"ceiling_gbps": 4000.0}))
    row = _line(md, "fft-c2c")
    assert "**1 ±0.01, 2000 GB/s (50% of copy) (1.00x)**" in row
    assert "1600 GB/s (40% of copy) (0.80x)" in row
    assert "% of copy" not in _line(md, "fft-small")
    assert "device copy ceiling (4000 GB/s, best copy-d2d-1024MiB)" in md
    assert (
        render_markdown(_fft_doc({"ceiling_gbps": 4000.0}), ceiling_gbps=2000.0).count("(100% of copy)") == 1
    )


def test_no_ceiling_no_fraction(tmp_path):
    """Without a known ceiling (or without GB/s rows) the table is unchanged."""
    assert "% of copy" not in render_markdown(_fft_doc())
    assert "copy ceiling" not in render_markdown(_doc([_r("a", "nvmath", 1.0)]), ceiling_gbps=4000.0)
    assert find_ceiling(_fft_doc(), tmp_path) is None
    (tmp_path / "ceilings.json").write_text("{not json")
    assert find_ceiling(_fft_doc(), tmp_path) is None
    (tmp_path / "ceilings.json").write_text(json.dumps({"schema": "other"}))
    assert find_ceiling(_fft_doc(), tmp_path) is None
    assert find_ceiling(_fft_doc({"ceiling_gbps": "fast"}), tmp_path) is None


def test_ceiling_read_from_ceilings_json_in_the_output_directory(tmp_path):
    """write_outputs finds ceilings.json next to the results; settings take precedence over it."""
    write_outputs(_ceilings_doc(4000.0, 3900.0), tmp_path, plots=False)
    ceilings_md = (tmp_path / "ceilings.md").read_text()
    assert "(100% of copy)" in _line(ceilings_md, "copy-d2d-1024MiB")  # its own ceiling
    assert find_ceiling(_fft_doc(), tmp_path) == 4000.0
    write_outputs(_fft_doc(), tmp_path, plots=False)
    md = (tmp_path / "s.md").read_text()
    assert "2000 GB/s (50% of copy)" in _line(md, "fft-c2c")
    assert find_ceiling(_fft_doc({"ceiling_gbps": 2000.0}), tmp_path) == 2000.0
    assert "% of copy" not in render_markdown(json.loads((tmp_path / "s.json").read_text()))  # JSON unchanged


def test_titles_name_the_machine():
    """Titles name the GPU, or the CPU's model marked "(no GPU)" on a machine without one."""
    from benchmarks.report import cpu_name, machine_label, make_document, render_markdown

    assert machine_label({"gpu": "NVIDIA H200", "cpu": "x"}) == "NVIDIA H200"
    assert machine_label({"gpu": None, "cpu": "Intel Xeon"}) == "Intel Xeon (no GPU)"
    assert cpu_name()
    doc = make_document("s", [], gpu=None, libs=["nvmath"], settings={})
    assert doc["machine"]["cpu"] == cpu_name()
    assert render_markdown(doc).startswith(f"# s: {cpu_name()} (no GPU), ")


def test_efficiency_lines_against_one_gpu():
    """With a one-GPU baseline row, the footer gives each library's efficiency: the baseline's time
    over (ranks x the library's time); at one rank it says that this is not a scaling number."""
    from benchmarks.report import efficiencies

    rows = [_r("fft", "nvmath", 2.0), _r("fft", "nvmath-python", 4.0), _r("fft", "nvmath-1gpu", 1.0),
            _r("gemm", "nvmath", 1.0)]  # fmt: skip
    medians = {"fft": {"nvmath": 2.0, "nvmath-python": 4.0, "nvmath-1gpu": 1.0}, "gemm": {"nvmath": 1.0}}
    assert efficiencies(medians, 1) == {"fft": {"nvmath": 0.5, "nvmath-python": 0.25}}
    assert efficiencies(medians, 4) == {"fft": {"nvmath": 0.125, "nvmath-python": 0.0625}}
    doc = _doc(rows)
    text = render_markdown(doc)
    assert "- fft: nvmath 0.50, nvmath-python 0.25" in text and "not a scaling number" in text
    assert "gemm:" not in text.split("Efficiency", 1)[1]
    assert "**2.00x**" in text  # nvmath vs best peer: nvmath-python (4.0) / 2.0; the baseline is no peer
    doc["settings"]["nranks"] = 2
    assert "- fft: nvmath 0.25, nvmath-python 0.12" in render_markdown(doc)


def test_no_efficiency_lines_without_a_baseline():
    """Suites without a one-GPU baseline get no efficiency lines."""
    assert "Efficiency" not in render_markdown(_doc([_r("c", "nvmath", 1.0), _r("c", "torch", 2.0)]))
