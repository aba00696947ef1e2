"""The report names the rule that judged each class: the built-in replica without a checkout, the checkout's own
with one, each seed judged both ways from the same counts."""

from pathlib import Path

import pandas as pd
import pytest

from exactness.compare.export_rule import BUILT_IN
from exactness.engine.verdict_words import proof_of
from exactness.studies.discrete_ops import rule_used, sentences

CHECKOUT = str(Path(__file__).resolve().parents[2] / "fixtures" / "transformers_checkout")


def _outputs() -> pd.DataFrame:
    """Two seeds of a QA class: on seed 1 only the top-k pick moved (every element), on seed 2 the logits too."""
    rows = []
    for seed, picked_off, logits_off in ((1, 13, 0), (2, 13, 13)):
        for output, numel, off in (("start_top_index", 13, picked_off), ("start_logits", 13 * 7, logits_off)):
            rows.append({"model": "XLMForQuestionAnswering", "shape_mode": "static", "seed": seed, "output": output,
                         "numel": numel, "rule_mismatched": off, "zero_dim": False, "same_shape": True,
                         "same_dtype": True})
    return pd.DataFrame(rows)


def test_without_a_checkout_the_built_in_replica_judges():
    section = sentences.rule_section(rule_used.judging(_outputs()))
    assert section.frame["rule"].tolist() == [BUILT_IN.name]
    assert section.frame["pass (built-in replica)"].tolist() == [0]
    assert section.sentence.startswith("No checkout given")


def test_with_a_checkout_its_rule_judges_and_the_seeds_it_judges_differently_are_named():
    judging = rule_used.judging(_outputs(), CHECKOUT)
    assert judging.judged.rule is not BUILT_IN and not judging.judged.problem
    section = sentences.rule_section(judging)
    row = section.frame.iloc[0]
    assert "the checkout's _check_outputs_close" in row["rule"] and "test_export.py:" in row["rule"]
    assert row["pass (built-in replica)"] == 0 and row["pass (this rule)"] == 1  # seed 1: the pick left out
    assert row["seeds judged differently"] == "1"
    assert "judges 1 class differently" in section.sentence


def test_a_checkout_whose_rule_cannot_be_read_says_so_and_judges_by_the_replica(tmp_path):
    (tmp_path / "tests" / "models").mkdir(parents=True)
    for folder in ("tests", "tests/models"):
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_modeling_common.py").write_text("")
    section = sentences.rule_section(rule_used.judging(_outputs(), str(tmp_path)))
    assert "could not be read" in section.sentence and "test_export.py does not exist" in section.sentence
    assert section.frame["rule"].tolist() == [BUILT_IN.name]


@pytest.mark.slow
def test_replayed_seeds_are_set_beside_the_workbooks_and_a_disagreement_is_named(tmp_path):
    from types import SimpleNamespace

    import runnable_checkout

    checkout = runnable_checkout.make(tmp_path)
    seeds = [0, 1, 2]
    truth = [not runnable_checkout.moved(checkout, s) for s in seeds]
    claimed = [truth[0], truth[1], not truth[2]]  # the workbook wrong on seed 2
    result = SimpleNamespace(
        seeds=pd.DataFrame({"model": "BertModel", "shape_mode": "static", "seed": seeds, "test_rule_passed": claimed}),
        verdicts=[SimpleNamespace(model="BertModel", compare=["last_hidden_state"])])
    section = sentences.replay_section(rule_used.replay_agreement(result, checkout, per_class=3))
    assert section.frame["agree"].tolist() == [True, True, False]
    assert section.frame["real test, outputs kept"].tolist() == ["passed"] * 3
    assert section.sentence == "The real test agrees with the workbook on 2 of 3 replayed seeds; it differs on " \
                               "BertModel seed 2."


def _tie_result(seeds):
    from types import SimpleNamespace

    from exactness.engine.evidence import Evidence, Flips
    from exactness.engine.verdicts import Cause, ClassVerdict, Verification

    flips = Flips(len(seeds), len(seeds), ("ArgMax",), True, 0.0, 0.0, tuple(seeds))  # the pooler's scores tie
    verdict = ClassVerdict("BertModel", "static", Cause.EXACT_TIE, compare=["last_hidden_state"],
                           exclude=["pooler_output"], verification=Verification(len(seeds), len(seeds)),
                           evidence=Evidence(flips=flips))
    outputs = pd.DataFrame({"model": "BertModel", "output": ["last_hidden_state", "pooler_output"]})
    return SimpleNamespace(verdicts=[verdict], outputs=outputs, seeds=pd.DataFrame(
        {"model": "BertModel", "shape_mode": "static", "seed": seeds, "test_rule_passed": True}))


@pytest.mark.slow
def test_the_patch_is_written_to_the_run_and_the_patched_real_test_passes_and_catches_the_plants(tmp_path):
    import runnable_checkout
    from exactness.studies.discrete_ops import export_test_change
    from exactness.workbook.artifacts import RunArtifacts

    checkout = runnable_checkout.make(tmp_path)
    moved = [s for s in range(12) if runnable_checkout.moved(checkout, s)][:1]
    still = [s for s in range(12) if not runnable_checkout.moved(checkout, s)][:1]
    result = _tie_result(moved + still)
    section = sentences.patch_section(export_test_change.write_patch(result.verdicts, checkout,
                                                                         RunArtifacts(tmp_path / "run")))
    patch = (tmp_path / "run" / "patches" / "test_export.patch").read_text()
    proof = proof_of(result.verdicts[0])  # the class's proof, the patch's reason
    assert proof.startswith(f"{len(moved + still)} of {len(moved + still)} checked seeds flipped at ArgMax")
    assert patch.startswith(f"# exactness: BertModel: leave outputs out (pooler_output): {proof}")
    assert any(line.startswith("+") and line.strip("+ ") == f"# BertModel: {proof}"
               for line in patch.splitlines())
    assert '-        "BertModel":' in patch and "patches/test_export.patch" in section.sentence
    replay = sentences.patched_replay_section(export_test_change.replay_patched(result, checkout, per_class=2))
    assert replay.frame["patched test"].tolist() == ["passed", "passed"]  # pooler_output moved on the first
    # 3 wrong elements of last_hidden_state's 2,912 are under the test's 5% allowance: forgiven; a whole one is not
    assert replay.frame["caught: 3 elements off"].tolist() == ["0 of 1", "0 of 1"]
    assert replay.frame["caught: every element off"].tolist() == ["1 of 1", "1 of 1"]
    assert replay.sentence == ("The patched real test passes 2 of 2 replayed seeds. A defect planted in each "
                               "compared output (100x the tolerance) fails it in every output: 3 elements off, on 0 "
                               "of 2; every element off, on 2 of 2 seeds.")


def test_with_a_checkout_its_rule_decides_the_rate_and_the_verification_not_only_the_side_table():
    from exactness.engine import verdicts
    from exactness.models import checkout_rule
    from exactness.studies.discrete_ops import study

    rule, problem = checkout_rule.judging(CHECKOUT)
    assert rule is not BUILT_IN and not problem
    assert study.Settings(transformers_tests=CHECKOUT).judging == rule
    assert study.Settings().judging is BUILT_IN and study.Settings(rule=BUILT_IN, transformers_tests=CHECKOUT).judging \
        is BUILT_IN
    seed_1 = _outputs()[lambda t: t.seed == 1]  # only the top-k pick moved
    assert not verdicts.rule_passes(seed_1) and verdicts.rule_passes(seed_1, rule)
    both = ["start_logits", "start_top_index"]
    assert verdicts.verify(_outputs(), both).passes == 0 and verdicts.verify(_outputs(), both, rule).passes == 1
    # a checkout whose rule cannot be read is judged by the built-in replica, and the line says why
    rule, problem = checkout_rule.judging("/nonexistent/checkout")
    assert rule is BUILT_IN and problem


def test_a_change_the_patch_could_not_make_is_not_replayed_as_the_patched_test(tmp_path, monkeypatch):
    import shutil

    from exactness.models import checkout_index, real_test
    from exactness.studies.discrete_ops import export_test_change

    copy = tmp_path / "checkout"
    shutil.copytree(CHECKOUT, copy)
    test = copy / checkout_index.EXPORT_TEST
    test.write_text(test.read_text().replace("_SELECTED_BY_TOPK = frozenset", "_OTHER = frozenset"))
    checkout_index.export_skips.cache_clear()

    def replay(*args, **kwargs):
        raise AssertionError("replayed a patched test the patch does not make")

    monkeypatch.setattr(real_test, "replay", replay)
    result = _tie_result([0, 1])
    assert [c.model for c in export_test_change.changes(result.verdicts, str(copy))] == ["BertModel"]  # recommended
    replayed = export_test_change.replay_patched(result, str(copy), per_class=2)
    assert not replayed.changed and replayed.table.empty
    assert sentences.patched_replay_section(replayed).sentence.startswith("The patch changes no class")


def test_shape_modes_asking_the_same_edit_change_the_class_whatever_their_proofs_say():
    """The edit is decided on causes and outputs; the proofs, worded apart, only make the comment."""
    from exactness.engine.evidence import Evidence, Values, ValueState
    from exactness.engine.verdicts import Cause, ClassVerdict, Verification
    from exactness.models.export_test_patch import Edit
    from exactness.studies.discrete_ops import export_test_change

    def clean(mode: str, worst: float) -> ClassVerdict:
        return ClassVerdict("BertForSequenceClassification", mode, Cause.NOTHING_REACHES,
                            evidence=Evidence(values=Values(ValueState.CLEAN, 4, worst)))

    static, dynamic = clean("static", 0.5), clean("dynamic", 0.25)
    assert proof_of(static) != proof_of(dynamic)
    (change,) = export_test_change.changes([static, dynamic], CHECKOUT)
    assert change.edit is Edit.REMOVE_SKIP and change.outputs == ()
    assert change.reason == f"static: {proof_of(static)} | dynamic: {proof_of(dynamic)}"
    (same,) = export_test_change.changes([static, clean("dynamic", 0.5)], CHECKOUT)
    assert same.reason == proof_of(static)
    tie = ClassVerdict("BertForSequenceClassification", "dynamic", Cause.EXACT_TIE, exclude=["logits"],
                       verification=Verification(1, 1))
    assert export_test_change.changes([static, tie], CHECKOUT) == []  # two edits asked: the class keeps its skip
