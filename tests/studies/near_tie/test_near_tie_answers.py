"""The near-tie answer line per class: the engine's verdict on the quantizer's screen and checks. Tests of the
science assert on the verdict's evidence (`near_tie.engine_tables.class_verdicts`); a few assert on the words."""

import re

import pandas as pd
import pytest

from exactness.causes import Cause
from exactness.compare.rates import PER, RatePolicy, estimate, wilson_interval
from exactness.engine.evidence import DefectSign, Undecided
from exactness.engine.rows import MarginRow, OutputRow, frame
from exactness.engine.verdict_words import action_of, proof_of, refutation_of
from exactness.studies.near_tie import answers, engine_tables

SEED_MODEL = "Wav2Vec2ConformerForPreTraining"
OUTPUTS = ("codevector_perplexity", "projected_quantized_states", "projected_states")
NUMEL = {"codevector_perplexity": 1, "projected_quantized_states": 7280, "projected_states": 7280}


def _screen(model, n, below, exact=0):
    gaps = [0.0] * exact + [1e-6] * (below - exact) + [1e-2] * (n - below)
    return pd.DataFrame({"model": model, "seed": range(n), "min_gap": gaps,
                         "smallest_gap_ulps": [g / 1.2e-7 for g in gaps]})


def _run(model, flipped, passed, margin_ulps=None, moved=None, noise_ulps=20.0, start=0):
    """(checks, outputs, margins) of checks on seeds start.. : `flipped` rows per seed, the rule's verdict, eager's
    margin at the flip in ulps, and per output the elements a flip moved beyond the tolerance."""
    n = len(flipped)
    margin_ulps = margin_ulps or [8.0] * n
    moved = moved or {"codevector_perplexity": 1, "projected_quantized_states": 16}
    seeds = range(start, start + n)
    checks = pd.DataFrame({"model": model, "seed": seeds, "shape_mode": "static", "n_flipped_rows": flipped,
                           "test_rule_passed": passed, "first_failing_output": "", "rule_forgiven": False,
                           "never_compared": [[] for _ in seeds], "reference": "float64, eager's codes forced",
                           "weights_path": "swapped"})
    margins, outputs = [], []
    for seed, rows, margin in zip(seeds, flipped, margin_ulps, strict=True):
        margins.append(MarginRow(model, "static", seed, "quantizer.argmax", "ArgMax", "argmax", "by name", 364,
                                 min_margin_ulps=margin, match_verified=True, match_trusted=True,
                                 read_noise_ulps=noise_ulps, flipped=float(rows),
                                 flipped_margin_ulps=margin if rows else float("nan")))
        for name in OUTPUTS:
            reached = bool(rows) and name != "projected_states"
            outputs.append(OutputRow(
                model, "static", seed, name, True, True, numel=NUMEL[name], zero_dim=name == "codevector_perplexity",
                rule_mismatched=moved.get(name, 0) if reached else 0, eager_f64_err=1e-7, ort_f64_err=1e-7,
                scale_ulp=1e-7, noise_bound=1.6e-6, within_noise=None if reached else True, reached_by_flip=reached,
                forced_max_abs_diff=0.0 if reached else float("nan"), explained_by_flip=True if reached else None,
                planted_few_1x=3, planted_few_10x=3, planted_few_100x=3, planted_nan=1, planted_shift=NUMEL[name]))
    return checks, frame(outputs, OutputRow), frame(margins, MarginRow)


def _verdict(screen, run, **kw):
    (found,) = engine_tables.class_verdicts(screen, *run, threshold=1e-4, **kw)
    return found


def test_flipped_near_ties_are_a_near_tie_with_the_rate_from_the_one_estimate_and_the_moved_outputs_excluded():
    run = _run(SEED_MODEL, [1, 1, 1, 0], [False, False, True, True])
    v = _verdict(_screen(SEED_MODEL, 4000, 4), run)
    assert v.cause is Cause.NEAR_TIE and v.evidence.flips.seeds == 3
    assert v.exclude == ["codevector_perplexity", "projected_quantized_states"] and v.compare == ["projected_states"]
    assert v.verification.holds  # projected_states passes on every checked seed
    low, high = wilson_interval(2, 4000)
    assert (v.failures.per, v.failures.low, v.failures.high) == pytest.approx((20, PER * low, PER * high))
    assert v.failures == estimate(2, 4, 4, 4000)
    (line,) = answers.answers(_screen(SEED_MODEL, 4000, 4), *run, threshold=1e-4)
    assert line.rate.endswith("; 2 of 4,000 seeds)") and line.flips.endswith("; 3 of 4,000 seeds)")
    assert line.action == "compare projected_states; exclude codevector_perplexity, projected_quantized_states"


def test_a_tie_aware_comparison_is_offered_only_where_it_was_measured_to_keep_value_checks():
    screen, (checks, outputs, margins) = _screen(SEED_MODEL, 4000, 4), _run(SEED_MODEL, [1, 1, 1, 0],
                                                                           [False, False, True, True])
    defects = pd.DataFrame({"model": SEED_MODEL, "shape_mode": "static", "required": [True, True],
                            "caught_by_tie_aware": [True, True], "caught_by_test_rule": [True, False]})
    judged = checks.assign(tie_aware_passed=True)
    (kept,) = answers.answers(screen, judged, outputs, margins, threshold=1e-4, defects=defects)
    assert kept.action.startswith("compare codevector_perplexity, projected_quantized_states tie-aware (measured "
                                  "here to pass every check and catch every required planted defect)")
    assert kept.action.endswith("; or, without a tie-aware check, compare projected_states; exclude "
                                "codevector_perplexity, projected_quantized_states")
    assert engine_tables.tie_aware_kept(judged, defects) == {SEED_MODEL}
    missed = defects.assign(caught_by_tie_aware=[True, False])  # 1 of 2 required defects caught
    failed = judged.assign(tie_aware_passed=[True, False, True, True])  # one check it does not pass
    unjudged = judged.assign(tie_aware_passed=[True, None, True, True])  # one check never judged
    other = defects.assign(model="UniSpeechForPreTraining")  # another class's defects say nothing of this one
    dynamic = defects.assign(shape_mode="dynamic")  # nor another shape mode's
    for c, d in ((judged, missed), (failed, defects), (unjudged, defects), (judged, other), (judged, dynamic),
                 (checks, defects)):
        assert engine_tables.tie_aware_kept(c, d) == frozenset()
        (line,) = answers.answers(screen, c, outputs, margins, threshold=1e-4, defects=d)
        assert line.action == "compare projected_states; exclude codevector_perplexity, projected_quantized_states"


def test_every_flip_on_an_exact_tie_is_an_exact_tie_and_a_flip_beyond_the_noise_is_a_defect():
    ties = _verdict(_screen(SEED_MODEL, 100, 2, exact=2), _run(SEED_MODEL, [1, 1], [False, False], [0.0, 0.0]))
    assert ties.cause is Cause.EXACT_TIE and ties.evidence.flips.exact
    far = _verdict(_screen(SEED_MODEL, 100, 2), _run(SEED_MODEL, [0, 1], [True, False], [9.0, 5000.0]))
    assert far.cause is Cause.DEFECT and far.evidence.defect.sign is DefectSign.FLIP_BEYOND_REACH
    assert far.evidence.defect.seed == 1 and far.evidence.defect.reach_ulps == pytest.approx(80.0)  # 4 x 20 ulps


def test_a_flip_forcing_does_not_explain_is_a_defect():
    checks, outputs, margins = _run(SEED_MODEL, [1], [False])
    outputs.loc[outputs.output == "projected_quantized_states", ["explained_by_flip", "forced_max_abs_diff"]] = \
        [False, 0.5]
    v = _verdict(_screen(SEED_MODEL, 100, 1), (checks, outputs, margins))
    assert v.cause is Cause.DEFECT and v.evidence.defect.sign is DefectSign.NOT_EXPLAINED


def test_no_flip_in_few_seeds_is_undecided_with_the_seeds_that_decide_and_enough_seeds_never_flip():
    run = _run(SEED_MODEL, [0], [True])
    few = _verdict(_screen(SEED_MODEL, 200, 1), run)
    assert few.cause is Cause.UNDECIDED and few.evidence.undecided is Undecided.TOO_FEW_SEEDS
    needed = RatePolicy().seeds_needed()
    assert few.seeds_needed == needed and f"-p n_seeds {needed}" in action_of(few)
    assert "flip rate's one-sided 95% bound falls below the rate asked (about 1 in " in action_of(few)  # a bound
    enough, short = (_verdict(_screen(SEED_MODEL, n, 1), run) for n in (needed, needed - 1))
    assert (enough.cause, short.cause) == (Cause.NEVER_FLIPS, Cause.UNDECIDED)


def test_values_beyond_float64s_noise_without_a_flip_are_a_defect_not_a_tie():
    checks, outputs, margins = _run(SEED_MODEL, [0], [False])
    wrong = outputs.output == "projected_states"
    outputs.loc[wrong, ["ort_f64_err", "within_noise"]] = [1e-3, False]
    v = _verdict(_screen(SEED_MODEL, 100, 1), (checks, outputs, margins))
    assert v.cause is Cause.DEFECT and v.evidence.defect.sign is DefectSign.BEYOND_NOISE
    assert v.evidence.defect.output == "projected_states"


def test_a_capped_check_gives_a_range_up_to_every_unchecked_candidate():
    v = _verdict(_screen(SEED_MODEL, 2000, 10), _run(SEED_MODEL, [1, 0, 0, 0], [False, True, True, True]))
    expected = estimate(1, 4, 10, 2000)
    assert expected.worst_case and v.failures == expected
    assert v.failures.high == pytest.approx(PER * 7 / 2000) and v.failures.low == pytest.approx(PER / 2000)


def test_a_class_that_never_calls_its_quantizer_is_nothing_reaches_and_its_skip_reason_is_set_against_it():
    screen = _screen(SEED_MODEL, 10, 0).iloc[:0]
    (line,) = answers.answers(screen, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), 1e-4,
                              immune=["UniSpeechSatForPreTraining"])
    assert line.cause == "nothing reaches" and line.flips.startswith("never")
    # no op flips, but no seed's values were checked: the failure rate is not measured, not "never"
    assert line.failures_per_40000 is None and line.rate.startswith("not measured: no seed checked")
    assert line.seeds == 0  # the index sets such a line below one on counted seeds
    assert "has the same argmax" in line.proof and "does not hold" in line.proof
    assert "remove the skip" not in line.action  # the export test does not skip it: nothing to remove
    (verdict,) = engine_tables.class_verdicts(screen, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), 1e-4,
                                              immune=["UniSpeechSatForPreTraining", "Data2VecAudioForPreTraining"])[:1]
    assert (verdict.evidence.never_called, verdict.evidence.never_called_op) == ("quantizer", "argmax")
    assert verdict.evidence.quoted_skip[0] == "#50575 (section 5)"
    assert "its forward never runs that argmax" in proof_of(verdict)
    other = engine_tables.class_verdicts(screen, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), 1e-4,
                                         immune=["Data2VecAudioForPreTraining"])[0]
    assert other.evidence.quoted_skip == () and "skipped it because" not in proof_of(other)  # no reason was given


def test_each_class_excludes_only_what_its_own_flips_moved():
    other = "Wav2Vec2ForPreTraining"
    mine, theirs = _run(SEED_MODEL, [1], [False]), _run(other, [1], [False], moved={"codevector_perplexity": 1})
    run = tuple(pd.concat([a, b], ignore_index=True) for a, b in zip(mine, theirs, strict=True))
    screen = pd.concat([_screen(SEED_MODEL, 100, 1), _screen(other, 100, 1)])
    found = {v.model: v for v in engine_tables.class_verdicts(screen, *run, threshold=1e-4)}
    assert found[SEED_MODEL].exclude == ["codevector_perplexity", "projected_quantized_states"]
    assert found[other].exclude == ["codevector_perplexity"]
    assert found[other].compare == ["projected_quantized_states", "projected_states"]


def test_the_rate_words_have_the_one_shape():
    run = _run(SEED_MODEL, [1, 1, 1, 0], [False, False, True, True])
    (line,) = answers.answers(_screen(SEED_MODEL, 4000, 4), *run, threshold=1e-4)
    numbers = [float(x.replace(",", "")) for x in re.findall(r"\d[\d,]*\.?\d*", line.rate.replace("95%", ""))]
    low, high = wilson_interval(2, 4000)
    assert numbers[:6] == pytest.approx([1, 2000, 1, 1 / low, 1, 1 / high], rel=0.05)


def test_a_random_draw_claim_is_refuted_by_the_measured_cause_never_by_a_graph_the_study_did_not_scan():
    model = "Wav2Vec2ForPreTraining"  # its skip claims a Gumbel-softmax draw
    v = _verdict(_screen(model, 100, 1), _run(model, [1], [False]))
    assert v.cause is Cause.NEAR_TIE and v.reason_holds is False
    assert "measured: near-tie" in refutation_of(v) and "no random op" not in refutation_of(v)


def test_a_class_with_no_check_is_undecided_never_said_never_to_flip():
    screen = _screen(SEED_MODEL, 40_000, 0)  # no seed below the threshold: nothing compared
    v = _verdict(screen, (pd.DataFrame(), pd.DataFrame(), pd.DataFrame()))
    assert v.cause is Cause.UNDECIDED and v.evidence.undecided is Undecided.NO_REFERENCE
    assert "remove the skip" not in action_of(v)


def test_a_seed_within_the_engines_reach_but_beyond_the_threshold_is_in_reach_and_unchecked_widens_the_rate():
    screen = _screen(SEED_MODEL, 4000, 2)
    screen.loc[10, ["min_gap", "smallest_gap_ulps"]] = [2e-4, 50.0]  # above the threshold, within 80 ulps
    v = _verdict(screen, _run(SEED_MODEL, [1, 0], [False, True]))
    assert v.candidates == 3 and v.checked_candidates == 2  # the engine's reach (4 x 20 ulps) takes seed 10 in
    assert v.failures.worst_case and v.failures.high == pytest.approx(PER * 2 / 4000)


def test_the_study_checks_the_seeds_beyond_its_threshold_that_the_engines_reach_takes_in():
    from exactness.engine.rows import MarginRow, frame
    from exactness.studies.near_tie import study

    screen = pd.DataFrame({"model": SEED_MODEL, "seed": [0, 1, 2, 3], "min_gap": [1e-6, 5e-3, 2e-4, 1e-3],
                           "smallest_gap_ulps": [8.0, 40.0, 70.0, 900.0]})
    rows = [MarginRow(SEED_MODEL, "static", 0, "quantizer.argmax", "ArgMax", "argmax", "by name",
                      match_verified=True, read_noise_ulps=20.0)]
    assert study.in_reach_beyond(screen, {0}, rows) == [1, 2]  # within 4 x 20 ulps; 900 is not
    assert study.in_reach_beyond(screen, {0}, rows, cap=1) == [1]  # a budget takes the smallest gaps first
    swapped = screen.assign(smallest_gap_ulps=[8.0, 70.0, 40.0, 900.0])
    assert study.in_reach_beyond(swapped, {0}, rows, cap=1) == [2]  # (returned in seed order)
    assert study.in_reach_beyond(screen.drop(columns="smallest_gap_ulps"), {0}, rows) == []
    assert frame(rows, MarginRow).read_noise_ulps.tolist() == [20.0]


def test_an_output_of_another_shape_reaches_the_engine_as_a_shape_defect_with_its_element_count():
    import torch

    from exactness.engine import verdicts
    from exactness.studies.near_tie import check

    eager = {"codevector_perplexity": torch.tensor(3.0), "projected_states": torch.zeros(2, 3)}
    ort = {"codevector_perplexity": torch.tensor(3.0), "projected_states": torch.zeros(3, 2)}
    labels = {"model": SEED_MODEL, "seed": 0, "shape_mode": "static"}
    reference = {k: v.double() for k, v in eager.items()}
    rows = check.engine_outputs(labels, ort, eager, None, reference, 1e-3, 1e-3)
    table = check.output_table(rows)
    shaped = table.set_index("output").loc["projected_states"]
    assert shaped.numel == 6 and not shaped.same_shape and shaped.rule_mismatched == 6 and not shaped.passes_alone
    assert table.set_index("output").loc["codevector_perplexity"].within_noise
    assert not verdicts.verify(table, ["codevector_perplexity", "projected_states"]).holds


def test_the_rates_table_states_the_answers_rate_over_the_seeds_within_reach():
    from exactness.studies.near_tie.rate import buckets
    from exactness.studies.near_tie.sentences import rates_table

    screen, run = _screen(SEED_MODEL, 4000, 4), _run(SEED_MODEL, [1, 1, 1, 0], [False, False, True, True])
    shown = rates_table(buckets(screen, *run, threshold=1e-4))
    assert list(shown.columns)[-2:] == ["one_in", "rate"]  # the estimate worded in its place, the table as kept
    (row,) = shown.itertuples()
    (line,) = answers.answers(screen, *run, threshold=1e-4)
    assert (row.screened, row.candidates, row.checked, row.flipped, row.failed, row.flipped_but_passed) == \
        (4000, 4, 4, 3, 2, 1)
    assert row.rate == line.rate and row.failure_rate == pytest.approx(2 / 4000) and row.one_in == 2000
    # a capped check: the table's rate is the answer's worst-case range, never a lower bound said as a rate
    capped = tuple(t[t.seed < 2] if "seed" in t else t for t in run)
    counted = buckets(_screen(SEED_MODEL, 200, 4), *capped, threshold=1e-4)
    assert counted.estimate[0].worst_case and (counted.estimate[0].observed, counted.estimate[0].checked) == (2, 2)
    (row,) = rates_table(counted).itertuples()
    (line,) = answers.answers(_screen(SEED_MODEL, 200, 4), *capped, threshold=1e-4)
    assert row.rate == line.rate and "worst case" in row.rate and (row.candidates, row.checked) == (4, 2)
    assert row.worst_case and row.checked_candidates == 2
    # a class checked but never screened has no seeds to state a rate over: left out, not a crash
    other = tuple(t.assign(model="UniSpeechForPreTraining") for t in capped)
    both = tuple(pd.concat([a, b], ignore_index=True) for a, b in zip(capped, other, strict=True))
    assert buckets(_screen(SEED_MODEL, 200, 4), *both, threshold=1e-4).model.tolist() == [SEED_MODEL]


def test_none_in_n_seeds_has_one_bound_on_every_page():
    """The answer's none, the rates table's and a finding's: the one-sided 95% bound verdicts decide by."""
    from exactness.workbook import wording
    from exactness.workbook.findings import rate_text

    bound = wording.one_in(RatePolicy().upper_bound(200))
    assert bound == "1 in 67"
    assert wording.rate(0, 200) == f"none in 200 seeds: at most {bound} (95% bound)"
    assert rate_text(0, 200) == f"no failures in 200 seeds: at most {bound} (95% bound)"
    words = answers.engine_answers.rate_words(estimate(0, 3, 3, 200))
    assert words == f"none in 200 seeds: at most {bound} (95% bound)"
    assert estimate(0, 3, 3, 200).high == pytest.approx(PER * RatePolicy().upper_bound(200))  # the numbers too
