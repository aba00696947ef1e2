"""What a run is doing, on the terminal, without streaming every cell's output (`--log-output` does that).

A study runs for minutes; a silent terminal looks hung. While papermill executes the notebook this prints
one line when a new section starts (the markdown heading above the cell, with its cell number) and passes
through the sweeps' progress lines (`exactness.workbook.sweep.Progress`, which the kernel already writes at most
every few seconds) and the lines naming a build that has not returned (`exactness.models.sources`). Everything
else a cell writes stays in the notebook.
"""

from __future__ import annotations

import re
import sys
from typing import TextIO

# exactness.workbook.sweep.Progress: "screen Wav2Vec2ForPreTraining: 250/2,000 seeds (23 seeds/s, 75 s left)"
_PROGRESS_LINE = re.compile(r"^\S.*: [\d,]+/[\d,]+ \w+ \((?:\d+ \w+/s|one every \d+ s|none done in \d+ s), "
                            r"\S+ s left.*\)$")
# exactness.models.sources, while a builder or tester has not returned for a while:
# "still building /abs/my_model.py:build for seed 7: 30 s so far (your builder has not returned)"
_SLOW_BUILD_LINE = re.compile(r"^still building .+ for seed -?\d+: \d+ s so far \(.+\)$")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")


def heading(markdown: str) -> str | None:
    """The last heading of a markdown cell, without its #s and emphasis; None when it has none."""
    found = [m.group(1) for line in markdown.splitlines() if (m := _HEADING.match(line.strip()))]
    return found[-1].replace("**", "").replace("`", "") if found else None


def sections(cells: list) -> dict[int, tuple[str, int]]:
    """code cell index -> (the heading it falls under, its number among the code cells), for the first code
    cell under each heading: the cells at which a new section starts."""
    starts, current, announced, number = {}, None, None, 0
    for index, cell in enumerate(cells):
        if cell.get("cell_type") == "markdown":
            current = heading("".join(cell.get("source", ""))) or current
        elif cell.get("cell_type") == "code":
            number += 1
            if current is not None and current != announced:
                starts[index], announced = (current, number), current
    return starts


class RunProgress:
    """Hooks for papermill's notebook client (`on_notebook_start`, `on_cell_start`) and a file for the
    cells' stderr (`stderr_file`) that print a run's sections and sweep progress, indented under the run."""

    def __init__(self, stream: TextIO | None = None, indent: str = "      "):
        self.stream, self.indent = stream or sys.stdout, indent
        self.starts: dict[int, tuple[str, int]] = {}
        self.code_cells = 0
        self._partial = ""

    def engine_arguments(self) -> dict:
        return {"on_notebook_start": self.on_notebook_start, "on_cell_start": self.on_cell_start,
                "stderr_file": self}

    def on_notebook_start(self, notebook, **_) -> None:
        self.starts = sections(notebook.cells)
        self.code_cells = sum(cell.cell_type == "code" for cell in notebook.cells)

    def on_cell_start(self, cell, cell_index: int, **_) -> None:
        if cell_index in self.starts:
            title, number = self.starts[cell_index]
            self._print(f"{title} (cell {number} of {self.code_cells})")

    def write(self, text: str) -> None:
        """The cells' stderr, in whatever pieces it arrives: only whole progress lines go through."""
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            if _PROGRESS_LINE.match(line.strip()) or _SLOW_BUILD_LINE.match(line.strip()):
                self._print("  " + line.strip())

    def flush(self) -> None:
        self.stream.flush()

    def _print(self, line: str) -> None:
        print(self.indent + line, file=self.stream, flush=True)
