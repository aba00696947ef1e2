"""`check_seed` down each branch: a seed's own export, a swapped seed in the fed session, a defect in a session of
its own, eager's lookup plain or gathered, the what-if forward and the full tensor table on or off, and a pool
whose swap was refused exporting the seed fresh."""

import math

import pandas as pd
import pytest
import torch

from exactness.compare import export_rule
from exactness.models import wav2vec2_family as family
from exactness.runtimes import weight_swap
from exactness.runtimes.graph_pool import Case, GraphPool
from exactness.runtimes.speedup_paths import BuildPath
from exactness.studies.near_tie import study as near_tie
from exactness.studies.near_tie.check import check_seed, engine_outputs, output_table
from exactness.studies.near_tie.row import PATH_COLUMNS

MODEL = "Wav2Vec2ConformerForPreTraining"
ONE_THREAD = {"intra_op_threads": 1}


def _case(seed: int) -> Case:
    return Case(seed, family.build_model(MODEL, seed), family.tester_inputs(MODEL, seed))


@pytest.fixture(scope="module")
def pool():
    return near_tie.check_pool(MODEL, "static").prepare(_case(3), _case(8))


def _paths(check) -> tuple:
    return tuple(check.row.record()[c] for c in PATH_COLUMNS["checks"])


def _without_paths(check) -> dict:
    return {k: v for k, v in check.row.record().items() if k not in PATH_COLUMNS["checks"]}


def test_the_outputs_table_has_one_row_per_output_passing_alone_by_the_export_tests_rule():
    """Planted: a scalar off (no allowance), 3% of elements off (forgiven), 10% off (fails), an exact output and
    integer codes 1% off (forgiven, as `assert_close` counts integers too)."""
    eager = {"perplexity": torch.tensor(1.0), "forgiven": torch.zeros(100), "failing": torch.zeros(100),
             "exact": torch.ones(100), "codes": torch.arange(100)}
    ort = {"perplexity": torch.tensor(1.5), "forgiven": torch.zeros(100).index_fill(0, torch.arange(3), 1.0),
           "failing": torch.zeros(100).index_fill(0, torch.arange(10), 1.0), "exact": torch.ones(100),
           "codes": torch.arange(100).index_fill(0, torch.tensor([7]), 0)}
    labels = {"model": MODEL, "seed": 0, "shape_mode": "static"}
    table = output_table(engine_outputs(labels, ort, eager, None, None, 1e-3, 1e-3)).set_index("output")
    assert list(table.index) == sorted(eager)  # one row per output, in the order the export test walks them
    alone = {name: export_rule.export_test_rule({name: ort[name]}, {name: eager[name]}, 1e-3, 1e-3).passed
             for name in eager}
    assert table.passes_alone.to_dict() == alone == {"codes": True, "exact": True, "failing": False,
                                                     "forgiven": True, "perplexity": False}
    assert table.rule_mismatched.to_dict() == {"codes": 1, "exact": 0, "failing": 10, "forgiven": 3, "perplexity": 1}
    assert table.max_abs_diff.to_dict() == {"codes": 7.0, "exact": 0.0, "failing": 1.0, "forgiven": 1.0,
                                            "perplexity": 0.5}
    assert output_table([]).columns[-1] == "passes_alone" and output_table([]).passes_alone.dtype == bool


@pytest.mark.slow
def test_a_seed_with_its_own_export_runs_it_in_its_own_session_with_every_tensor(pool):
    check = check_seed(pool, 3, built=pool.template[1], session_options=ONE_THREAD)
    assert _paths(check) == ("build", "fresh_export", "per_seed", "plain", "gathered")
    assert check.row.defect is None and check.row.seed == 3 and check.row.shape_mode == "static"
    assert len(check.tensors) > 50  # every module's output, from a second run exposing them all
    assert not math.isnan(check.row.what_if.flip_perplexity_shift)  # one flip simulated on eager
    assert set(check.row.max_abs_diff) == set(check.outputs.output)
    assert len(check.delta) == math.prod(family.argmax_rows(MODEL))  # the gap noise of every argmax row


@pytest.mark.slow
def test_a_swapped_seed_runs_in_the_fed_session_and_equals_the_plain_path(pool):
    fast = check_seed(pool, 11, built=family.build_model(MODEL, 11), build_path=BuildPath.BUILD, all_tensors=False,
                      what_if=False, session_options=ONE_THREAD)
    assert _paths(fast) == ("build", "swap", "fed", "gathered", "gathered")
    assert set(fast.tensors.label) <= {"conv_features", "extract_features", "logits"}  # the named three only
    assert math.isnan(fast.row.what_if.flip_needed_rtol) and fast.row.what_if.fails_if_flipped is None
    plain_pool = near_tie.check_pool(MODEL, "static", fast_paths=False).prepare(_case(11))
    plain = check_seed(plain_pool, 11, all_tensors=False, what_if=False, session_options=ONE_THREAD,
                       fast_paths=False)
    assert _paths(plain) == ("build", "fresh_export", "per_seed", "plain", "plain")
    pd.testing.assert_frame_equal(pd.DataFrame([_without_paths(fast)]), pd.DataFrame([_without_paths(plain)]))
    assert fast.delta.tolist() == plain.delta.tolist()


def test_a_defect_runs_swapped_in_a_session_of_its_own_and_flips_a_confident_row(pool):
    defect = {"kind": "biased_code", "code": 0, "amount": 1.0}  # code 0 of group 0 wins every row of that group
    check = check_seed(pool, 11, defect=defect, all_tensors=False, what_if=False, session_options=ONE_THREAD)
    assert _paths(check)[1:3] == ("swap", "per_seed")
    assert check.row.defect == "quantizer.weight_proj.bias[0] + 1"
    assert check.row.gaps.n_flipped_rows > 0 and check.row.gaps.max_flip_margin > 0
    assert not check.row.rule.test_rule_passed


@pytest.mark.slow
def test_a_refused_swap_leaves_each_further_seed_its_own_export(monkeypatch):
    def refuse(*args):
        raise weight_swap.SwapError("initializer 'x' depends on the seed but matches no model tensor")

    monkeypatch.setattr(weight_swap, "learn", refuse)
    refused = GraphPool(MODEL, "static", exposed=family.check_exposed(MODEL)).prepare(_case(3), _case(8))
    check = check_seed(refused, 11, all_tensors=False, what_if=False, session_options=ONE_THREAD)
    assert _paths(check) == ("build", "fresh_export", "per_seed", "plain", "gathered")
    assert refused.exports == 3 and refused.swap_status.startswith("disabled: initializer 'x'")


def test_a_seed_whose_logits_are_nan_on_both_sides_is_counted_as_non_finite_never_as_a_tie(pool):
    """A seed that reads non-finite logits enters the reach rounds (the screen cannot measure its gap); its check
    must record the non-finite reads on both sides and its 'flips' among them, so that no verdict reads them as
    near-ties (the engine calls such a flip the model's `NAN_IN_EAGER`, never a tie)."""
    built = family.build_model(MODEL, 12)
    with torch.no_grad():
        built.quantizer.weight_proj.weight[3, :] = float("nan")  # one code's logit NaN in every row of group 0
    check = check_seed(pool, 12, built=built, all_tensors=False, what_if=False, session_options=ONE_THREAD)
    m = check.margin
    assert m.reads_nonfinite_eager == m.reads_nonfinite_ort > 0
    assert m.flipped_nonfinite == m.flipped > 0  # torch and ORT pick differently among NaNs: every such flip counted
    assert m.flipped_nan_eager == m.flipped and m.reads_nonfinite_ort_only == 0  # eager's own NaN weight
    assert math.isnan(check.row.gaps.min_gap) and not check.row.gaps.exact_tie
