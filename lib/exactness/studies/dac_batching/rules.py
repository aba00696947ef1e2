"""The DAC batching study's parameter rules (imports no torch: the command line checks them before a run)."""

from exactness.models import names
from exactness.workbook.parameter_rules import AtLeast, EachOf, OneOf
from exactness.workbook.study_rules import COUNT, SEED, Registration

CLIP_SECONDS = AtLeast(names.DAC_MIN_SECONDS, "shorter clips do not fill the encoder's strides")

# Huge pages for the same reason as the propagation study's (its rules module says why).
STUDY = Registration({
    "variant": OneOf(names.DAC_VARIANTS, "DAC variant"),
    "clip_seconds": EachOf(CLIP_SECONDS, allow_repeats=True, min_items=2),
    "seed": SEED, "init": OneOf(names.DAC_INITS, "init"), "odd_lengths": EachOf(COUNT),
}, kernel_environment={"THP_MEM_ALLOC_ENABLE": "1"})
