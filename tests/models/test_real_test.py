"""The replay in a checkout's real export test: seeded as the workbook seeds, the skip lifted, the comparison
narrowed to kept outputs, and its outcome set beside the workbook's.

The checkout is this project's small one with a runnable export test of its own: `test_onnx_export_static`
compares eager against a stand-in runtime that moves `pooler_output` on the seeds where the tester's first input
id is even XOR the seed's first pooler weight is positive, so its outcome depends on the inputs' seeding and on the
weights' alike."""

import shutil
from pathlib import Path

import pandas as pd
import pytest

from exactness.models import real_test, sources
from exactness.models.checkout_index import CheckoutError
from exactness.models.real_test import Outcome

CHECKOUT = Path(__file__).resolve().parents[1] / "fixtures" / "transformers_checkout"

RUNNABLE = '''

from transformers.testing_utils import set_config_for_less_flaky_test, set_model_for_less_flaky_test


def _moved(inputs, model) -> bool:
    return (int(inputs["input_ids"][0, 0]) % 2 == 0) != bool(model.pooler.dense.weight[0, 0] > 0)


def _test_onnx_export_static(self):
    for model_class in self.all_model_classes:
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        inputs = {k: v for k, v in self._prepare_for_class(inputs, model_class).items() if k != "labels"}
        set_config_for_less_flaky_test(config)
        model = model_class(config).eval()
        set_model_for_less_flaky_test(model)
        with torch.no_grad():
            expected = {k: v for k, v in model(**inputs).items() if isinstance(v, torch.Tensor)}
        actual = dict(expected)
        if _moved(inputs, model):
            actual["pooler_output"] = actual["pooler_output"] + 0.01
        if any(model_class.__name__ in EXPORT_SKIPS[s] for s in ("exactness", "onnx.exactness")):
            self.assertEqual(set(actual), set(expected))
            continue
        self._check_outputs_close(actual, expected, atol=1e-3, rtol=1e-3)


ExportTesterMixin.test_onnx_export_static = _test_onnx_export_static
'''


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> str:
    copy = tmp_path_factory.mktemp("runnable") / "transformers"
    shutil.copytree(CHECKOUT, copy)
    test = copy / "tests" / "exporters" / "test_export.py"
    test.write_text(test.read_text().replace(
        "from transformers.exporters.a_module_this_version_lacks import ExportHelper", "ExportHelper = object")
        + RUNNABLE)
    common = copy / "tests" / "test_modeling_common.py"
    common.write_text(common.read_text().replace(
        "class ModelTesterMixin:", "from .exporters.test_export import ExportTesterMixin  # noqa: E402\n\n\n"
                                   "class ModelTesterMixin(ExportTesterMixin):"))
    return str(copy)


def _workbook_says_moved(checkout: str, seed: int) -> bool:
    made = sources.make("BertModel", seed, checkout)
    return (int(made.inputs["input_ids"][0, 0]) % 2 == 0) != bool(made.model.pooler.dense.weight[0, 0] > 0)


def test_the_real_test_seeded_as_the_workbook_seeds_fails_exactly_where_the_workbooks_build_says(checkout):
    moved = {seed: _workbook_says_moved(checkout, seed) for seed in range(4)}
    assert set(moved.values()) == {True, False}  # the seeds tell the two apart
    for seed, fails in moved.items():
        replayed = real_test.replay(checkout, "BertModel", seed)
        assert replayed.outcome is (Outcome.FAILED if fails else Outcome.PASSED), replayed
        if fails:
            assert "Mismatched elements" in replayed.line and "pooler_output" in replayed.line


def test_the_skip_kept_or_the_comparison_narrowed_passes_a_failing_seed(checkout):
    seed = next(s for s in range(10) if _workbook_says_moved(checkout, s))
    assert real_test.replay(checkout, "BertModel", seed, lift=False).outcome is Outcome.PASSED  # names only
    kept = real_test.replay(checkout, "BertModel", seed, keep=("last_hidden_state",))
    assert kept.outcome is Outcome.PASSED and "comparing only last_hidden_state" in kept.words()


def test_a_class_the_replay_cannot_run_says_why(checkout):
    with pytest.raises(CheckoutError, match="GhostModel is in no all_model_classes"):
        real_test.replay(checkout, "GhostModel", 0)
    broken = real_test.replay(checkout, "BertForTokenClassification", 0)
    assert broken.outcome is Outcome.ERROR and "a_package_nobody_installed" in broken.line


def test_the_agreement_table_sets_each_replayed_seed_beside_the_workbooks(checkout):
    seeds = [0, 1, 2]
    workbook = pd.DataFrame({"model": "BertModel", "seed": seeds,
                             "test_rule_passed": [not _workbook_says_moved(checkout, s) for s in seeds]})
    table = real_test.agreement(checkout, workbook, keep={"BertModel": ("last_hidden_state",)})
    assert table["agree"].all() and list(table["seed"]) == seeds
    assert set(table["real test, outputs kept"]) == {"passed"}


def test_the_replay_command_prints_the_real_outcome_beside_the_workbooks(checkout, tmp_path, capsys):
    from exactness.workbook import cli

    run = tmp_path / "run"
    (run / "tables").mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    seed = next(s for s in range(10) if _workbook_says_moved(checkout, s))
    pd.DataFrame({"model": ["BertModel"], "seed": [seed], "test_rule_passed": [False]}).to_parquet(
        run / "tables" / "seeds.parquet")
    code = cli.main(["--out", str(tmp_path / "outputs"), "replay", checkout, "BertModel", str(seed), "--run", str(run)])
    said = capsys.readouterr().out.strip()
    assert code == 1 and said.startswith(f"BertModel seed {seed}: the real test failed (skip lifted)")
    assert said.endswith("; the workbook: failed")
