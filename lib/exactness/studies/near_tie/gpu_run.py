"""A folder written by the GPU command (`python -m exactness.gpu`), read back as data: JSON, parquet and CSV only.

The command runs where a GPU is (under that machine's own torch and transformers); its folder travels back and
a near_tie run shows it with `-p gpu_run FOLDER`, beside this run's emulation of the same pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from exactness.runtimes.gpu_folder import GpuFolderError, machine_facts
from exactness.studies.near_tie.rules import GPU_RUN_FILES as FILES  # noqa: E402


def resolve(path: str) -> Path:
    folder = Path(path)
    if folder.is_absolute():
        return folder
    from exactness.workbook.project import find_root

    return find_root() / folder


def check_folder(path: str) -> tuple[Path, dict]:
    """The folder and its machine facts, or `GpuFolderError` naming what is wrong."""
    folder = resolve(path)
    return folder, machine_facts(folder, FILES, path)


@dataclass(frozen=True)
class GpuRun:
    folder: Path
    facts: dict
    table: pd.DataFrame  # in the shape `precision.summarize` reads
    probe: pd.DataFrame


def read(path: str) -> GpuRun:
    from exactness.studies.near_tie import precision

    folder, facts = check_folder(path)
    try:
        table = precision.with_read_back(pd.read_parquet(folder / "pairs.parquet"),
                                         pd.read_parquet(folder / "noise_law.parquet"),
                                         pd.read_parquet(folder / "smallest_gaps.parquet"))
        probe = pd.read_csv(folder / "tf32_probe.csv")
    except (OSError, ValueError, KeyError) as error:
        raise GpuFolderError(f"{folder}: a table could not be read ({type(error).__name__}: {error})") from None
    missing = [c for c in precision.PAIR_COLUMNS if c not in table]
    if missing:
        raise GpuFolderError(f"{folder / 'pairs.parquet'} lacks the columns {', '.join(missing)}")
    return GpuRun(folder, facts, table, probe)
