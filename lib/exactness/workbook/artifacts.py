"""What a notebook writes: tables, figures and headline figures, into its run folder.

Under `exactness run` the run folder comes from EXACTNESS_RUN_DIR; in an interactive JupyterLab session
the files go to outputs/scratch/<study>/ so exploring never touches a finished run.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path
from typing import Any

from exactness.workbook.manifest import atomic_output, write_atomically
from exactness.workbook.project import Project

RUN_DIR_VARIABLE = "EXACTNESS_RUN_DIR"
KERNEL_LOG = "kernel.log"  # in the run folder: what the kernel and its workers write outside the notebook


class RunArtifacts:
    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)

    @classmethod
    def current(cls, study: str) -> RunArtifacts:
        """The run folder under `exactness run`; interactively, outputs/scratch/<study>/, emptied first so
        that a re-run in JupyterLab never leaves an earlier execution's tables or figures beside its own."""
        if os.environ.get(RUN_DIR_VARIABLE):
            return cls(os.environ[RUN_DIR_VARIABLE])
        scratch = Project.at().outputs / "scratch" / study
        if scratch.is_dir():
            shutil.rmtree(scratch)
        return cls(scratch)

    @property
    def outputs(self) -> Path:
        """The outputs root this run writes into (`--out`, or the project's outputs/): where its batch's other
        runs are. Run folders and scratch folders alike sit two levels below it."""
        return self.folder.resolve().parent.parent

    @property
    def interactive(self) -> bool:
        return RUN_DIR_VARIABLE not in os.environ

    def _path(self, kind: str, name: str, suffix: str) -> Path:
        path = self.folder / kind / f"{name}{suffix}"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def shards(self):
        """Where sweeps keep finished chunks so an interrupted run resumes (`exactness run --resume`); none
        in an interactive session, where a stale shard could silently stand in for changed code."""
        from exactness.workbook.shards import ShardStore

        return None if self.interactive else ShardStore(self.folder / "shards")

    # Each file is written whole under a temporary name and renamed (a full disk leaves no cut table that a
    # later reader would take for the run's result: the cell fails, naming the file).
    def table(self, name: str, frame) -> Path:
        path = self._path("tables", name, ".parquet")
        with atomic_output(path) as temporary:
            frame.to_parquet(temporary, index=False)
        with atomic_output(path.with_suffix(".csv")) as temporary:  # for readers without a parquet reader
            frame.to_csv(temporary, index=False)
        return path

    def figure(self, name: str, figure) -> Path:
        path = self._path("figures", name, ".png")
        with atomic_output(path) as temporary:
            figure.savefig(temporary, format="png", dpi=110, bbox_inches="tight")
        return path

    def script(self, name: str, code: str) -> Path:
        """A Python script of the run's own (a reproduction to report upstream) under scripts/, its name made safe
        for a file name (a builder's `module:function` included)."""
        path = self._path("scripts", re.sub(r"[^\w.-]", "_", name), ".py")
        write_atomically(path, code)
        return path

    def patch(self, name: str, text: str) -> Path:
        """A change the run recommends to someone else's file, as a unified diff under patches/ (data: applied
        by the reader, never by the workbook)."""
        path = self._path("patches", re.sub(r"[^\w.-]", "_", name), ".patch")
        write_atomically(path, text)
        return path

    def summary(self, **figures: Any) -> Path:
        """Add headline figures to summary.json (machine-readable; the index shows them)."""
        path = self.folder / "summary.json"
        self.folder.mkdir(parents=True, exist_ok=True)
        current = json.loads(path.read_text()) if path.exists() else {}
        current.update({name: _plain(value) for name, value in figures.items()})
        write_atomically(path, json.dumps(current, indent=2, sort_keys=True) + "\n")
        return path


def _plain(value: Any) -> Any:
    """numpy scalars and non-finite floats made JSON-safe, so the summary stays standard JSON."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value
