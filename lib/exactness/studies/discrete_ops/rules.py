"""The discrete-ops study's parameter rules (imports no torch: the command line checks them before a run)."""

from exactness.models import names, tiny_subjects
from exactness.workbook.parameter_rules import EachOf, OneOf, Positive, Switch
from exactness.workbook.study_rules import AT_LEAST_ONE, SCHEDULER, SEED, TOLERANCE, WORKERS, Registration

STUDY = Registration({
    "models": EachOf(OneOf(tiny_subjects.NAMES, "model (registered in exactness.models.tiny_subjects)")),
    "seed_start": SEED, "n_seeds": AT_LEAST_ONE, "shape_modes": EachOf(OneOf(names.SHAPE_MODES, "shape mode")),
    "workers": WORKERS, "max_fresh_exports": AT_LEAST_ONE, "scheduler": SCHEDULER,
    "calibration_seeds": AT_LEAST_ONE, "max_checks": AT_LEAST_ONE, "atol": TOLERANCE, "rtol": TOLERANCE,
    "never_flip_rate": Positive(), "fast_paths": Switch("no screen: every seed checked against ORT"),
})
