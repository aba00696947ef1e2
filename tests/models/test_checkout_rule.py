"""The checkout's own value check: read from its export test's source and imported and called, the two agreeing
on planted cases, and differing from the built-in replica where the checkout's rule differs."""

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from exactness.compare.export_rule import BUILT_IN
from exactness.models import checkout_rule
from exactness.models.checkout_index import CheckoutError
from planted_outputs import planted_case

CHECKOUT = Path(__file__).resolve().parents[1] / "fixtures" / "transformers_checkout"
PICKED = ("start_top_index", "enc_topk_logits")


@pytest.fixture(scope="module")
def importable(tmp_path_factory) -> Path:
    """The fixture checkout with its export test importable (the fixture's own import fails on purpose)."""
    copy = tmp_path_factory.mktemp("checkout") / "transformers"
    shutil.copytree(CHECKOUT, copy)
    test = copy / "tests" / "exporters" / "test_export.py"
    test.write_text(test.read_text().replace(
        "from transformers.exporters.a_module_this_version_lacks import ExportHelper", "ExportHelper = object"))
    return copy


def test_the_rule_is_read_from_the_checkouts_source_and_named_with_its_file_and_line():
    found = checkout_rule.read(CHECKOUT)
    assert found.rule.left_out == frozenset(PICKED) and found.rule.half_tolerance == 2e-2
    assert found.where.startswith(str(CHECKOUT / "tests" / "exporters" / "test_export.py") + ":")
    assert "read from its source" in found.rule.name and "enc_topk_logits, start_top_index left out" in found.rule.name


@pytest.mark.parametrize("seed", range(300))
def test_read_and_called_agree_on_planted_cases(importable, seed):
    rule, passes = checkout_rule.read(importable).rule, checkout_rule.called(importable)
    actual, expected = planted_case(np.random.default_rng(seed), PICKED)
    assert rule.applied(actual, expected, 1e-3, 1e-3).passed == passes(actual, expected, 1e-3, 1e-3)


def test_the_checkouts_rule_and_the_built_in_differ_where_a_topk_pick_or_half_precision_moves():
    rule = checkout_rule.read(CHECKOUT).rule
    expected = {"start_top_index": torch.arange(6), "start_logits": torch.ones(6)}
    actual = {"start_top_index": torch.arange(6).flip(0), "start_logits": torch.ones(6)}
    assert rule.applied(actual, expected).passed and not BUILT_IN.applied(actual, expected).passed
    alone = {"start_top_index": torch.arange(6)}  # nothing else to compare: the pick stays in
    assert not rule.applied({"start_top_index": torch.arange(6).flip(0)}, alone).passed
    half = {"x": torch.ones(40, dtype=torch.float16)}
    moved = {"x": torch.full((40,), 1.01, dtype=torch.float16)}
    assert rule.applied(moved, half).passed and not BUILT_IN.applied(moved, half).passed


@pytest.mark.parametrize("body, says", [
    ("def _check_outputs_close(self, actual, expected, atol, rtol, inputs=None):\n"
     "    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol)\n",
     "it takes inputs besides the outputs"),
    ("def _check_outputs_close(self, actual, expected, atol, rtol):\n"
     "    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol)\n",
     "it is not one torch.testing.assert_close with the 5% allowance"),
    ("def compare(self, actual, expected):\n    pass\n", "defines no _check_outputs_close"),
])
def test_a_rule_it_does_not_recognise_is_one_line_naming_the_file_and_what_to_do(tmp_path, body, says):
    test = tmp_path / "tests" / "exporters" / "test_export.py"
    test.parent.mkdir(parents=True)
    test.write_text("import torch\n\n\n" + body)
    with pytest.raises(CheckoutError) as error:
        checkout_rule.read(tmp_path)
    message = str(error.value)
    assert says in message and str(test) in message and "\n" not in message
    assert "judge by the built-in replica" in message or "teach" in message


def test_an_export_test_that_does_not_import_says_so_and_where_its_rule_can_still_be_read():
    with pytest.raises(CheckoutError, match="does not import here .* can still be read from its source"):
        checkout_rule.called(CHECKOUT)
