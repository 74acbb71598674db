"""Progress display: a rich progress bar when rich is installed, plain lines otherwise (on stderr)."""

from __future__ import annotations

import sys
from typing import Any, Self, TextIO

__all__ = ["Progress", "format_result"]


def format_result(result: Any) -> str:
    """One line for a finished (case, library) measurement."""
    head = f"{result.suite}/{result.case} [{result.lib}]"
    if result.status != "ok":
        return f"{head} {result.status}: {result.note}"
    text = f"{head} {result.median:.4g} {result.unit} (IQR {result.spread:.2g}, n={result.n})"
    if result.tflops:
        text += f", {result.tflops:.1f} TFLOP/s"
    if result.gbps:
        text += f", {result.gbps:.0f} GB/s"
    return text


class Progress:
    """Shows which (case, library) runs, and each result as it finishes.

    Args:
        total: the number of measurements.
        title: shown at the start.
        use_rich: ``None`` = rich if importable; ``False`` = plain lines.
        stream: where plain lines go (stderr by default).
    """

    def __init__(self, total: int, title: str, *, use_rich: bool | None = None, stream: TextIO | None = None):
        self.total, self.done, self.title = total, 0, title
        self.stream = stream if stream is not None else sys.stderr
        self._rich: Any = None
        self._task: Any = None
        if use_rich is not False:
            try:
                from rich.console import Console
                from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
                from rich.progress import Progress as RichProgress
            except ImportError:
                pass
            else:
                console = Console(file=self.stream)
                self._rich = RichProgress(
                    TextColumn("{task.description}"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TimeElapsedColumn(),
                    console=console,
                    transient=True,
                )

    def __enter__(self) -> Self:
        if self._rich is not None:
            self._rich.start()
            self._task = self._rich.add_task(self.title, total=self.total)
        else:
            print(f"{self.title}: {self.total} measurements", file=self.stream, flush=True)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._rich is not None:
            self._rich.stop()

    def start(self, label: str) -> None:
        """Announce the measurement about to run."""
        if self._rich is not None:
            self._rich.update(self._task, description=f"{self.title}: {label}")

    def finish(self, result: Any) -> None:
        """Report a finished measurement."""
        self.done += 1
        line = f"[{self.done}/{self.total}] {format_result(result)}"
        if self._rich is not None:
            self._rich.console.print(line, markup=False, highlight=False)
            self._rich.advance(self._task)
        else:
            print(line, file=self.stream, flush=True)
