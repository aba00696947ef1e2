"""A folder written by the GPU command (`python -m exactness.gpu`), read back as data: JSON, parquet and CSV only.

The command runs where a GPU is (under that machine's own torch and transformers); its folder travels back and
a near_tie run shows it with `-p gpu_run FOLDER`, beside this run's emulation of the same pairs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

FILES = ("machine.json", "pairs.parquet", "noise_law.parquet", "smallest_gaps.parquet", "tf32_probe.csv")
MAX_JSON = 1 << 20  # machine.json is a few KB; anything this large is not one


class GpuRunError(ValueError):
    """The folder is not a GPU run: one line naming the file and what is wrong."""


def resolve(path: str) -> Path:
    folder = Path(path)
    if folder.is_absolute():
        return folder
    from exactness.workbook.project import find_root

    return find_root() / folder


def check_folder(path: str) -> Path:
    folder = resolve(path)
    if not folder.is_dir():
        raise GpuRunError(f"names {path!r}, which is not a folder (write the folder python -m exactness.gpu --out "
                          "wrote, absolute or relative to the project)")
    missing = [name for name in FILES if not (folder / name).is_file()]
    if missing:
        raise GpuRunError(f"names {path!r}, which lacks {', '.join(missing)}: not a folder written by "
                          "python -m exactness.gpu")
    machine = folder / "machine.json"
    if machine.stat().st_size > MAX_JSON:
        raise GpuRunError(f"{machine} is {machine.stat().st_size:,} bytes: not a GPU run's machine.json")
    try:
        facts = json.loads(machine.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise GpuRunError(f"{machine} is not JSON ({type(error).__name__})") from None
    if not isinstance(facts, dict) or not isinstance(facts.get("torch"), str):
        raise GpuRunError(f"{machine} does not describe a GPU run (no torch version)")
    return folder


@dataclass(frozen=True)
class GpuRun:
    folder: Path
    facts: dict
    table: pd.DataFrame  # in the shape `precision.summarize` reads
    probe: pd.DataFrame
    dac_chain: pd.DataFrame

    @property
    def machine(self) -> str:
        f = self.facts
        gpu = f.get("gpu") or "no GPU"
        return (f"{gpu} (torch {f.get('torch')}, transformers {f.get('transformers')}, CUDA {f.get('cuda')}, "
                f"cuDNN {f.get('cudnn')})")


def read(path: str) -> GpuRun:
    from exactness.studies.near_tie import precision

    folder = check_folder(path)
    facts = json.loads((folder / "machine.json").read_text(encoding="utf-8"))
    try:
        table = precision.with_read_back(pd.read_parquet(folder / "pairs.parquet"),
                                         pd.read_parquet(folder / "noise_law.parquet"),
                                         pd.read_parquet(folder / "smallest_gaps.parquet"))
        probe = pd.read_csv(folder / "tf32_probe.csv")
        dac = pd.read_csv(folder / "dac_chain.csv") if (folder / "dac_chain.csv").is_file() else pd.DataFrame()
    except (OSError, ValueError, KeyError) as error:
        raise GpuRunError(f"{folder}: a table could not be read ({type(error).__name__}: {error})") from None
    missing = [c for c in precision.PAIR_COLUMNS if c not in table]
    if missing:
        raise GpuRunError(f"{folder / 'pairs.parquet'} lacks the columns {', '.join(missing)}")
    return GpuRun(folder, facts, table, probe, dac)
