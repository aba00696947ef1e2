"""The discrete-ops study's parameter rules (imports no torch: the command line checks them before a run)."""

from dataclasses import dataclass

from exactness.models import class_registry, model_names, names
from exactness.workbook.parameter_rules import AtLeast, EachOf, OneOf, Switch
from exactness.workbook.study_rules import (
    AT_LEAST_ONE,
    SCHEDULER,
    SEED,
    SEEDS,
    TOLERANCE,
    WORKERS,
    EagerPairs,
    Registration,
)


@dataclass(frozen=True)
class ModelList:
    """A list of model names (each a registered class, a class of the checkout's testers, or your builder), or
    the one word `skipped`: `-p models skipped` audits the checkout's comparison skips."""

    item: model_names.ModelName

    def problem(self, value) -> str | None:
        if value == model_names.SKIPPED:
            return None
        if isinstance(value, str):
            return f"must be a list of model names, or {model_names.SKIPPED}, got {value!r}"
        return EachOf(self.item).problem(value)

    def code(self, value) -> list[str]:
        return [] if value == model_names.SKIPPED else EachOf(self.item).code(value)


def cross_problems(values) -> list[str]:
    """What `models` says about `transformers_tests`: each class outside the registry must be in the checkout's
    testers, and `skipped` needs a checkout that lists comparison skips. Checked by reading the checkout's files,
    never importing them."""
    models = values.get("models")
    if not isinstance(models, (list, str)):
        return []
    models = model_names.as_list(models)
    checkout = values.get("transformers_tests") or ""
    fallback = [] if values.get("replay", 0) == 0 or checkout else [
        "replay runs a checkout's real export test: give the checkout with -p transformers_tests PATH, or leave "
        "replay 0"]
    fallback += [] if values.get("fallback", "none") == "none" or checkout else [
        "fallback registry builds from the registry what a checkout's testers cannot: give the checkout with "
        "-p transformers_tests PATH, or leave fallback none"]
    if not isinstance(checkout, str) or model_names.CheckoutRoot().problem(checkout):
        checkout = ""  # the checkout's own rule says what is wrong with it
    return fallback + model_names.cross_problems(models, class_registry.NAMES, checkout, audit=True)


STUDY = Registration({
    # a registered class, a class of the checkout's testers, your builder (module:function), or `skipped`
    "models": ModelList(model_names.ModelName(class_registry.NAMES, "model", audit=True)),
    "transformers_tests": model_names.CheckoutRoot(),
    "fallback": OneOf(model_names.FALLBACKS, "fallback"),
    "replay": AtLeast(0, "no replay", whole=True),
    "seed_start": SEED, "n_seeds": SEEDS, "shape_modes": EachOf(OneOf(names.SHAPE_MODES, "shape mode")),
    "workers": WORKERS, "max_fresh_exports": AT_LEAST_ONE, "scheduler": SCHEDULER,
    "calibration_seeds": AT_LEAST_ONE, "max_checks": AT_LEAST_ONE, "atol": TOLERANCE, "rtol": TOLERANCE,
    "never_flip_rate": AtLeast(1e-9, "", maximum=0.5, why_maximum="it is a rate of flips per seed"),
    "fast_paths": Switch("no screen: every seed checked against ORT"),
    "pairs": EagerPairs(), "pair_seeds": AT_LEAST_ONE,
}, across=cross_problems)
