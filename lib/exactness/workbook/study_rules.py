"""Each study's ranges and choices, declared by the study itself and checked before a run starts.

A parameter's name and type come from the notebook's parameters cell (`exactness.workbook.parameters`); its
sensible values are declared by the study, in `exactness.studies.<study>.rules` (a module that imports no torch,
so `exactness run` refuses a bad value in a fraction of a second, before any run folder exists). The workbook
finds that module by the notebook's name and reads its `STUDY` registration; it imports nothing else of a study.
A study without a rules module has no rules beyond its types.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from exactness.workbook.parameter_rules import AtLeast, Matches, Rule, StudyParameterError, problems

RULES_MODULE = "exactness.studies.{}.rules"


@dataclass(frozen=True)
class Registration:
    """What a study tells the workbook about itself."""

    rules: Mapping[str, Rule] = field(default_factory=dict)
    # environment variables its kernel starts with (set before torch allocates anything)
    kernel_environment: Mapping[str, str] = field(default_factory=dict)
    # runs before every other study of a batch (the environment study: every report links it)
    runs_first: bool = False
    # studies a batch runs after this one: its answers settle theirs, and a report shows only what ran before it
    runs_before: tuple[str, ...] = ()
    # problems that need several parameters at once (a class name and the checkout it must be in), one line each
    across: Callable[[Mapping[str, Any]], list[str]] | None = None


@functools.cache
def registration(study: str) -> Registration:
    name = RULES_MODULE.format(study)
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as missing:
        if missing.name not in (name, name.rsplit(".", 1)[0]):
            raise  # the rules module exists and fails to import something: that is its own error
        return Registration()
    return module.STUDY


# Rules several studies share.
CORES = os.cpu_count() or 1
SEED = AtLeast(0, maximum=2**63 - 1, whole=True, why_maximum="torch seeds are signed 64-bit integers")
COUNT = AtLeast(0, whole=True)
AT_LEAST_ONE = AtLeast(1, whole=True)
# A sweep keeps a row per seed and class in memory and runs for hours at a few thousand seeds per second: beyond
# this many seeds per class a run would not fit or not finish, and is refused before it starts.
MAX_SEEDS = 10_000_000
SEEDS = AtLeast(1, whole=True, maximum=MAX_SEEDS,
                why_maximum="a sweep holds a row per seed, about 2 GB and hours of screening at this many")
WORKERS = AtLeast(0, "0 means one worker per core", maximum=CORES, whole=True,
                  why_maximum=f"this machine has {CORES} cores; more workers only add memory")
TOLERANCE = AtLeast(0)
# tcp:// only: tls:// needs certificates this workbook does not pass to the client, and another scheme is no
# Dask transport a scheduler on another machine listens on
SCHEDULER = Matches(r"|tcp://[^\s:/]+:\d+", 'empty (local processes) or a Dask scheduler\'s address "tcp://host:port" '
                    '(tls:// is not supported: the workbook passes no certificates)')


def check(study: str, values: Mapping[str, Any], origin: Mapping[str, str] | None = None) -> None:
    """Raise one StudyParameterError listing every value outside its study's declared range or choices."""
    registered = registration(study)
    found = problems(registered.rules, values, origin) + _seed_range_problems(values)
    if not found and registered.across is not None:  # each parameter is sound on its own: now how they combine
        found = registered.across(values)
    if found:
        raise StudyParameterError(f"{study}: " + "; ".join(found))


def named_code(study: str, values: Mapping[str, Any]) -> dict[str, list[str]]:
    """The values that name code to execute (builders, checkouts), by parameter."""
    from exactness.workbook.parameter_rules import named_code as found

    return found(registration(study).rules, values)


def _seed_range_problems(values: Mapping[str, Any]) -> list[str]:
    """The last seed of a sweep must itself be a seed: torch takes signed 64-bit integers."""
    start, n = values.get("seed_start"), values.get("n_seeds")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, n)):
        return []  # a wrong type is the per-parameter rules' message
    last = start + n - 1
    if last > 2**63 - 1:
        return [f"seed_start + n_seeds - 1 = {last:,} is beyond the largest seed 2**63 - 1 "
                f"(at most {2**63 - start:,} seeds from seed_start {start:,})"]
    return []


def check_namespace(study: str, namespace: Mapping[str, Any]) -> None:
    """`check` for a notebook run by hand: the study's rules applied to the parameters found in `namespace`
    (the notebook's globals()), so Run All in JupyterLab refuses what `exactness run` refuses."""
    rules = registration(study).rules
    check(study, {name: namespace[name] for name in rules if name in namespace})


class EagerPairs:
    """A list of 'SIDE vs SIDE' (runtime:device:precision, `runtimes.sides`), two eager sides this machine runs: a
    CUDA side runs in the GPU command (python -m exactness.gpu), an ORT side is a study's main comparison."""

    def problem(self, value) -> str | None:
        from exactness.runtimes.sides import Device, Pair, Runtime, SideError

        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return ("must be a list of 'SIDE vs SIDE' texts, e.g. ['eager:cpu:fp32 vs eager:cpu:tf32-conv'], got "
                    f"{value!r}")
        found = []
        for text in value:
            try:
                pair = Pair.parse(text)
            except SideError as error:
                found.append(str(error))
                continue
            if Runtime.ORT in (pair.reference.runtime, pair.other.runtime):
                found.append(f"pair {text!r}: ONNX Runtime's pair is the study's main comparison; a pair compares two "
                             "eager sides")
            elif Device.CUDA in (pair.reference.device, pair.other.device):
                found.append(f"pair {text!r}: a CUDA side runs in the GPU command (python -m exactness.gpu), read "
                             "back with gpu_run; here, compare an emulated side (eager:cpu:tf32-conv)")
        if len(set(value)) < len(value):
            found.append("lists a pair more than once")
        return "; ".join(found) or None


@dataclass(frozen=True)
class GpuFolder:
    """"" or a folder written by `python -m exactness.gpu` (absolute, or relative to the project's root) holding
    `needed`: checked before a run, read as data (JSON, parquet, CSV), never executed."""

    needed: tuple[str, ...] = ()

    def problem(self, value) -> str | None:
        from pathlib import Path

        from exactness.runtimes.gpu_folder import GpuFolderError, machine_facts
        from exactness.workbook.project import find_root

        if value == "":
            return None
        if not isinstance(value, str) or len(value) > 4096:
            return "must be \"\" or the path of a folder written by python -m exactness.gpu"
        folder = Path(value) if Path(value).is_absolute() else find_root() / value
        try:
            machine_facts(folder, self.needed, value)
        except GpuFolderError as error:
            return str(error)
        return None
