"""The study on classes of a transformers checkout and on your own builders: the skip audit takes every class the
checkout's export test keeps out of its value comparison, and a class that cannot be built is one line in the
run's tables while the others run on."""

import textwrap
from pathlib import Path

import pytest

from builder_files import pair_builder
from exactness.causes import Stage
from exactness.engine.evidence import DefectSign
from exactness.engine.places import Kind, NanInEager
from exactness.engine.verdicts import Cause
from exactness.models import sources
from exactness.studies.discrete_ops import answers as discrete_ops_answers
from exactness.studies.discrete_ops import sentences, study

CHECKOUT = str(Path(__file__).resolve().parents[2] / "fixtures" / "transformers_checkout")


def _builder(folder: Path, fails_from: int | None = None) -> str:
    path = folder / f"builder_{fails_from}.py"
    path.write_text(textwrap.dedent(f"""
        import torch

        FAILS_FROM = {fails_from!r}


        class Scores(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = torch.nn.Linear(4, 6)

            def forward(self, x):
                h = self.proj(x)
                return {{"scores": h, "best": h.argmax(-1)}}


        def build(seed):
            if FAILS_FROM is not None and seed >= FAILS_FROM:
                raise ValueError(f"no checkpoint for seed {{seed}}")
            torch.manual_seed(seed)
            model = Scores()
            return model, {{"x": torch.randn(5, 4)}}
        """))
    return f"{path}:build"


@pytest.mark.slow
def test_the_skip_audit_and_your_builder_run_in_one_command_every_class_answered(tmp_path):
    mine = _builder(tmp_path)
    settings = study.Settings(calibration_seeds=1, max_checks=1, cache=str(tmp_path / "cache"),
                              transformers_tests=CHECKOUT)
    result = study.run(["skipped", mine], 0, 1, ["static"], settings=settings, progress_every=1e9)
    graphs = result.graphs.set_index("model")
    audited = ["BertForTokenClassification", "BertModel", "GhostModel", "BertForSequenceClassification"]
    assert list(graphs.index) == audited + [mine]
    assert graphs.error["BertModel"] == "" and graphs.error[mine] == ""
    assert graphs.error["BertForTokenClassification"].startswith("could not build: ")
    assert "no module 'a_package_nobody_installed'" in graphs.error["BertForTokenClassification"]
    assert "skipped here: test requires CUDA" in graphs.error["BertForSequenceClassification"]
    assert "no tester of the checkout lists it" in graphs.error["GhostModel"]
    built_by = sentences.registered(result.graphs.model, settings.transformers_tests,
                                   result.graphs).frame.set_index("class")["built by"]
    assert built_by["BertModel"] == "the checkout's tester tests/models/tiny/test_modeling_tiny.py"
    assert built_by["GhostModel"].startswith("not built: could not build: GhostModel: no tester of the checkout")
    assert built_by["BertForSequenceClassification"].startswith("not built: could not build:")
    verdicts = {v.model: v for v in result.verdicts}
    assert set(verdicts) == set(audited + [mine])
    assert verdicts["BertModel"].cause is not Cause.NO_EXPORT and verdicts[mine].cause is not Cause.NO_EXPORT
    assert verdicts["BertModel"].skip_reason.startswith("The tiny config's pooler ties")
    assert verdicts["BertModel"].claim == "(scope onnx.exactness)"  # no claim labelled for this reason
    assert verdicts["GhostModel"].cause is Cause.NO_EXPORT and verdicts["GhostModel"].skip_reason.startswith("A class")
    assert verdicts[mine].skip_reason == ""
    assert [a.subject for a in discrete_ops_answers.answers(result)] == audited + [mine]  # every class answered


@pytest.mark.slow
def test_a_builder_that_fails_on_a_later_seed_is_its_classs_one_line_and_the_others_run_on(tmp_path):
    failing, fine = _builder(tmp_path, fails_from=2), _builder(tmp_path)
    settings = study.Settings(calibration_seeds=2, max_checks=3, cache=str(tmp_path / "cache"))
    result = study.run([failing, fine], 0, 3, ["static"], settings=settings, progress_every=1e9)
    graphs = result.graphs.set_index("model")
    assert graphs.error[failing] == ("could not build: " + failing + ": your builder raised ValueError for seed 2: "
                                     "no checkpoint for seed 2")
    assert graphs.error[fine] == "" and set(result.seeds.model) == {fine}
    assert {v.model: v.cause for v in result.verdicts}[failing] is Cause.NO_EXPORT


def test_models_skipped_is_one_word_on_the_command_line_and_needs_a_checkout():
    from exactness.workbook import study_rules
    from exactness.workbook.parameter_rules import StudyParameterError

    study_rules.check("discrete_ops", {"models": "skipped", "transformers_tests": CHECKOUT})
    with pytest.raises(StudyParameterError, match="models must be a list of model names, or skipped"):
        study_rules.check("discrete_ops", {"models": "BertModel"})
    with pytest.raises(StudyParameterError, match="give the checkout with -p transformers_tests PATH"):
        study.validate("skipped", 3, 0, ["static"], 1)
    assert study.classes("skipped", CHECKOUT) == ["BertForTokenClassification", "BertModel", "GhostModel",
                                                  "BertForSequenceClassification"]


def test_fallback_registry_needs_a_checkout_and_names_the_registry_as_the_source():
    from exactness.models import sources
    from exactness.workbook import study_rules
    from exactness.workbook.parameter_rules import StudyParameterError

    study_rules.check("discrete_ops", {"models": ["BitModel"], "transformers_tests": CHECKOUT, "fallback": "registry"})
    with pytest.raises(StudyParameterError, match="fallback registry builds from the registry what a checkout"):
        study_rules.check("discrete_ops", {"models": ["BitModel"], "fallback": "registry"})
    with pytest.raises(StudyParameterError, match="choose one of none, registry"):
        study_rules.check("discrete_ops", {"models": ["BitModel"], "fallback": "yes"})
    frame = sentences.registered(["BitModel"], sources.Checkout(CHECKOUT, "registry")).frame.set_index("class")
    assert frame.loc["BitModel", "built by"].startswith(
        "the built-in registry, huggingface/transformers tests/models/bit")
    assert "fallback: no tester of the checkout lists it" in frame.loc["BitModel", "built by"]


def test_with_a_checkout_the_registered_table_marks_the_skips_its_own_export_test_lists():
    """The column agrees with the reason each verdict is set against (`sources.stated`): BertModel, which the
    built-in skip list leaves compared, is skipped by this checkout's EXPORT_SKIPS."""
    column = "skipped by the export test"
    assert not sentences.registered(["BertModel"]).frame.set_index("class").loc["BertModel", column]
    mine = sentences.registered(["BertModel"], CHECKOUT).frame.set_index("class")
    assert mine.loc["BertModel", column]


def test_a_registry_class_the_checkouts_skips_leave_out_is_compared_by_that_test():
    from exactness.models import sources as model_sources

    assert model_sources.stated("BitModel").reason  # the built-in skip list skips it
    assert model_sources.stated("BitModel", CHECKOUT).reason == ""  # this checkout's EXPORT_SKIPS does not
    assert model_sources.stated("BertModel", CHECKOUT).reason.startswith("The tiny config's pooler ties")


def test_a_model_that_breaks_in_eager_too_is_localized_in_eager_with_no_export_stage(tmp_path):
    """An argmax over log(linear): NaN in eager and in ORT alike. The defect is the model's: it starts at the
    module whose eager output is first non-finite (float64's too), and no stage of the export pipeline is named."""
    path = tmp_path / "picks.py"
    path.write_text(textwrap.dedent("""
        import torch


        class LogLayer(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = torch.nn.Linear(4, 6)

            def forward(self, x):
                return torch.log(self.proj(x))


        class Picks(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.logs = LogLayer()

            def forward(self, x):
                return {"best": self.logs(x).argmax(-1)}


        def build(seed):
            torch.manual_seed(seed)
            return Picks(), {"x": torch.randn(5, 4)}
        """))
    mine = f"{path}:build"
    settings = study.Settings(calibration_seeds=2, max_checks=2, cache=str(tmp_path / "cache"))
    result = study.run([mine], 0, 3, ["static"], settings=settings, progress_every=1e9)
    (found,) = result.verdicts
    assert found.cause is Cause.DEFECT and found.evidence.defect.sign is DefectSign.NAN_IN_EAGER
    (spot,) = result.localizations
    assert (spot.module, spot.op_type, spot.kind) == ("logs", "Log", Kind.NAN_IN_EAGER)
    assert isinstance(spot.shows, NanInEager) and spot.shows.float64_nans == 14 and spot.stage == Stage.MODEL.value
    assert spot.pass_name == "" and not spot.proof.trials  # no pipeline configuration was switched


def test_a_builder_returning_a_tuple_has_every_output_compared_and_an_unanswered_output_stops_its_class(tmp_path):
    from exactness.runtimes.eager_capture import flatten_outputs
    from exactness.studies.discrete_ops import check

    path = pair_builder(tmp_path / "pair.py", "h, h.argmax(-1)")
    settings = study.Settings(calibration_seeds=2, max_checks=2, cache=str(tmp_path / "cache"))
    result = study.run([f"{path}:build"], 0, 2, ["static"], settings=settings, progress_every=1e9)
    assert set(result.outputs.output) == {"0", "1"} and len(result.outputs) == 4  # both outputs of both seeds
    made = sources.make(f"{path}:build", 0)
    eager = flatten_outputs(made.model(**made.inputs))
    check.check_output_names(["0", "1"], eager)
    with pytest.raises(check.OutputNamesError, match=r"outputs \['logits'\] have no eager output of that name"):
        check.check_output_names(["0", "logits"], eager)
