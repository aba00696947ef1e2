"""The ulp-noise study's parameter rules (imports no torch: the command line checks them before a run)."""

from exactness.models import class_registry, model_names, names
from exactness.workbook.parameter_rules import EachOf, OneOf, RunFolder
from exactness.workbook.study_rules import AT_LEAST_ONE, COUNT, SEED, WORKERS, Registration

# the study's own subjects first, then the registry's classes (built by transformers_tests' tester where it lists
# them); your builder (module:function) besides
MODELS = tuple(dict.fromkeys(names.NOISE_SUBJECTS + class_registry.NAMES))

STUDY = Registration({
    # a class outside MODELS needs the discrete-ops study's cross-check against the checkout: refused here
    "model": model_names.ModelName(MODELS, "model", checkout_classes=False),
    "transformers_tests": model_names.CheckoutRoot(),
    "seed_start": SEED, "n_draws": AT_LEAST_ONE,
    "shape_mode": OneOf(names.SHAPE_MODES, "shape mode"), "reference_draws": COUNT, "settings_draws": COUNT,
    "device": OneOf(("cpu", "cuda"), "device"), "workers": WORKERS,
    # the tables and columns `study.passing_vs_failing` reads
    "near_tie_run": RunFolder("near_tie", ("checks", "tensors"), (
        ("checks", ("model", "seed", "shape_mode", "test_rule_passed")),
        ("tensors", ("model", "seed", "shape_mode", "label", "max_abs_diff")))),
    "precisions": EachOf(OneOf(("tf32-conv", "tf32", "bf16", "fp16"), "precision"), allow_empty=True),
})
