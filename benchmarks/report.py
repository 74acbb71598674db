"""Results: the JSON document, its schema check, the Markdown table and the plots."""

from __future__ import annotations

import datetime as _dt
import json
import math
import platform
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.registry import BASELINE_LIBRARIES, LIBRARIES, OURS

__all__ = [
    "CEILING_CASE",
    "SCHEMA",
    "PLOTS_HINT",
    "ONE_GPU",
    "copy_ceiling",
    "cpu_name",
    "efficiencies",
    "find_ceiling",
    "library_versions",
    "machine_label",
    "make_document",
    "plots_available",
    "ratios",
    "render_markdown",
    "results_dir",
    "slugify",
    "validate_document",
    "write_outputs",
    "write_plot",
]

SCHEMA = "nvmath-bench/1"
_RESULT_KEYS = {
    "suite": str,
    "case": str,
    "lib": str,
    "status": str,
    "mode": str,
    "unit": str,
    "n": int,
    "samples": list,
    "note": str,
}
_OPTIONAL_NUMBERS = ("median", "spread", "min", "flops", "bytes", "tflops", "gbps")


def slugify(name: str | None) -> str:
    """``"NVIDIA H200"`` -> ``"nvidia-h200"``; ``None`` -> ``"no-gpu"``."""
    slug = re.sub(r"[^a-z0-9]+", "-", (name or "no gpu").lower()).strip("-")
    return slug or "unknown"


def results_dir(base: Path, gpu_name: str | None, day: _dt.date | None = None) -> Path:
    """``base/<YYYY-MM-DD>-<gpu-slug>``."""
    day = day or _dt.date.today()
    return Path(base) / f"{day.isoformat()}-{slugify(gpu_name)}"


def library_versions(libs: Sequence[str]) -> dict[str, str]:
    """Versions of the libraries already imported in this process (never imports one)."""
    modules = {lib: lib for lib in ("nvmath", "torch", "cupy", "cuda.core", "numpy")}
    versions = {}
    for lib in libs:
        module = sys.modules.get(modules.get(lib, ""))
        version = getattr(module, "__version__", None) if module is not None else None
        if version:
            versions[lib] = str(version)
    return versions


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s first ``model name``; ``platform.processor()`` or the
    machine type elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name") and ":" in line:
                    return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def machine_label(machine: dict[str, Any]) -> str:
    """How titles name the machine: the GPU's name, or the CPU's model marked "(no GPU)"."""
    if machine.get("gpu"):
        return str(machine["gpu"])
    return f"{machine.get('cpu') or 'a CPU'} (no GPU)"


def make_document(
    suite: str,
    results: Sequence[dict[str, Any]],
    *,
    gpu: str | None,
    libs: Sequence[str],
    settings: dict[str, Any],
    versions: dict[str, str] | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    """The JSON document of one suite run."""
    return {
        "schema": SCHEMA,
        "suite": suite,
        "created": created or _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "machine": {
            "gpu": gpu, "cpu": cpu_name(), "python": platform.python_version(), "platform": platform.platform()
        },
        "versions": dict(versions or {}),
        "libs": list(libs),
        "settings": dict(settings),
        "results": [dict(r) for r in results],
    }


def validate_document(doc: Any) -> None:
    """Raise ``ValueError`` listing every way ``doc`` departs from the schema."""
    problems: list[str] = []
    if not isinstance(doc, dict):
        raise TypeError(f"a results document is a dict; got {type(doc).__name__}")
    if doc.get("schema") != SCHEMA:
        problems.append(f"schema must be {SCHEMA!r}; got {doc.get('schema')!r}")
    for key, kind in (
        ("suite", str),
        ("created", str),
        ("machine", dict),
        ("versions", dict),
        ("libs", list),
        ("settings", dict),
        ("results", list),
    ):
        if not isinstance(doc.get(key), kind):
            problems.append(f"{key} must be a {kind.__name__}")
    for i, r in enumerate(doc.get("results") or []):
        problems += [f"results[{i}]: {p}" for p in _result_problems(r)]
    if problems:
        raise ValueError("invalid results document: " + "; ".join(problems))


def _result_problems(r: Any) -> list[str]:
    if not isinstance(r, dict):
        return ["not a dict"]
    out = [f"{k} must be a {t.__name__}" for k, t in _RESULT_KEYS.items() if not isinstance(r.get(k), t)]
    for k in _OPTIONAL_NUMBERS:
        if r.get(k) is not None and not isinstance(r.get(k), (int, float)):
            out.append(f"{k} must be a number or null")
    if r.get("status") not in ("ok", "skipped", "error"):
        out.append(f"status must be ok/skipped/error; got {r.get('status')!r}")
    if r.get("lib") not in LIBRARIES:
        out.append(f"unknown lib {r.get('lib')!r}")
    if r.get("status") == "ok" and not isinstance(r.get("median"), (int, float)):
        out.append("an ok result needs a median")
    return out


CEILING_CASE = "copy-d2d-1024MiB"
"""The ceilings-suite case whose best GB/s is the device copy ceiling."""
CEILING_SETTING = "ceiling_gbps"
"""The settings key of a copy ceiling given on the command line (``--ceiling-gbps``)."""


def copy_ceiling(doc: dict[str, Any]) -> float | None:
    """The best GB/s of :data:`CEILING_CASE` among ``doc``'s ok results, or ``None``."""
    rates = [
        float(r["gbps"])
        for r in doc.get("results") or []
        if isinstance(r, dict)
        and r.get("case") == CEILING_CASE
        and r.get("status") == "ok"
        and isinstance(r.get("gbps"), (int, float))
        and r["gbps"] > 0
    ]
    return max(rates) if rates else None


def find_ceiling(doc: dict[str, Any], out_dir: Path | None = None) -> float | None:
    """The device copy ceiling (GB/s) for ``doc``'s GB/s cells, or ``None`` when unknown.

    In order: ``settings["ceiling_gbps"]`` (given on the command line); the document's own
    :data:`CEILING_CASE` rows (the ceilings suite); the best :data:`CEILING_CASE` GB/s of
    ``out_dir/ceilings.json`` (a ceilings run of the same machine and day). An unreadable or invalid
    ``ceilings.json`` counts as unknown.
    """
    given = (doc.get("settings") or {}).get(CEILING_SETTING)
    if isinstance(given, (int, float)) and not isinstance(given, bool) and given > 0:
        return float(given)
    own = copy_ceiling(doc)
    if own is not None or out_dir is None:
        return own
    path = Path(out_dir) / "ceilings.json"
    try:
        ceilings = json.loads(path.read_text())
        validate_document(ceilings)
    except (OSError, ValueError, TypeError):
        return None
    return copy_ceiling(ceilings)


def _ok_medians(results: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """case -> lib -> median time, for ok results."""
    table: dict[str, dict[str, float]] = {}
    for r in results:
        if r["status"] == "ok" and r.get("median"):
            table.setdefault(r["case"], {})[r["lib"]] = float(r["median"])
    return table


def ratios(times: dict[str, float]) -> tuple[dict[str, float], float | None]:
    """Per-library speed relative to the fastest (1.0 = fastest), and ours vs the best peer.

    ``ours vs best peer`` = best peer time / our time (>= 1: we are at least as fast); ``None``
    when we or every peer are missing; baselines (e.g. ``python``) are not peers. Times are
    "lower is better".
    """
    best = min(times.values())
    relative = {lib: best / t for lib, t in times.items()}
    peers = [t for lib, t in times.items() if lib != OURS and lib not in BASELINE_LIBRARIES]
    vs_peer = min(peers) / times[OURS] if OURS in times and peers else None
    return relative, vs_peer


def _cell(r: dict[str, Any] | None, rel: float | None, ceiling: float | None = None) -> str:
    if r is None:
        return "—"
    if r["status"] != "ok":
        return r["status"]
    text = f"{r['median']:.4g} ±{r['spread']:.2g}"
    if r.get("tflops"):
        text += f", {r['tflops']:.1f} TFLOP/s"
    elif r.get("gbps"):
        text += f", {r['gbps']:.0f} GB/s"
        if ceiling:
            text += f" ({100 * r['gbps'] / ceiling:.0f}% of copy)"
    if rel is not None:
        text += f" ({rel:.2f}x)"
    return f"**{text}**" if r["lib"] == OURS else text


def _table_libs(results: Sequence[dict[str, Any]]) -> list[str]:
    present = {r["lib"] for r in results}
    return [lib for lib in LIBRARIES if lib in present]


def render_markdown(doc: dict[str, Any], *, ceiling_gbps: float | None = None) -> str:
    """A Markdown report: one row per case, one column per library, our column in bold.

    GB/s cells also show the fraction of the device copy ceiling: ``ceiling_gbps``, or else the one
    :func:`find_ceiling` finds in the document itself.
    """
    results = doc["results"]
    ceiling = ceiling_gbps if ceiling_gbps else find_ceiling(doc)
    has_gbps = any(r.get("status") == "ok" and r.get("gbps") and not r.get("tflops") for r in results)
    ceiling = ceiling if has_gbps else None
    ceiling_note = (
        [
            "",
            f"x% of copy = GB/s as a fraction of the device copy ceiling ({ceiling:.0f} GB/s, best {CEILING_CASE}).",
        ]
        if ceiling
        else []
    )
    libs = _table_libs(results)
    medians = _ok_medians(results)
    by_key = {(r["case"], r["lib"]): r for r in results}
    gpu = machine_label(doc["machine"])
    lines = [
        f"# {doc['suite']}: {gpu}, {doc['created'][:10]}",
        "",
        (
            "Medians ± IQR; ms per call (CUDA events) or us per call (host loop, one sync). "
            "(N.NNx) = speed relative to the fastest library in the row; **nvmath** in bold; "
            "last column = best peer's time / nvmath's time (>= 1.00x: nvmath is at least as fast)."
        ),
        *ceiling_note,
        "",
        "| case | unit | " + " | ".join(libs) + " | nvmath vs best peer |",
        "|---|---|" + "---|" * len(libs) + "---|",
    ]
    ours: list[float] = []
    cases = list(dict.fromkeys(r["case"] for r in results))
    for case in cases:
        rel, vs = ratios(medians[case]) if case in medians else ({}, None)
        unit = next(r["unit"] for r in results if r["case"] == case)
        cells = [_cell(by_key.get((case, lib)), rel.get(lib), ceiling) for lib in libs]
        last = f"**{vs:.2f}x**" if vs else "—"
        lines.append(f"| {case} | {unit} | " + " | ".join(cells) + f" | {last} |")
        if vs:
            ours.append(vs)
    nranks = int((doc.get("settings") or {}).get("nranks") or 1)
    return "\n".join(lines + _markdown_footer(results, ours, nranks)) + "\n"


ONE_GPU = "nvmath-1gpu"
"""The baseline library whose time is the base of the efficiency lines (the distributed suite)."""


def efficiencies(medians: dict[str, dict[str, float]], nranks: int) -> dict[str, dict[str, float]]:
    """case -> lib -> parallel efficiency: :data:`ONE_GPU`'s time / (``nranks`` x the lib's time).

    Only cases with a one-GPU time; every other library of the case gets a value (1.0: a job of
    ``nranks`` GPUs is exactly ``nranks`` times as fast as one GPU; at ``nranks`` = 1 it is the cost
    of the distributed engine over the single-GPU library).
    """
    return {
        case: {lib: times[ONE_GPU] / (nranks * t) for lib, t in times.items() if lib != ONE_GPU}
        for case, times in medians.items()
        if ONE_GPU in times
    }


def _efficiency_lines(results: Sequence[dict[str, Any]], nranks: int) -> list[str]:
    table = efficiencies(_ok_medians(results), nranks)
    if not table:
        return []
    return [
        "",
        f"Efficiency against one GPU ({ONE_GPU}'s time / ({nranks} x the library's time); "
        f"{nranks} GPU(s) in this run{': not a scaling number' if nranks == 1 else ''}):",
        "",
        *(f"- {case}: " + ", ".join(f"{lib} {e:.2f}" for lib, e in libs.items())
          for case, libs in table.items()),
    ]


def _markdown_footer(results: Sequence[dict[str, Any]], ours: list[float], nranks: int = 1) -> list[str]:
    """The lines under the table: the geometric mean, the efficiency against one GPU (where the suite
    has a one-GPU baseline), the notes of measured rows, what was not measured."""
    lines: list[str] = []
    if ours:
        geomean = math.exp(sum(math.log(v) for v in ours) / len(ours))
        lines += ["", f"Geometric mean of nvmath vs best peer over {len(ours)} case(s): **{geomean:.2f}x**"]
    lines += _efficiency_lines(results, nranks)
    notes = [
        f"- {r['case']} [{r['lib']}]: {r['note']}" for r in results if r["status"] == "ok" and r.get("note")
    ]
    if notes:
        lines += ["", "Notes:", "", *notes]
    reasons: dict[str, list[str]] = {}
    for r in results:
        if r["status"] != "ok":
            reasons.setdefault(f"{r['status']}: {r['note']}", []).append(f"{r['case']} [{r['lib']}]")
    if reasons:
        lines += ["", "Not measured:", ""]
        lines += [f"- {reason} -- {', '.join(where)}" for reason, where in reasons.items()]
    return lines


def plots_available() -> bool:
    """True when matplotlib can be imported (the PNG plots need it)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


PLOTS_HINT = "plots skipped: matplotlib is not installed (pip install matplotlib, or pip install -e '.[bench]')"


def write_plot(doc: dict[str, Any], path: Path) -> Path | None:
    """A bar chart of relative speed per case and library; ``None`` when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    medians = _ok_medians(doc["results"])
    if not medians:
        return None
    measured = {lib for times in medians.values() for lib in times}
    libs = [lib for lib in LIBRARIES if lib in measured]
    cases = list(medians)
    width = 0.8 / len(libs)
    fig, ax = plt.subplots(figsize=(8, 1.5 + 0.25 * len(cases) * len(libs)))
    for i, lib in enumerate(libs):
        values = [ratios(medians[c])[0].get(lib, 0.0) for c in cases]
        ax.barh([j + i * width for j in range(len(cases))], values, height=width, label=lib)
    ax.set_yticks([j + width * (len(libs) - 1) / 2 for j in range(len(cases))], cases)
    ax.invert_yaxis()
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("speed relative to the fastest library (1.0 = fastest)")
    ax.set_title(f"{doc['suite']} on {machine_label(doc['machine'])}")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_outputs(doc: dict[str, Any], out_dir: Path, *, plots: bool = True) -> list[Path]:
    """Write ``<suite>.json``, ``<suite>.md`` and (if possible) ``<suite>.png`` into ``out_dir``.

    The Markdown's GB/s cells show the fraction of the copy ceiling when :func:`find_ceiling` knows
    one (from the settings, the document, or ``out_dir/ceilings.json``).
    """
    validate_document(doc)
    out_dir = Path(out_dir)
    ceiling = find_ceiling(doc, out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / f"{doc['suite']}.json"
    json_path.write_text(json.dumps(doc, indent=1) + "\n")
    md_path = out_dir / f"{doc['suite']}.md"
    md_path.write_text(render_markdown(doc, ceiling_gbps=ceiling))
    written = [json_path, md_path]
    if plots:
        png = write_plot(doc, out_dir / f"{doc['suite']}.png")
        if png is not None:
            written.append(png)
    return written
