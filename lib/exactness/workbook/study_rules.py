"""Each study's ranges and choices, declared beside its parameters and checked before a run starts.

A parameter's name and type come from the notebook's parameters cell (`exactness.workbook.parameters`); its sensible
values are declared here, per study, with the rules of `exactness.workbook.parameter_rules`. This module imports no
torch, so `exactness run` refuses a bad value in a fraction of a second, before any run folder exists.
A study without an entry has no rules beyond its types.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from exactness.models import names, tiny_subjects
from exactness.workbook.machine import KERNEL_SETS
from exactness.workbook.parameter_rules import (
    AtLeast,
    EachOf,
    Matches,
    OneOf,
    Positive,
    Rule,
    RunFolder,
    StudyParameterError,
    Switch,
    problems,
)

CORES = os.cpu_count() or 1
SEED = AtLeast(0, maximum=2**63 - 1, whole=True, why_maximum="torch seeds are signed 64-bit integers")
COUNT = AtLeast(0, whole=True)
AT_LEAST_ONE = AtLeast(1, whole=True)
WORKERS = AtLeast(0, "0 means one worker per core", maximum=CORES, whole=True,
                  why_maximum=f"this machine has {CORES} cores; more workers only add memory")
TOLERANCE = AtLeast(0)
SCHEDULER = Matches(r"|[a-z]+://[^\s:/]+:\d+", 'empty (local processes) or a Dask address such as "tcp://host:8786"')
# The encoders' strides need at least one hop of audio (512 samples at 44.1 kHz): 0.05 s fills every variant's.
CLIP_SECONDS = AtLeast(0.05, "shorter clips do not fill the encoder's strides")
MAGNITUDE = AtLeast(2.2250738585072014e-308, "the smallest normal float64", maximum=1.7976931348623157e308,
                    why_maximum="the largest float64")

RULES: dict[str, dict[str, Rule]] = {
    "near_tie": {
        "models": EachOf(OneOf(names.WAV2VEC2_FAMILY, "model"), needs_one_of=names.QUANTIZER_CALLED,
                         why_needed="the others never call their quantizer in eval mode: no argmax to screen"),
        "seed_start": SEED, "n_seeds": AT_LEAST_ONE, "threshold": Positive(), "scheduler": SCHEDULER,
        "threshold_ulps": AtLeast(0, "0 chooses candidates by the absolute threshold"),
        "cpu_kernels": EachOf(OneOf(tuple(KERNEL_SETS), "kernel set")),
        "shape_modes": EachOf(OneOf(names.SHAPE_MODES, "shape mode")),
        "max_checks": AtLeast(0, "0 checks every candidate"), "replay_seeds": EachOf(SEED, allow_empty=True),
        "defect_seeds": COUNT, "what_if_checks": COUNT, "workers": WORKERS, "atol": TOLERANCE, "rtol": TOLERANCE,
        "fast_paths": Switch("every speed-up off: plain builds, a fresh export and session per seed, plain lookups"),
    },
    "ulp_noise": {
        "model": OneOf(names.NOISE_SUBJECTS, "model"), "seed_start": SEED, "n_draws": AT_LEAST_ONE,
        "shape_mode": OneOf(names.SHAPE_MODES, "shape mode"), "reference_draws": COUNT, "settings_draws": COUNT,
        "device": OneOf(("cpu", "cuda"), "device"), "workers": WORKERS,
        "near_tie_run": RunFolder(),
    },
    "dac_propagation": {
        "variant": OneOf(names.DAC_VARIANTS, "DAC variant"), "seconds": CLIP_SECONDS, "seed": SEED, "audio_seed": SEED,
        "inits": EachOf(OneOf(names.DAC_INITS, "init")),
        "other_variants": EachOf(OneOf(names.DAC_VARIANTS, "DAC variant"), allow_empty=True),
        "other_seconds": CLIP_SECONDS,
    },
    "dac_batching": {
        "variant": OneOf(names.DAC_VARIANTS, "DAC variant"),
        "clip_seconds": EachOf(CLIP_SECONDS, allow_repeats=True, min_items=2),
        "seed": SEED, "init": OneOf(names.DAC_INITS, "init"), "odd_lengths": EachOf(COUNT),
    },
    "environment": {"magnitudes": EachOf(MAGNITUDE)},
    "discrete_ops": {
        "models": EachOf(OneOf(tiny_subjects.NAMES, "model (registered in exactness.models.tiny_subjects)")),
        "seed_start": SEED, "n_seeds": AT_LEAST_ONE, "shape_modes": EachOf(OneOf(names.SHAPE_MODES, "shape mode")),
        "workers": WORKERS, "max_fresh_exports": AT_LEAST_ONE, "scheduler": SCHEDULER,
    },
}


def check(study: str, values: Mapping[str, Any], origin: Mapping[str, str] | None = None) -> None:
    """Raise one StudyParameterError listing every value outside its study's declared range or choices."""
    found = problems(RULES.get(study, {}), values, origin) + _seed_range_problems(values)
    if found:
        raise StudyParameterError(f"{study}: " + "; ".join(found))


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
    check(study, {name: namespace[name] for name in RULES.get(study, {}) if name in namespace})
