"""The answers as a change to the checkout's export test: a diff `git apply` takes, removing skip entries (alone on
a line or beside others) and adding proven exclusions to the test's own set of left-out outputs, with the proof."""

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

from exactness.models import checkout_index, checkout_rule
from exactness.models.export_test_patch import Change, Edit, patch

CHECKOUT = Path(__file__).resolve().parents[1] / "fixtures" / "transformers_checkout"


def _applied_with_git(root: Path, diff: str, tmp_path: Path) -> str:
    copy = tmp_path / "applied"
    shutil.copytree(root, copy)
    (tmp_path / "change.patch").write_text(diff)
    subprocess.run(["git", "apply", "--unsafe-paths", "--directory=.", str(tmp_path / "change.patch")], cwd=copy,
                   check=True, capture_output=True)
    return (copy / checkout_index.EXPORT_TEST).read_text()


def test_removing_skips_leaves_a_file_that_parses_and_lists_them_no_more(tmp_path):
    changes = [Change("BertModel", Edit.REMOVE_SKIP, "no discrete op reaches an output"),
               Change("BertForSequenceClassification", Edit.REMOVE_SKIP, "no discrete op reaches an output")]
    made = patch(CHECKOUT, changes)
    assert made.made == changes
    ast.parse(made.applied)
    assert made.diff.startswith("--- a/tests/exporters/test_export.py\n+++ b/tests/exporters/test_export.py\n")
    copy = tmp_path / "checkout"
    shutil.copytree(CHECKOUT, copy)
    (copy / checkout_index.EXPORT_TEST).write_text(made.applied)
    checkout_index.export_skips.cache_clear()
    left = {s.model for s in checkout_index.comparison_skips(copy)}
    assert left == {"BertForTokenClassification", "GhostModel"}  # the one-line scope's entry removed, scope kept
    assert "onnx.static.exactness" in checkout_index.export_skips(copy)
    assert _applied_with_git(CHECKOUT, made.diff, tmp_path) == made.applied
    text = made.text(changes)
    assert text.splitlines()[0] == "# exactness: BertModel: remove the skip: no discrete op reaches an output"


def test_a_proven_tie_adds_its_outputs_to_the_tests_left_out_set_with_the_proof(tmp_path):
    change = Change("GhostModel", Edit.LEAVE_OUT, "exact tie on 2,000 of 2,000 seeds", ("end_top_index", "x"))
    made = patch(CHECKOUT, [change])
    assert made.made == [change]
    copy = tmp_path / "checkout"
    shutil.copytree(CHECKOUT, copy)
    (copy / checkout_index.EXPORT_TEST).write_text(made.applied)
    rule = checkout_rule.read(copy).rule
    assert rule.left_out == {"start_top_index", "enc_topk_logits", "end_top_index", "x"}
    assert "# GhostModel: exact tie on 2,000 of 2,000 seeds" in made.applied
    assert "GhostModel" not in {s.model for s in checkout_index.comparison_skips(copy)}
    assert _applied_with_git(CHECKOUT, made.diff, tmp_path) == made.applied


def test_a_test_without_a_left_out_set_keeps_the_skip_and_says_so(tmp_path):
    copy = tmp_path / "checkout"
    shutil.copytree(CHECKOUT, copy)
    test = copy / checkout_index.EXPORT_TEST
    test.write_text(test.read_text().replace("_SELECTED_BY_TOPK = frozenset", "_OTHER = frozenset"))
    made = patch(copy, [Change("BertModel", Edit.LEAVE_OUT, "exact tie", ("pooler_output",))])
    assert made.diff == "" and "has no _SELECTED_BY_TOPK to leave pooler_output out" in made.notes[0]
    assert made.made == []  # nothing for a replay of "the patched test" to stand for


def test_a_checkout_without_an_export_test_is_one_line_naming_it(tmp_path):
    with pytest.raises(checkout_index.CheckoutError, match="test_export.py does not exist"):
        patch(tmp_path, [Change("BertModel", Edit.REMOVE_SKIP, "nothing reaches")])
