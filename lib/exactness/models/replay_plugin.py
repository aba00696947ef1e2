"""A pytest plugin that runs a transformers checkout's real export test on one class and one seed, seeded as this
workbook seeds it (`exactness.models.sources`): the testers' `global_rng`, torch and numpy seeded right before
the tester draws, `torch.manual_seed(seed)` again right after `set_config_for_less_flaky_test(config)`, that is
right before `model_class(config)`. Loaded by `exactness.models.real_test` as `-p exactness.models.replay_plugin`
with its request in the environment (`EXACTNESS_REPLAY`, JSON: model, seed, lift, keep, out); it writes each
test's outcome to `out` as JSON. It is this package's code: nothing a run wrote is imported or executed.

- `lift`: the class is removed from every scope of the export test's `EXPORT_SKIPS` that drops the value
  comparison (`exactness.models.checkout_index.comparison_scopes`), so the test compares its values;
- `keep`: the comparison narrowed to these outputs (the answer's recommended change), both sides, before the
  checkout's own `_check_outputs_close` judges them;
- `left_out`: outputs added to the test's `_SELECTED_BY_TOPK` (the patch's exclusions, made in memory);
- `plant`: {output, factor, elements}: that many elements of the output (0: all) moved by factor x the
  tolerance before the check;
- only the named class runs: the test case's `all_model_classes` is narrowed to it.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys

REQUEST = "EXACTNESS_REPLAY"


def _request() -> dict | None:
    text = os.environ.get(REQUEST)
    return json.loads(text) if text else None


def _seed_all(seed: int) -> None:
    import numpy as np
    import torch

    common = sys.modules.get("tests.test_modeling_common")
    if common is not None and hasattr(common, "global_rng"):
        common.global_rng.seed(seed)
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)


def _seeded(function, seed: int):
    @functools.wraps(function)
    def draw(*args, **kwargs):
        _seed_all(seed)
        return function(*args, **kwargs)

    return draw


def _planted(actual, expected, factor: float, atol: float = 1e-3, rtol: float = 1e-3, elements: int = 3):
    """`elements` elements (spread over the flattened output; 0: every one) moved away from eager's by `factor`
    times the tolerance there, as the workbook plants its "few elements" defect (`studies.discrete_ops.check`)."""
    import torch

    moved = actual.detach().clone()
    flat, reference = moved.reshape(-1), expected.detach().reshape(-1).to(moved.dtype)
    if not flat.numel() or not moved.is_floating_point():
        return moved
    count = flat.numel() if elements <= 0 else min(elements, flat.numel())
    at = torch.unique(torch.linspace(0, flat.numel() - 1, count).long())
    away = torch.where(flat[at] >= reference[at], 1.0, -1.0).to(moved.dtype)
    flat[at] = flat[at] + away * factor * (atol + rtol * reference[at].abs())
    return moved


def _patch_export_test(request: dict) -> None:
    from exactness.models import checkout_index

    module = importlib.import_module("tests.exporters.test_export")
    seed, model = int(request["seed"]), request["model"]
    if request.get("lift"):
        skips = getattr(module, "EXPORT_SKIPS", {})
        for scope in checkout_index.comparison_scopes(skips):
            skips[scope].pop(model, None)
    less_flaky = getattr(module, "set_config_for_less_flaky_test", None)
    if less_flaky is not None:
        @functools.wraps(less_flaky)
        def then_seed(config, *args, **kwargs):
            result = less_flaky(config, *args, **kwargs)
            import torch

            torch.manual_seed(seed)  # right before model_class(config), as the workbook builds it
            return result

        module.set_config_for_less_flaky_test = then_seed
    if request.get("left_out") and hasattr(module, "_SELECTED_BY_TOPK"):  # the patch's exclusions, in memory
        module._SELECTED_BY_TOPK = frozenset(module._SELECTED_BY_TOPK) | set(request["left_out"])
    keep, plant = request.get("keep"), request.get("plant")
    for owner in [v for v in vars(module).values() if isinstance(v, type) and "_check_outputs_close" in vars(v)]:
        original = owner._check_outputs_close

        @functools.wraps(original)
        def narrowed(self, actual, expected, *args, _original=original, **kwargs):
            if keep:
                actual = {k: v for k, v in actual.items() if k in keep}
                expected = {k: v for k, v in expected.items() if k in keep}
            if plant and plant["output"] in actual:
                atol = kwargs.get("atol", args[0] if args else 1e-3)
                rtol = kwargs.get("rtol", args[1] if len(args) > 1 else 1e-3)
                name = plant["output"]
                actual = {**actual, name: _planted(actual[name], expected[name], float(plant["factor"]), atol, rtol,
                                                   int(plant.get("elements", 3)))}
            return _original(self, actual, expected, *args, **kwargs)

        owner._check_outputs_close = narrowed


def pytest_collection_modifyitems(session, config, items):
    request = _request()
    if request is None:
        return
    _patch_export_test(request)
    model, seed = request["model"], int(request["seed"])
    for case in {getattr(item, "cls", None) for item in items} - {None}:
        if "setUp" not in dir(case):
            continue
        original = case.setUp

        def set_up(self, _original=original):
            _original(self)
            self.all_model_classes = tuple(c for c in self.all_model_classes if c.__name__ == model)
            if not self.all_model_classes:  # a test case of the file that does not build this class
                self.skipTest(f"{model} is not in {type(self).__name__}.all_model_classes")
            tester = self.model_tester
            for name in ("prepare_config_and_inputs_for_model_class", "prepare_config_and_inputs_for_common"):
                if hasattr(tester, name):
                    setattr(tester, name, _seeded(getattr(tester, name), seed))

        case.setUp = set_up


def pytest_runtest_logreport(report):
    request = _request()
    if request is None or not (report.when == "call" or (report.when == "setup" and report.outcome != "passed")):
        return
    line = ""
    if report.longrepr is not None:
        text = str(report.longrepr)
        said = [x.strip()[1:].strip() for x in text.splitlines() if x.strip().startswith("E ")]
        line = " ".join(x for x in said if x) or text[-300:]  # the assertion's own lines, in one
    with open(request["out"], "a", encoding="utf-8") as out:
        out.write(json.dumps({"test": report.nodeid, "outcome": report.outcome, "line": line[:400]}) + "\n")
