"""docs/distributed_distributions.rst tells the truth: its pictures and commented results come from the library."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

import nvmath.distributed.distribution as dist
from nvmath.distributed.distribution import BlockCyclic, BlockNonCyclic, Box, ProcessGrid, Slab
from nvmath.distributed.distribution._ownership import ownership_map

PAGE = Path(__file__).resolve().parents[3] / "docs" / "distributed_distributions.rst"
ROW, COL = ProcessGrid.Layout.ROW_MAJOR, ProcessGrid.Layout.COL_MAJOR


def picture(layout, shape: tuple[int, int], nranks: int) -> list[str]:
    """The page's picture style: one digit per element, the rank that owns it."""
    owner = np.full(shape, -1)
    for rank, ownership in enumerate(ownership_map(layout, shape, nranks)):
        rows, cols = ([i for a, b in intervals for i in range(a, b)] for intervals in ownership)
        owner[np.ix_(rows, cols)] = rank
    return [" ".join(str(v) for v in row) for row in owner]


def shown(rows: list[str], lines: list[str]) -> bool:
    """The rows appear on consecutive lines of the page (beside other text)."""
    return any(
        all(start + i < len(lines) and rows[i] in lines[start + i] for i in range(len(rows)))
        for start in range(len(lines))
    )


def test_pictures_match_the_ownership_maps(runtime):
    """Slab X/Y, the Box tiling, block-cyclic and block-non-cyclic pictures are what the library computes."""
    lines = PAGE.read_text().splitlines()
    runtime(3)
    assert shown(picture(Slab.X, (7, 5), 3), lines) and shown(picture(Slab.Y, (7, 5), 3), lines)
    runtime(4)
    boxes = [Box((0, 0), (3, 3)), Box((0, 3), (3, 5)), Box((3, 0), (7, 2)), Box((3, 2), (7, 5))]
    assert shown(picture(boxes, (7, 5), 4), lines)
    grid = ProcessGrid(shape=(2, 2), layout=ROW)
    assert shown(picture(BlockCyclic(grid, (2, 2)), (7, 7), 4), lines)
    assert shown(picture(BlockNonCyclic(grid), (7, 7), 4), lines)
    for layout in (ROW, COL):
        g = ProcessGrid(shape=(2, 2), layout=layout)
        rows = [f"| {g.rank((i, 0))} | {g.rank((i, 1))} |" for i in range(2)]
        assert shown([rows[0], "+---+---+", rows[1]], lines), layout


def _python_blocks(text: str) -> list[str]:
    pattern = re.compile(r"^\.\. code-block:: python\n\n((?:(?: {4}[^\n]*)?\n)+)", re.MULTILINE)
    return [re.sub(r"^ {4}", "", m.group(1), flags=re.MULTILINE) for m in pattern.finditer(text)]


def test_the_page_has_two_examples():
    """The example test below covers every Python block of the page."""
    assert len(_python_blocks(PAGE.read_text())) == 2


@pytest.mark.parametrize("index", range(2))
def test_code_examples_give_the_commented_results(runtime, index):
    """Each example runs under the stated process count; every ``expr  # literal`` evaluates to that literal."""
    block = _python_blocks(PAGE.read_text())[index]
    namespace: dict = {"__name__": "docs", **{name: getattr(dist, name) for name in dist.__all__}}
    for line in block.splitlines():
        processes = re.match(r"# with (\d+) processes", line.strip())
        if processes:
            runtime(int(processes.group(1)))
            continue
        code, _, comment = line.partition("#")
        head = comment.strip().split(":")[0]
        try:
            expected = ast.literal_eval(head)
        except (ValueError, SyntaxError):
            exec(line, namespace)  # noqa: S102 - the page's own example lines
            continue
        assert eval(code, namespace) == expected, line
