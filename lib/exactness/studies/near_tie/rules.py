"""The near-tie study's parameter rules (imports no torch: the command line checks them before a run)."""

from exactness.models import names
from exactness.workbook.machine import KERNEL_SETS
from exactness.workbook.parameter_rules import AtLeast, EachOf, OneOf, Positive, Switch
from exactness.workbook.study_rules import (
    AT_LEAST_ONE,
    COUNT,
    SCHEDULER,
    SEED,
    TOLERANCE,
    WORKERS,
    Registration,
)

STUDY = Registration({
    "models": EachOf(OneOf(names.WAV2VEC2_FAMILY, "model"), needs_one_of=names.QUANTIZER_CALLED,
                     why_needed="the others never call their quantizer in eval mode: no argmax to screen"),
    "seed_start": SEED, "n_seeds": AT_LEAST_ONE, "threshold": Positive(), "scheduler": SCHEDULER,
    "threshold_ulps": AtLeast(0, "0 chooses candidates by the absolute threshold"),
    "cpu_kernels": EachOf(OneOf(tuple(KERNEL_SETS), "kernel set")),
    "shape_modes": EachOf(OneOf(names.SHAPE_MODES, "shape mode")),
    "max_checks": AtLeast(0, "0 checks every candidate"), "replay_seeds": EachOf(SEED, allow_empty=True),
    "defect_seeds": COUNT, "what_if_checks": COUNT, "workers": WORKERS, "atol": TOLERANCE, "rtol": TOLERANCE,
    "fast_paths": Switch("every speed-up off: plain builds, a fresh export and session per seed, plain lookups"),
})
