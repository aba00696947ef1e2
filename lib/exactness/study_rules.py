"""Each study's ranges and choices, declared beside its parameters and checked before a run starts.

A parameter's name and type come from the notebook's parameters cell (`exactness.parameters`); its sensible
values are declared here, per study, with the rules of `exactness.parameter_rules`. This module imports no
torch, so `exactness run` refuses a bad value in a fraction of a second, before any run folder exists.
A study without an entry has no rules beyond its types.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from exactness.models import names
from exactness.parameter_rules import AtLeast, EachOf, OneOf, Positive, Rule, StudyParameterError, problems

SEED = AtLeast(0)
COUNT = AtLeast(0)
AT_LEAST_ONE = AtLeast(1)
WORKERS = AtLeast(0, "0 means one worker per core")
TOLERANCE = AtLeast(0)

RULES: dict[str, dict[str, Rule]] = {
    "near_tie": {
        "models": EachOf(OneOf(names.WAV2VEC2_FAMILY, "model")),
        "seed_start": SEED, "n_seeds": AT_LEAST_ONE, "threshold": Positive(),
        "shape_modes": EachOf(OneOf(names.SHAPE_MODES, "shape mode")),
        "max_checks": AtLeast(0, "0 checks every candidate"), "replay_seeds": EachOf(SEED, allow_empty=True),
        "defect_seeds": COUNT, "what_if_checks": COUNT, "workers": WORKERS, "atol": TOLERANCE, "rtol": TOLERANCE,
    },
    "ulp_noise": {
        "model": OneOf(names.NOISE_SUBJECTS, "model"), "seed_start": SEED, "n_draws": AT_LEAST_ONE,
        "shape_mode": OneOf(names.SHAPE_MODES, "shape mode"), "reference_draws": COUNT, "settings_draws": COUNT,
        "device": OneOf(("cpu", "cuda"), "device"), "workers": WORKERS,
    },
    "dac_propagation": {
        "variant": OneOf(names.DAC_VARIANTS, "DAC variant"), "seconds": Positive(), "seed": SEED, "audio_seed": SEED,
        "inits": EachOf(OneOf(names.DAC_INITS, "init")),
    },
    "dac_batching": {
        "variant": OneOf(names.DAC_VARIANTS, "DAC variant"), "clip_seconds": EachOf(Positive(), allow_repeats=True),
        "seed": SEED, "init": OneOf(names.DAC_INITS, "init"), "odd_lengths": EachOf(COUNT),
    },
    "environment": {"magnitudes": EachOf(Positive())},
}


def check(study: str, values: Mapping[str, Any], origin: Mapping[str, str] | None = None) -> None:
    """Raise one StudyParameterError listing every value outside its study's declared range or choices."""
    found = problems(RULES.get(study, {}), values, origin)
    if found:
        raise StudyParameterError(f"{study}: " + "; ".join(found))
