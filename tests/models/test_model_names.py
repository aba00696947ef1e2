"""Model names checked before anything is created: their form, the checkout beside them, and the skip audit's
classes read from the checkout's export test without running it."""

import re
from pathlib import Path

import pytest

from exactness.models import checkout_index, model_names

CHECKOUT = str(Path(__file__).resolve().parents[1] / "fixtures" / "transformers_checkout")
REGISTRY = ("BertModel", "BitModel")


def test_each_kind_of_name_is_told_apart():
    kind, Kind = model_names.kind, model_names.Kind
    assert kind("BitModel", REGISTRY) is Kind.REGISTRY and kind("skipped", REGISTRY) is Kind.SKIPPED
    assert kind("pkg.mod:build", REGISTRY) is Kind.BUILDER and kind("/x/y.py:build", REGISTRY) is Kind.BUILDER
    # a class the checkout's testers have comes from them, registered or not
    assert kind("BertModel", REGISTRY, CHECKOUT) is Kind.CHECKOUT
    assert kind("BitModel", REGISTRY, CHECKOUT) is Kind.REGISTRY


def test_a_builders_name_is_checked_without_running_it(tmp_path):
    rule = model_names.ModelName(REGISTRY)
    good = tmp_path / "mine.py"
    good.write_text("import torch\n\ndef build(seed):\n    raise SystemExit('never run by a check')\n")
    assert rule.problem(f"{good}:build") is None
    assert "does not define at its top level" in rule.problem(f"{good}:make")
    assert "does not exist" in rule.problem(f"{tmp_path / 'absent.py'}:build")
    assert "relative path: give it absolute" in rule.problem("my_model.py:build")
    assert "is not importable here" in rule.problem("a_package_nobody_installed.models:build")
    assert "not of the form" in rule.problem("pkg.mod:not an identifier")
    assert rule.problem("BertModel") is None and rule.problem("SomeCheckoutClass") is None
    assert "names no model 'not a name'" in rule.problem("not a name")
    assert model_names.ModelName(REGISTRY, audit=True).problem("skipped") is None
    # a study without a checkout parameter takes registered names and builders only
    closed = model_names.ModelName(REGISTRY, checkout_classes=False)
    assert "names no model 'SomeCheckoutClass'" in closed.problem("SomeCheckoutClass")
    assert "transformers_tests" not in closed.problem("SomeCheckoutClass")


def test_an_unknown_class_is_one_line_naming_where_it_was_looked_for():
    (alone,) = model_names.cross_problems(["GPT2Model", "BitModel"], REGISTRY, "")
    assert "unknown class 'GPT2Model'" in alone and "no transformers checkout is given" in alone
    (there,) = model_names.cross_problems(["GPT2Model", "BertModel"], REGISTRY, CHECKOUT)
    assert "all_model_classes of" in there and "tests/models/*/test_modeling_*.py" in there
    # a class the checkout's tester lists is known even when its tester would not import
    assert model_names.cross_problems(["BertForTokenClassification"], REGISTRY, CHECKOUT) == []
    (audit,) = model_names.cross_problems(["skipped"], REGISTRY, "", audit=True)
    assert "give the checkout with -p transformers_tests PATH" in audit
    (no_audit,) = model_names.cross_problems(["skipped"], REGISTRY, CHECKOUT)  # a study that audits nothing
    assert "unknown class 'skipped'" in no_audit


def test_a_path_that_is_not_a_checkout_is_refused(tmp_path):
    rule = model_names.CheckoutRoot()
    assert rule.problem("") is None and rule.problem(CHECKOUT) is None
    assert "no tests/test_modeling_common.py there" in rule.problem(str(tmp_path))
    assert "must be an absolute path" in rule.problem("transformers")


def test_the_skip_audit_takes_every_class_whose_ort_comparison_is_dropped_in_file_order():
    # "all" skips the export (not a comparison), and OpenVINO's comparison is not ORT's
    assert model_names.expand(["skipped", "BitModel", "BertModel"], CHECKOUT) == [
        "BertForTokenClassification", "BertModel", "GhostModel", "BertForSequenceClassification", "BitModel"]
    root = checkout_index.root_of(CHECKOUT)
    assert checkout_index.comparison_scopes(checkout_index.export_skips(root)) == [
        "exactness", "onnx.exactness", "onnx.static.exactness"]
    skip = checkout_index.skip_of(root, "BertForSequenceClassification")
    assert skip.scope == "onnx.static.exactness" and skip.reason == "Same as `BertModel`."


def test_an_export_test_without_a_literal_skip_list_is_one_line(tmp_path):
    (tmp_path / "tests" / "exporters").mkdir(parents=True)
    (tmp_path / "tests" / "exporters" / "test_export.py").write_text("EXPORT_SKIPS = make_skips()\n")
    with pytest.raises(checkout_index.CheckoutError, match=r"test_export.py:1: EXPORT_SKIPS is not a literal mapping"):
        checkout_index.export_skips(tmp_path)


def test_one_model_file_listed_twice_by_two_spellings_is_refused_as_a_repeat(tmp_path):
    from exactness.workbook import study_rules
    from exactness.workbook.parameter_rules import StudyParameterError

    (tmp_path / "sub").mkdir()
    good = tmp_path / "good.py"
    good.write_text("def build(seed):\n    return None\n")
    (tmp_path / "link.py").symlink_to(good)
    again = f"{tmp_path}/sub/../good.py:build"
    with pytest.raises(StudyParameterError, match=rf"models lists {good}:build \(again as {re.escape(again)}\) more "
                                                  "than once"):
        study_rules.check("discrete_ops", {"models": [f"{good}:build", again]})
    with pytest.raises(StudyParameterError, match="more than once"):
        study_rules.check("discrete_ops", {"models": [f"{good}:build", f"{tmp_path}/link.py:build"]})
    study_rules.check("discrete_ops", {"models": [f"{good}:build"]})
