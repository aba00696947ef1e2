"""The discrete-ops verdicts and findings on made-up tables: each verdict word and sentence follows the data,
and a contrary table turns it."""

import numpy as np
import pandas as pd
import pytest

from exactness.runtimes.discrete_scan import FOLLOWS_CHOICE
from exactness.studies.discrete_ops import findings as f
from exactness.studies.discrete_ops import verdicts as v

MODEL = "ExampleModel"


def _tables(category="topk", can_flip=True, flips=(), ties=(), seeds=4, plain_ulps=4.0, forced_ulps=1.0,
            mismatched=0, model=MODEL, scope="head"):
    """One class, one discrete op on output `y`: the seeds in `flips` flipped (at an exact tie where also in
    `ties`); their outputs differ by a lot until ORT's choices are forced, then by `forced_ulps`."""
    key = {"model": model, "shape_mode": "static"}
    graphs = pd.DataFrame([{**key, "error": "", "seeds": seeds}])
    ops = pd.DataFrame([{**key, "node": "op", "op_type": "TopK" if category == "topk" else "ArgMax",
                         "category": category, "scope": scope, "reaches_outputs": ["y"], "on_output_path": True,
                         "can_flip": can_flip, "not_counted": "" if can_flip else FOLLOWS_CHOICE}])
    margins = pd.DataFrame([{**key, "seed": s, "node": "op", "op_type": ops.op_type[0], "category": category,
                             "flipped": float(s in flips), "exact_ties": int(s in ties),
                             "min_margin": 0.0 if s in ties else 1e-7} for s in range(seeds)])
    outputs = pd.DataFrame([{**key, "seed": s, "output": "y", "max_abs_diff": 0.5 if s in flips else 1e-6,
                             "max_ulps_of_scale": 1e6 if s in flips else plain_ulps,
                             "mismatched": 3 if s in flips else mismatched,
                             "forced_max_abs_diff": 1e-7 if s in flips else np.nan,
                             "forced_max_ulps_of_scale": forced_ulps if s in flips else np.nan,
                             "forced_mismatched": 0 if s in flips else np.nan, "seed_flipped": s in flips}
                            for s in range(seeds)])
    return graphs, ops, margins, outputs


def _verdict(**kwargs):
    table, counterfactual = v.verdicts(*_tables(**kwargs))
    return table.iloc[0], counterfactual


@pytest.mark.parametrize("kwargs, expected", [
    ({"flips": (0, 1), "ties": (0, 1)}, v.EXACT_TIES),
    ({"flips": (0, 1), "ties": (0,)}, v.NEAR_TIES),  # one flip came from a near-tie, not an exact one
    ({"flips": (0, 1), "ties": (0, 1), "forced_ulps": 1e5}, v.UNEXPLAINED),  # forcing leaves a difference
    ({}, v.NEVER_FLIPPED),
    ({"mismatched": 2}, v.UNEXPLAINED),  # outputs differ with no flip at a matched op: not "never flipped"
    ({"can_flip": False}, v.NO_DISCRETE),
    ({"can_flip": False, "flips": (0,)}, v.UNEXPLAINED),  # an op left out that flips anyway is not noise
    ({"can_flip": False, "mismatched": 2}, v.NOISE_ONLY),  # values differ beyond the test's tolerance
    ({"category": "random"}, v.RANDOM),
])
def test_each_verdict_follows_its_table_and_a_contrary_table_turns_it(kwargs, expected):
    row, _ = _verdict(**kwargs)
    assert row.verdict == expected


def test_rates_and_tie_fraction_count_seeds_with_their_interval():
    row, counterfactual = _verdict(flips=(0, 1), ties=(0,), seeds=4)
    assert (row.flip_rate, row.tie_fraction) == (0.5, 0.25) and row.rate_low < 0.5 < row.rate_high
    assert set(counterfactual.seed) == {0, 1} and counterfactual.explained_by_flip.all()
    assert row.noise_bound_ulps == max(v.NOISE_FLOOR_ULPS, 2 * 4.0)  # measured on seeds without a flip


def test_the_seed_class_rate_is_not_comparable_when_no_outcome_below_could_contradict_it():
    verdicts, _ = v.verdicts(*_tables(model=f.SEED_MODEL, scope="quantizer", category="argmax", seeds=50))
    graphs, ops, margins, outputs = _tables(model=f.SEED_MODEL, scope="quantizer", category="argmax", seeds=50)
    finding = f.seed_class_rate(verdicts, margins, ops)
    assert finding.verdict == "not comparable" and "0 seeds with a flipped" in finding.claim
    assert f"{f.seeds_for_power(17, 40000):,}" in finding.why


@pytest.mark.parametrize("seeds, flips, expected", [
    (50, (3,), "differs"),  # one flip in 50 is far above 17 in 40,000: a small sample can contradict upwards
    (20000, (), "differs"),  # about 8 were expected: none contradicts the seed
    (20000, tuple(range(9)), "reproduced"),
])
def test_the_seed_class_rate_verdict_turns_with_the_count(seeds, flips, expected):
    tables = _tables(model=f.SEED_MODEL, scope="wav2vec2_conformer.quantizer", category="argmax", seeds=seeds,
                     flips=flips)
    verdicts, _ = v.verdicts(*tables)
    assert f.seed_class_rate(verdicts, tables[2], tables[1]).verdict == expected


def test_the_seed_class_rate_counts_only_the_quantizer_argmax():
    tables = _tables(model=f.SEED_MODEL, scope="encoder.layers.0.self_attn", category="topk", seeds=50, flips=(1,))
    verdicts, _ = v.verdicts(*tables)
    finding = f.seed_class_rate(verdicts, tables[2], tables[1])
    assert finding.verdict == "not comparable" and "not the measure" in finding.why


def test_the_left_out_ops_are_named_with_their_reason_and_a_table_without_any_says_so():
    _, ops, _, _ = _tables(can_flip=False)
    finding = f.not_counted(ops)
    assert "1 of 1 discrete ops" in finding.claim and FOLLOWS_CHOICE in finding.claim and MODEL in finding.claim
    _, counted, _, _ = _tables()
    assert "all count" in f.not_counted(counted).claim


def test_the_counterfactual_finding_says_where_forcing_leaves_a_difference():
    _, good = _verdict(flips=(0, 1), ties=(0, 1))
    _, bad = _verdict(flips=(0, 1), ties=(0, 1), forced_ulps=1e5)
    assert "every mismatch there is the flipped choice" in f.counterfactual(good).claim
    assert f"a difference remains on 2 ({MODEL})" in f.counterfactual(bad).claim
    assert "nothing for the counterfactual" in f.counterfactual(bad.iloc[:0]).claim


def test_the_skip_reason_finding_turns_with_the_verdict():
    tied = _tables(model="XLMForQuestionAnswering", flips=(0, 1), ties=(0, 1))
    quiet = _tables(model="XLMForQuestionAnswering")
    holds, _ = v.verdicts(*tied)
    fails, _ = v.verdicts(*quiet)
    assert "for 1 of 1 skipped classes (XLMForQuestionAnswering)" in f.skip_reasons(holds).claim
    assert "for 0 of 1" in f.skip_reasons(fails).claim and "it does not for XLMForQuestionAnswering" in \
        f.skip_reasons(fails).claim
    assert "XLMForQuestionAnswering (claimed exact tie at TopK, measured no flip)" in f.skip_reasons(fails).claim
    assert f.control(holds) is None and f.control(v.verdicts(*_tables(can_flip=False))[0]) is not None


def test_a_class_beyond_the_tolerance_is_not_called_a_control():
    noisy, _ = v.verdicts(*_tables(can_flip=False, mismatched=2))
    assert f.control(noisy) is None and "differ beyond the test's tolerance" in f.noise_only(noisy).claim
    clean, _ = v.verdicts(*_tables(can_flip=False))
    assert f.noise_only(clean) is None and MODEL in f.control(clean).claim


def test_a_remaining_mismatch_leaves_the_skip_reason_undecided():
    verdicts, _ = v.verdicts(*_tables(model="XLMForQuestionAnswering", flips=(0,), ties=(0,), forced_ulps=1e5))
    assert verdicts.iloc[0].verdict == v.UNEXPLAINED and verdicts.iloc[0].reason_holds is None
    assert "undecided for XLMForQuestionAnswering" in f.skip_reasons(verdicts).claim


def test_the_report_sections_sentences_follow_their_tables():
    from exactness.studies.discrete_ops import sections

    graphs, ops, margins, outputs = _tables(model="XLMForQuestionAnswering", flips=(0, 1), ties=(0,))
    failed = pd.concat([graphs, pd.DataFrame([{"model": "BrokenModel", "shape_mode": "static", "error": "E: no"}])])
    assert sections.graphs(failed.assign(exports=[2, 1], export_seconds=[3.0, 1.0])).sentence == (
        "1 of 2 graphs exported; failed: BrokenModel; 3 fresh exports took 4 s.")
    assert sections.ops(ops).sentence.startswith("1 of 1 discrete ops can flip and reach an output, in 1 of 1")
    assert sections.ops(ops.assign(can_flip=False, not_counted=FOLLOWS_CHOICE)).sentence.startswith("0 of 1")
    assert sections.ops(ops.iloc[:0]).sentence == "No graph has a discrete op."
    margins = margins.assign(min_margin_ulps=[0.0, 2.5, 3.0, 4.0], read_noise_ulps=1.0, match_verified=True,
                             decisions=5)
    verdicts, counterfactual = v.verdicts(graphs, ops, margins, outputs)
    margin = sections.margins(margins, ops, verdicts)
    assert margin.extra == {"live": {("XLMForQuestionAnswering", "op")}, "noise": {"XLMForQuestionAnswering": 1.0}}
    assert margin.sentence == "Exact ties in 1 of 1 ops; every op's smallest margin is an exact tie."
    equal_holds = sections.margins(margins, ops.assign(op_type="Equal", category="compare"), verdicts)
    assert equal_holds.sentence.startswith("Exact ties in 0 of 1 ops")  # an Equal that holds is not a tie
    untied = margins.assign(exact_ties=0, min_margin_ulps=[2.5, 3.0, 4.0, 5.0])
    assert sections.margins(untied, ops, verdicts).sentence == (
        "Exact ties in 0 of 1 ops; the smallest non-zero margin is 2.5 ulps.")
    assert "nothing to measure" in sections.margins(margins, ops.assign(can_flip=False), verdicts).sentence
    assert sections.counterfactual(counterfactual).sentence == (
        "Forcing ORT's choices explains every output on 2 of 2 flipped seeds.")
    unexplained = v.verdicts(*_tables(flips=(0, 1), ties=(0, 1), forced_ulps=1e5))[1]
    assert "on 0 of 2 flipped seeds" in sections.counterfactual(unexplained).sentence
    # XLM's reason claims an exact tie at TopK: one of two flips was a near-tie, so it does not hold
    assert sections.verdicts(verdicts).sentence == (
        f"1 class graphs: 1 {v.NEAR_TIES}. The skip's stated reason holds for 0 of the 1 skipped classes, not for 1.")
    tied = v.verdicts(*_tables(model="XLMForQuestionAnswering", flips=(0, 1), ties=(0, 1)))[0]
    assert "holds for 1 of the 1 skipped classes." in sections.verdicts(tied).sentence


def test_the_summary_names_each_class_verdict_and_leaves_unchecked_classes_without_a_rate():
    from exactness.studies.discrete_ops import sections

    checked = v.verdicts(*_tables(flips=(0, 1), ties=(0, 1)))[0]
    failed = pd.DataFrame([{"model": "BrokenModel", "verdict": v.EXPORT_FAILED, "seeds": 0, "flip_rate": np.nan}])
    summary = sections.summary(pd.concat([checked, failed], ignore_index=True), 4)
    assert summary["classes"] == 2 and summary["seeds"] == 4
    assert summary["verdicts"] == {MODEL: v.EXACT_TIES, "BrokenModel": v.EXPORT_FAILED}
    assert summary["flip_rate"] == {MODEL: 0.5}


def test_a_run_of_one_class_with_no_discrete_op_at_all_gets_a_verdict():
    graphs, _, _, outputs = _tables()
    verdicts, counterfactual = v.verdicts(graphs, pd.DataFrame(), pd.DataFrame(), outputs.drop(
        columns=["forced_max_abs_diff", "forced_max_ulps_of_scale", "forced_mismatched"]))
    assert verdicts.iloc[0].verdict == v.NO_DISCRETE and verdicts.iloc[0].discrete_ops == 0 and not len(counterfactual)
