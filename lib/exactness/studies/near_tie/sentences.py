"""The near-tie notebook's computed sentences and derived tables: every count, ratio and comparison a cell
states. Each takes the study's tables and returns a sentence or a table; the notebook only shows them."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from exactness import published
from exactness.studies.near_tie import cpu_kernel_sets as near_tie_kernels
from exactness.studies.near_tie import findings as near_tie_findings
from exactness.studies.near_tie import prediction as near_tie_prediction
from exactness.studies.near_tie import rate as near_tie_rate
from exactness.studies.near_tie.planted import DefectTally, size_words
from exactness.studies.near_tie.scale import is_candidate
from exactness.workbook import findings
from exactness.workbook.parameter_rules import StudyParameterError
from exactness.workbook.presentation import plural
from exactness.workbook.wording import count


def check_kernel_sets(cpu_kernels) -> None:
    """This CPU must offer every kernel set in `cpu_kernels`, before any work."""
    if problems := near_tie_kernels.unavailable(cpu_kernels):
        raise StudyParameterError("; ".join(problems))


def screenable_sentence(screened: list[str], immune: list[str]) -> str:
    if not immune:
        return f"Screened: {', '.join(screened)}. Every class calls its quantizer."
    return (f"Screened: {', '.join(screened)}. Never call their quantizer in eval forward (no argmax, so no flip is "
            f"possible): {', '.join(immune)}.")


def candidates_sentence(screen: pd.DataFrame, gaps: pd.DataFrame, threshold: float, threshold_ulps: float,
                        candidate_rule: str) -> str:
    """Candidates per class; the investigation's count beside them only at the investigation's own threshold and
    class."""
    seed_model = near_tie_findings.SEED_MODEL
    same_threshold = threshold == published.value("threshold") and not threshold_ulps > 0
    seed_words = (f" The investigation found {published.value('candidates'):,.0f} of "
                  f"{published.value('seeds_screened'):,.0f} "
                  f"({published.value('candidates') / published.value('seeds_screened'):.2%}) for {seed_model} at the "
                  "same threshold." if same_threshold and seed_model in set(screen.model) else "")
    per_class = ", ".join(f"{r.model} {r.candidates:,} ({r.candidates / r.seeds:.2%})" for r in gaps.itertuples())
    return f"{len(screen):,} seeds screened; candidates ({candidate_rule}): {per_class}.{seed_words}"


def checks_sentence(checks: pd.DataFrame) -> str:
    if not len(checks):
        return "No seed fell below the threshold: nothing to check at this scale."
    t = near_tie_rate.Tally.of(checks)
    return (f"{plural(t.checks, 'check')}; {count(t.flipped)} flipped ({count(t.one_row)} with exactly one row, "
            f"{count(t.at_smallest_gap)} at the smallest-gap row); {count(t.failed)} failed the export test; "
            f"{plural(t.flipped_but_passed, 'flip')} passed (usage unchanged: {count(t.usage_unchanged)}); exact ties "
            f"among failures: {count(t.exact_ties_failed)}.")


@dataclass
class RuleViews:
    failed_or_forgiven: pd.DataFrame  # checks the export test's rule failed or forgave
    per_output: pd.DataFrame  # per check and output: passes when compared alone
    failing_alone: pd.DataFrame  # checks with an output that fails on its own


def rule_views(checks: pd.DataFrame, outputs: pd.DataFrame) -> RuleViews:
    failed = checks[~checks.test_rule_passed | checks.rule_forgiven] if len(checks) else checks
    per_output = outputs.pivot_table(index=["model", "seed", "shape_mode"], columns="output", values="passes_alone",
                                     aggfunc="first") if len(outputs) else pd.DataFrame()
    failing_alone = per_output[~per_output.all(axis=1)].reset_index() if len(per_output) else per_output
    return RuleViews(failed, per_output, failing_alone)


def rule_sentence(checks: pd.DataFrame, per_output: pd.DataFrame) -> str:
    hidden = checks[checks.never_compared.map(len) > 0]
    alone = int((~per_output).sum().sum()) if len(per_output) else 0
    return (f"The rule stopped before the last output in {len(hidden)} of {plural(len(checks), 'check')}; outputs "
            f"failing on "
            f"their own: {alone} across all checks.")


def replay_sentence(replayed: pd.DataFrame) -> str:
    return (f"{int((~replayed.test_rule_passed).sum())} of {plural(len(replayed), 'replay')} fail the export test's "
            "rule; with "
            f"the export test's rule for a skipped class (output names compared, values not) "
            f"{int(replayed.skip_rule_passed.sum())} pass.")


def rates_beside_seed(rates: pd.DataFrame) -> pd.DataFrame:
    """Our rates per class, the investigation's last, each with its interval in words."""
    return pd.concat([rates, near_tie_rate.seed_buckets()], ignore_index=True)


def rate_sentence(rates: pd.DataFrame, replays_example: bool, seed_start: int, n_seeds: int) -> str:
    ours = "; ".join(f"{r.model} ({r.shape_mode}): {findings.named(r.rate)}" for r in rates.itertuples())
    recipe = "(the same recipe as ours: the replay above rebuilds its example seed), " if replays_example else ""
    last = seed_start + n_seeds - 1
    return (f"{ours}. The investigation measured {findings.one_in(published.value('failure_rate'))} on "
            f"{near_tie_findings.SEED_MODEL} with its own seeding {recipe}but over its own "
            f"{published.value('seeds_screened'):,.0f} draws, not our seeds {seed_start} to {last}, "
            "so the rates are samples of the same rate, not the same seeds.")


def noise_sentence(noise: pd.DataFrame) -> str:
    seed_model = near_tie_findings.SEED_MODEL
    logits = noise[noise.label == "logits"]
    return "Median max abs difference of the quantizer logits over passing seeds: " + "; ".join(
        f"{r.model} {findings.significant(r.passing)}"
        + (f" (the investigation's median {findings.significant(r.seed_000_median)})" if r.model == seed_model else "")
        for r in logits.itertuples()) + "."


@dataclass
class Prediction:
    """The rate predicted from the gap-noise law, beside what was measured (empty tables without checks)."""

    # the `prediction` table, from the first DEFAULT_SEEDS screened seeds: point estimates, intervals
    calibrated: pd.DataFrame = field(default_factory=pd.DataFrame)
    calibration: pd.DataFrame = field(default_factory=pd.DataFrame)
    curve: pd.DataFrame = field(default_factory=pd.DataFrame)  # per checked seed: P(flip) and whether it flipped
    reasons: pd.DataFrame = field(default_factory=pd.DataFrame)  # a larger run: why a class missed
    reasons_measured: bool = False  # a run larger than the calibration's seeds: `reasons` is a table of the run


def predict(screen: pd.DataFrame, first_mode: pd.DataFrame, deltas: dict, threshold: float,
            n_seeds: int) -> Prediction:
    """`first_mode`: the checks of the first shape mode (the one whose gap noise `deltas` holds)."""
    if not len(first_mode):
        return Prediction()
    # from the first 2,000 screened seeds: a larger run (the default's 40,000) measures how well that predicts
    calibrated = near_tie_prediction.predict(screen, first_mode, deltas, near_tie_prediction.DEFAULT_SEEDS)
    larger = n_seeds > near_tie_prediction.DEFAULT_SEEDS
    reasons = near_tie_prediction.miss_reasons(screen, first_mode, deltas) if larger else pd.DataFrame()
    return Prediction(calibrated, near_tie_prediction.calibration(calibrated),
                      near_tie_rate.flip_curve(first_mode, deltas), reasons, larger)


def tie_aware_sentence(checks: pd.DataFrame, defects: pd.DataFrame, bound: float) -> str:
    tally = DefectTally.of(defects)
    passed = findings.count(int(checks.tie_aware_passed.sum()))
    rule = findings.count(int(checks.test_rule_passed.sum()))
    return (f"Noise bound {bound:.2e}. The tie-aware comparison passes {passed} of "
            f"{plural(len(checks), 'check')} (the export test's rule: {rule}), and "
            f"catches {tally.tie_aware} of {plural(tally.required, 'required planted defect')} (the export test's "
            f"rule: {tally.test_rule}). Of the graded ones (one channel of projected_quantized_states off by 1, 10 "
            f"and 100 times the tolerance) it catches on every seed {size_words(tally.smallest_tie_aware)}; the "
            f"export test's rule catches "
            f"{size_words(tally.smallest_test_rule, tally.graded_test_rule, tally.graded)}.")


def summary(screen: pd.DataFrame, checks: pd.DataFrame, rates: pd.DataFrame, defects: pd.DataFrame,
            threshold: float, immune: list[str], threshold_ulps: float = 0.0) -> dict:
    """The run's headline counts for summary.json: candidates by the run's own rule (`scale.is_candidate`)."""
    checked = bool(len(checks))
    tally = near_tie_rate.Tally.of(checks)
    return dict(
        seeds_screened=int(len(screen)), candidates=int(is_candidate(screen, threshold, threshold_ulps).sum()),
        checks=tally.checks, flips=tally.flipped, failures=tally.failed,
        failure_rate={r.model: {"ours": r.failure_rate, "seed": published.value("failure_rate")}
                      for r in rates.drop_duplicates("model").itertuples()} if len(rates) else {},  # first mode
        tie_aware_passes=int(checks.tie_aware_passed.sum()) if checked else 0,
        defects_caught=DefectTally.of(defects).tie_aware if checked else 0,
        defects_required=DefectTally.of(defects).required if checked else 0,
        never_argmax=immune)


# ---------------------------------------------------------------------------------------------------------
# Figure captions' counts: each from the table the figure draws

def _counted(n: int, of: int, noun: str = "", nouns: str | None = None) -> str:
    """'3 of 200', or with a noun in the number `of` needs: '0 of 1 checked seed', '2 of 3 classes'."""
    return f"{findings.count(int(n))} of " + (plural(int(of), noun, nouns) if noun else findings.count(int(of)))


def candidates_caption(gaps: pd.DataFrame, screen: pd.DataFrame, rule: str) -> str:
    return f"Candidates ({rule}): {_counted(gaps.candidates.sum(), len(screen))}."


def outcomes_caption(checks: pd.DataFrame) -> str:
    t = near_tie_rate.Tally.of(checks)
    return f"{_counted(t.flipped, t.checks)} flipped, {findings.count(t.failed)} failed the export test."


def allowance_caption(checks: pd.DataFrame) -> str:
    above = checks.perplexity_shift.abs() > checks.perplexity_allowed
    with_flip = int((above & (checks.n_flipped_rows > 0)).sum())
    return (f"points above the dashed line fail the rule on the perplexity: {_counted(above.sum(), len(checks))}, "
            f"{findings.count(with_flip)} of them with a flipped code.")


def calibration_caption(calibration: pd.DataFrame) -> str:
    return f"{_counted(calibration.inside_at_run.sum(), len(calibration), 'class', 'classes')} measured inside."


def flip_curve_caption(curve: pd.DataFrame) -> str:
    return (f"{_counted(curve.flipped.sum(), len(curve), 'checked seed')} flipped, "
            f"{findings.significant(float(curve.p_flip.sum()))} predicted.")


def with_predicted_rate(calibrated: pd.DataFrame) -> pd.DataFrame:
    """The prediction table with its rate per seed in the one rate shape (`wording`), a column "predicted_rate"."""
    return calibrated.assign(predicted_rate=[near_tie_findings.predicted_rate(p) for p in calibrated.itertuples()])
