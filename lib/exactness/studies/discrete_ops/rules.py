"""The discrete-ops study's parameter rules (imports no torch: the command line checks them before a run)."""

from exactness.models import names, tiny_subjects
from exactness.workbook.parameter_rules import EachOf, OneOf
from exactness.workbook.study_rules import AT_LEAST_ONE, SCHEDULER, SEED, WORKERS, Registration

STUDY = Registration({
    "models": EachOf(OneOf(tiny_subjects.NAMES, "model (registered in exactness.models.tiny_subjects)")),
    "seed_start": SEED, "n_seeds": AT_LEAST_ONE, "shape_modes": EachOf(OneOf(names.SHAPE_MODES, "shape mode")),
    "workers": WORKERS, "max_fresh_exports": AT_LEAST_ONE, "scheduler": SCHEDULER,
})
