"""manifest.json: what ran, with which parameters, where, and how it ended."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
STATUSES = ("running", "passed", "failed", "interrupted")


@dataclass
class Manifest:
    study: str
    run_id: str
    param_set: str
    params: dict[str, Any]
    batch: str
    status: str = "running"
    started: str = ""
    duration_s: float | None = None
    failed_cell: int | None = None
    error: str | None = None
    environment_run: str | None = None  # run folder of the batch's environment study, relative to outputs/
    machine: dict[str, Any] = field(default_factory=dict)
    attempts: list[dict[str, Any]] = field(default_factory=list)  # earlier attempts of a resumed run
    pid: int | None = None  # the process running it (a killed run stays "running": resume checks this)

    def write(self, folder: Path) -> None:
        # Write then rename: a reader (the index) never sees half a manifest.
        temporary = folder / (MANIFEST + ".tmp")
        temporary.write_text(json.dumps(asdict(self), indent=2, default=str) + "\n")
        os.replace(temporary, folder / MANIFEST)

    @classmethod
    def read(cls, folder: Path) -> Manifest:
        data = json.loads((folder / MANIFEST).read_text())
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)
