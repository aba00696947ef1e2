"""A folder written by the GPU command (`python -m exactness.gpu`), checked before any study reads it: the files
it needs are there and its machine.json is a small JSON object naming its torch. Data only, never executed."""

from __future__ import annotations

import json
from pathlib import Path

MAX_JSON = 1 << 20  # machine.json is a few KB; anything this large is not one


class GpuFolderError(ValueError):
    """The folder is not a GPU run: one line naming the file and what is wrong."""


def machine_facts(folder: Path, needed: tuple[str, ...], given: str) -> dict:
    """The folder's machine.json, after checking that `needed` files exist (`given`: the path as the user wrote it)."""
    if not folder.is_dir():
        raise GpuFolderError(f"names {given!r}, which is not a folder (write the folder python -m exactness.gpu --out "
                             "wrote, absolute or relative to the project)")
    missing = [name for name in ("machine.json", *needed) if not (folder / name).is_file()]
    if missing:
        raise GpuFolderError(f"names {given!r}, which lacks {', '.join(dict.fromkeys(missing))}: not a folder "
                             "written by python -m exactness.gpu")
    machine = folder / "machine.json"
    if machine.stat().st_size > MAX_JSON:
        raise GpuFolderError(f"{machine} is {machine.stat().st_size:,} bytes: not a GPU run's machine.json")
    try:
        facts = json.loads(machine.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise GpuFolderError(f"{machine} is not JSON ({type(error).__name__})") from None
    if not isinstance(facts, dict) or not isinstance(facts.get("torch"), str):
        raise GpuFolderError(f"{machine} does not describe a GPU run (no torch version)")
    return facts


