from pathlib import Path

import pytest

from exactness.models import names
from exactness.workbook import study_rules
from exactness.workbook.parameter_rules import StudyParameterError


@pytest.mark.parametrize(("study", "values", "message"), [
    ("near_tie", {"n_seeds": 0}, "n_seeds must be at least 1, got 0"),
    ("near_tie", {"n_seeds": -5}, "n_seeds must be at least 1, got -5"),
    ("near_tie", {"threshold": -1e-5}, "threshold must be positive and finite"),
    ("near_tie", {"threshold": float("nan")}, "threshold must be positive and finite, got nan"),
    ("near_tie", {"workers": -1}, "workers must be at least 0 (0 means one worker per core)"),
    ("near_tie", {"models": []}, "models must not be empty"),
    ("near_tie", {"models": ["UniSpeechForPreTraining"] * 2}, "models lists UniSpeechForPreTraining more than once"),
    ("near_tie", {"models": ["BertModel"]}, "models names an unknown model 'BertModel'"),
    ("ulp_noise", {"n_draws": 0}, "n_draws must be at least 1"),
    ("dac_propagation", {"seconds": 0.0}, "seconds must be at least 0.05"),
    ("dac_propagation", {"variant": "48khz"}, "variant names an unknown DAC variant '48khz'"),
    ("dac_batching", {"clip_seconds": [1.0, -0.5]}, "clip_seconds item -0.5 must be at least 0.05"),
    ("dac_batching", {"init": "xavier"}, "init names an unknown init 'xavier'; choose one of default"),
    ("environment", {"magnitudes": [0.0]}, "magnitudes item 0.0 must be at least 2.22507e-308"),
    ("environment", {"magnitudes": [1e-320]}, "(the smallest normal float64)"),
    ("near_tie", {"models": ["UniSpeechSatForPreTraining"]}, "models must include one of Wav2Vec2ForPreTraining"),
    ("near_tie", {"replay_seeds": [1.5]}, "replay_seeds item 1.5 must be a whole number"),
    ("near_tie", {"scheduler": "garbage"}, "scheduler must be empty (local processes) or a Dask scheduler's address"),
    ("near_tie", {"workers": 10_000}, "workers must be at most"),
    ("dac_propagation", {"seed": 2**64}, "seed must be at most"),
    ("dac_propagation", {"seconds": 1e-6}, "seconds must be at least 0.05"),
    ("dac_batching", {"clip_seconds": [0.5]}, "clip_seconds must list at least 2 items"),
    ("dac_batching", {"odd_lengths": [1.5]}, "odd_lengths item 1.5 must be a whole number"),
    ("ulp_noise", {"near_tie_run": "/nonexistent/run"}, "not a run folder"),
])
def test_a_value_outside_its_declared_range_is_named_with_its_study(study, values, message):
    with pytest.raises(StudyParameterError, match=f"^{study}: ") as raised:
        study_rules.check(study, values)
    assert message in str(raised.value)


def test_the_ulp_noise_study_lists_every_subject_including_the_dac_encoders():
    with pytest.raises(StudyParameterError) as raised:
        study_rules.check("ulp_noise", {"model": "Nope"})
    for name in names.NOISE_SUBJECTS:
        assert name in str(raised.value)
    assert "DacEncoder-44khz" in names.NOISE_SUBJECTS


def test_every_problem_is_listed_at_once():
    with pytest.raises(StudyParameterError) as raised:
        study_rules.check("near_tie", {"n_seeds": 0, "workers": -2, "models": []})
    assert str(raised.value).count(";") == 2


def test_a_study_without_declared_rules_accepts_any_value():
    assert study_rules.registration("a_study_with_no_rules") == study_rules.Registration()
    assert study_rules.check("a_study_with_no_rules", {"n_seeds": -1}) is None


def test_every_declared_parameter_exists_in_its_notebook():
    from exactness.workbook import catalog, parameters
    from exactness.workbook.project import Project

    studies = catalog.discover(Project.at(Path(__file__).resolve().parents[2]))
    ruled = {study: study_rules.registration(study).rules for study in studies}
    assert all(ruled.values()), f"studies without rules: {[s for s, r in ruled.items() if not r]}"
    for study, rules in ruled.items():
        declared = parameters.read_parameters(studies[study].notebook)
        assert set(rules) <= set(declared), f"{study}: rules for {set(rules) - set(declared)} that are no parameters"


def test_a_notebook_run_by_hand_is_refused_what_the_cli_refuses():
    namespace = {"variant": "tiny", "seconds": 0.01, "inits": ["default"], "unrelated": object()}
    with pytest.raises(StudyParameterError, match="seconds"):
        study_rules.check_namespace("dac_propagation", namespace)
    study_rules.check_namespace("dac_propagation", {**namespace, "seconds": 0.5})


def test_a_sweep_whose_last_seed_is_no_seed_is_refused():
    with pytest.raises(StudyParameterError, match=r"seed_start \+ n_seeds - 1 .* beyond the largest seed"):
        study_rules.check("near_tie", {"seed_start": 2**63 - 10, "n_seeds": 11})
    study_rules.check("near_tie", {"seed_start": 2**63 - 10, "n_seeds": 10})


def test_a_class_outside_the_registry_without_a_checkout_is_refused_before_a_run_starts():
    with pytest.raises(StudyParameterError, match="^discrete_ops: ") as raised:
        study_rules.check("discrete_ops", {"models": ["NoSuchModelAnywhere"], "transformers_tests": ""})
    assert "NoSuchModelAnywhere" in str(raised.value)
    study_rules.check("discrete_ops", {"models": ["BertModel"], "transformers_tests": ""})  # a registered class
