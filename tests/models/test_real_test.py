"""The replay in a checkout's real export test: seeded as the workbook seeds, the skip lifted, the comparison
narrowed to kept outputs, and its outcome set beside the workbook's (on `runnable_checkout`)."""

import pandas as pd
import pytest

import runnable_checkout
from exactness.models import real_test
from exactness.models.checkout_index import CheckoutError
from exactness.models.real_test import Outcome


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> str:
    return runnable_checkout.make(tmp_path_factory.mktemp("runnable"))


@pytest.mark.slow
def test_the_real_test_seeded_as_the_workbook_seeds_fails_exactly_where_the_workbooks_build_says(checkout):
    moved = {seed: runnable_checkout.moved(checkout, seed) for seed in range(4)}
    assert set(moved.values()) == {True, False}  # the seeds tell the two apart
    for seed, fails in moved.items():
        replayed = real_test.replay(checkout, "BertModel", seed)
        assert replayed.outcome is (Outcome.FAILED if fails else Outcome.PASSED), replayed
        if fails:
            assert "Mismatched elements" in replayed.line and "pooler_output" in replayed.line


@pytest.mark.slow
def test_the_skip_kept_or_the_comparison_narrowed_passes_a_failing_seed(checkout):
    seed = next(s for s in range(10) if runnable_checkout.moved(checkout, s))
    assert real_test.replay(checkout, "BertModel", seed, lift=False).outcome is Outcome.PASSED  # names only
    kept = real_test.replay(checkout, "BertModel", seed, keep=("last_hidden_state",))
    assert kept.outcome is Outcome.PASSED and "comparing only last_hidden_state" in kept.words()


@pytest.mark.slow
def test_a_class_the_replay_cannot_run_says_why(checkout):
    with pytest.raises(CheckoutError, match="GhostModel is in no all_model_classes"):
        real_test.replay(checkout, "GhostModel", 0)
    broken = real_test.replay(checkout, "BertForTokenClassification", 0)
    assert broken.outcome is Outcome.ERROR and "a_package_nobody_installed" in broken.line


@pytest.mark.slow
def test_the_agreement_table_sets_each_replayed_seed_beside_the_workbooks(checkout):
    seeds = [0, 1, 2]
    workbook = pd.DataFrame({"model": "BertModel", "seed": seeds,
                             "test_rule_passed": [not runnable_checkout.moved(checkout, s) for s in seeds]})
    table = real_test.agreement(checkout, workbook, keep={"BertModel": ("last_hidden_state",)})
    assert table["agree"].all() and list(table["seed"]) == seeds
    assert set(table["real test, outputs kept"]) == {"passed"}


@pytest.mark.slow
def test_the_replay_command_prints_the_real_outcome_beside_the_workbooks(checkout, tmp_path, capsys):
    from exactness.workbook import cli

    run = tmp_path / "run"
    (run / "tables").mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    seed = next(s for s in range(10) if runnable_checkout.moved(checkout, s))
    pd.DataFrame({"model": ["BertModel"], "seed": [seed], "test_rule_passed": [False]}).to_parquet(
        run / "tables" / "seeds.parquet")
    code = cli.main(["--out", str(tmp_path / "outputs"), "replay", checkout, "BertModel", str(seed), "--run", str(run)])
    said = capsys.readouterr().out.strip()
    assert code == 1 and said.startswith(f"BertModel seed {seed}: the real test failed (skip lifted)")
    assert said.endswith("; the workbook: failed")
