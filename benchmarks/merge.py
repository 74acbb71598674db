"""Merge result documents of one suite: ``python -m benchmarks.merge --out DIR [--name STEM] A.json B.json``.

Later documents override the rows of earlier ones for the same (case, library); rows keep the order
of their first appearance. The merged settings list every source (its creation time and settings),
so a table assembled from several runs says so. Writes ``STEM.json``, ``STEM.md`` and ``STEM.png``
(``STEM`` defaults to the suite name).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import report

__all__ = ["main", "merge_documents"]


def merge_documents(docs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One document from several of the same suite (later rows win; see the module docstring)."""
    if not docs:
        raise ValueError("nothing to merge")
    for doc in docs:
        report.validate_document(doc)
    suites = {doc["suite"] for doc in docs}
    if len(suites) != 1:
        raise ValueError(f"documents of different suites cannot be merged: {sorted(suites)}")
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    versions: dict[str, str] = {}
    libs: list[str] = []
    for doc in docs:
        for row in doc["results"]:
            rows[(row["case"], row["lib"])] = row  # insertion order: first appearance
        versions.update(doc["versions"])
        libs += [lib for lib in doc["libs"] if lib not in libs]
    merged = report.make_document(
        docs[0]["suite"],
        list(rows.values()),
        gpu=docs[-1]["machine"].get("gpu"),
        libs=libs,
        settings={"merged_from": [{"created": d["created"], "settings": d["settings"]} for d in docs]},
        versions=versions,
        created=docs[-1]["created"],
    )
    merged["machine"] = dict(docs[-1]["machine"])
    return merged


def main(argv: Sequence[str] | None = None) -> int:
    """Run the merge CLI; returns the exit status."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.merge", description=__doc__.splitlines()[0])
    p.add_argument("inputs", nargs="+", type=Path, help="result JSON files, oldest first")
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.add_argument("--name", default=None, help="file stem (default: the suite name)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plot")
    args = p.parse_args(argv)
    doc = merge_documents([json.loads(path.read_text()) for path in args.inputs])
    stem = args.name or doc["suite"]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(json.dumps(doc, indent=1) + "\n")
    ceiling = report.find_ceiling(doc, args.out)
    (args.out / f"{stem}.md").write_text(report.render_markdown(doc, ceiling_gbps=ceiling))
    if not args.no_plots:
        report.write_plot(doc, args.out / f"{stem}.png")
    print(f"wrote {args.out / stem}.{{json,md{'' if args.no_plots else ',png'}}}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
