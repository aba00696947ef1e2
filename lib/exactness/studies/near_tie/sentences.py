"""The near-tie notebook's sentences and captions: every count, ratio and comparison a cell states, in words. Each
takes the study's tables and returns a sentence (or a table with a column of words); the notebook only shows them,
and the findings quote them."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from exactness import published
from exactness.engine.answers import rate_words
from exactness.runtimes.sides import Pair, emulation_note
from exactness.studies.near_tie import rate as near_tie_rate
from exactness.studies.near_tie.cpu_kernel_sets import portability
from exactness.studies.near_tie.planted import DefectTally
from exactness.studies.near_tie.precision import GpuTables, PairSummary, same_models
from exactness.studies.near_tie.prediction import DEFAULT_SEEDS, TARGET_FACTOR, Predicted, calibration
from exactness.studies.near_tie.scale import SAME_DENSITY_FACTOR, densities_agree
from exactness.studies.near_tie.ties import explained
from exactness.workbook import findings, machine, wording
from exactness.workbook.findings import rate_verdict, significant
from exactness.workbook.presentation import plural, say, table
from exactness.workbook.wording import count, interval, machine_words, one_in


def screenable_sentence(screened: list[str], immune: list[str]) -> str:
    if not immune:
        return f"Screened: {', '.join(screened)}. Every class calls its quantizer."
    return (f"Screened: {', '.join(screened)}. Never call their quantizer in eval forward (no argmax, so no flip is "
            f"possible): {', '.join(immune)}.")


def candidates_sentence(screen: pd.DataFrame, gaps: pd.DataFrame, threshold: float, threshold_ulps: float,
                        candidate_rule: str) -> str:
    """Candidates per class; the investigation's count beside them only at the investigation's own threshold and
    class."""
    seed_model = published.NEAR_TIE_CLASS
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


def rate_sentence(rates: pd.DataFrame, replays_example: bool, seed_start: int, n_seeds: int) -> str:
    ours = "; ".join(f"{r.model} ({r.shape_mode}): {findings.named(r.rate)}" for r in rates.itertuples())
    recipe = "(the same recipe as ours: the replay above rebuilds its example seed), " if replays_example else ""
    last = seed_start + n_seeds - 1
    return (f"{ours}. The investigation measured {findings.one_in(published.value('failure_rate'))} on "
            f"{published.NEAR_TIE_CLASS} with its own seeding {recipe}but over its own "
            f"{published.value('seeds_screened'):,.0f} draws, not our seeds {seed_start} to {last}, "
            "so the rates are samples of the same rate, not the same seeds.")


def noise_sentence(noise: pd.DataFrame) -> str:
    seed_model = published.NEAR_TIE_CLASS
    logits = noise[noise.label == "logits"]
    return "Median max abs difference of the quantizer logits over passing seeds: " + "; ".join(
        f"{r.model} {findings.significant(r.passing) if pd.notna(r.passing) else 'none (no checked seed passed)'}"
        + (f" (the investigation's median {findings.significant(r.seed_000_median)})" if r.model == seed_model else "")
        for r in logits.itertuples()) + "."


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


# ---------------------------------------------------------------------------------------------------------
# Figure captions' counts: each from the table the figure draws

def _counted(n: int, of: int, noun: str = "", nouns: str | None = None) -> str:
    """'3 of 200', or with a noun in the number `of` needs: '0 of 1 checked seed', '2 of 3 classes'."""
    return f"{findings.count(int(n))} of " + (plural(int(of), noun, nouns) if noun else findings.count(int(of)))


def recipe_sentence(same: dict, seed: int) -> str:
    """Whether the plain recipe, run as a user would paste it, builds the workbook's weights and inputs."""
    def word(key: str) -> str:
        return "identical" if same[key] else "DIFFERENT"

    return f"Run for seed {seed}: weights {word('weights')}, inputs {word('inputs')} to the workbook's builders."


def replay_proof_sentence(proof) -> str:
    """The fast screen's replayed logits against plain builds (`screen.replay_proof` raises on any difference)."""
    return f"Fast and plain logits agree bit for bit on {len(proof)} of {len(proof)} (model, seed) pairs."


def flipped_caption(flipped: pd.DataFrame, checks: pd.DataFrame) -> str:
    return f"The {plural(len(flipped), 'check')} (of {count(len(checks))}) where ORT picked another code than eager."


def no_flip_sentence(checks: pd.DataFrame) -> str:
    return f"ORT picked the same code as eager in every one of the {plural(len(checks), 'check')}."


def prediction_caption(calibrated: pd.DataFrame) -> str:
    return (f"Failures predicted from the smallest gaps of the first {count(int(calibrated.predicted_from.max()))} "
            "screened seeds and the gap-noise law, with 95% intervals from a bootstrap over screened seeds, checked "
            "seeds and the fail-if-flipped fraction, plus the Poisson spread of a count; beside the failures measured "
            "here.")


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
    return calibrated.assign(predicted_rate=[predicted_rate(p) for p in calibrated.itertuples()])


def reasons_sentence(reasons: pd.DataFrame, models) -> str:
    """For the classes that missed the target: the two factors in words."""
    parts = []
    for r in reasons[reasons.model.isin(list(models))].itertuples():
        parts.append(f"{r.model}: the first {count(DEFAULT_SEEDS)} seeds predict x{significant(r.sample_factor)} of "
                     f"what every screened seed and check predicts (their gaps near zero and their noise), and that "
                     f"full prediction is x{significant(r.law_factor)} of the measured count (the pooled noise law: "
                     "one law for every argmax row of the class)")
    return "; ".join(parts)


def calibration_sentence(prediction: pd.DataFrame, reasons: pd.DataFrame | None = None) -> str:
    """Per class, the predicted rates (`wording`: 1 in N with the interval), predicted against measured at the run's
    scale, and the calibration target's verdict where the run is large enough to judge it (with `reasons`, from
    `miss_reasons`, why a class missed)."""
    if not len(prediction):
        return "No class had checks to learn the gap noise from: nothing predicted."
    table = calibration(prediction)
    scale = int(prediction.scale.iloc[0])
    parts = []
    for p, c in zip(prediction.itertuples(), table.itertuples(), strict=True):
        parts.append(f"{p.model}: fails {one_in(p.failures_per_scale / scale)} "
                     f"({interval(p.failures_per_scale_low / scale, p.failures_per_scale_high / scale)}), flips "
                     f"{one_in(p.flips_per_scale / scale)} "
                     f"({interval(p.flips_per_scale_low / scale, p.flips_per_scale_high / scale)}) from "
                     f"{count(p.predicted_from)} screened seeds; at this run's {count(p.screened)} seeds "
                     f"{significant(p.failures_at_run)} predicted ({p.failures_at_run_low:.0f} to "
                     f"{p.failures_at_run_high:.0f}), {count(p.measured_failures)} measured, "
                     + ("inside" if c.inside_at_run else "OUTSIDE") + " the interval")
    inside = int(table.inside_at_run.sum())
    text = (f"Predicted from the screen's gaps and the gap-noise law: {'; '.join(parts)}. Measured failures lie inside "
            f"the predicted 95% interval in {count(inside)} of {plural(len(table), 'class', 'classes')}.")
    judged = table[table.paper_scale]
    if not len(judged):
        return text + (f" The target (predicted from {count(DEFAULT_SEEDS)} seeds within a factor "
                       f"{TARGET_FACTOR:g} of the count measured on {count(scale)}) needs a run of at least "
                       f"{count(scale)} seeds per class; this run is not one.")
    missed = judged[~judged.within_target]
    if not len(missed):
        return text + (f" Predicted from the first seeds, every class's count on {count(scale)} seeds lies within a "
                       f"factor {TARGET_FACTOR:g} of the measured one: target met.")
    why = f" Why: {reasons_sentence(reasons, missed.model)}." if reasons is not None and len(reasons) else ""
    return text + (f" Target (the count predicted from the first {count(DEFAULT_SEEDS)} seeds within a factor "
                   f"{TARGET_FACTOR:g} of the one measured on {count(scale)}) missed: " + "; ".join(
        f"{r.model} fails {one_in(r.failures_per_scale / scale)} predicted, {one_in(r.measured_per_scale / scale)} "
        f"measured on {count(scale)} seeds (a factor {significant(r.factor)})" for r in missed.itertuples())
        + "." + why)


def explanation_sentence(table: pd.DataFrame, threshold: float) -> str:
    """Why the classes' candidate rates differ, computed: rows per seed, logit scale, and whether the per-row
    density per ulp is then the same."""
    if not len(table):
        return "No class was screened."
    if len(table) == 1:
        r = table.iloc[0]
        return (f"{r.model}: {count(r.rows_per_seed)} argmax rows per seed, median top logit "
                f"{significant(r.top_logit_median)} (the threshold {threshold:g} is {r.threshold_ulps:.0f} ulps of "
                "it); "
                f"per row and per ulp of the top logit, {significant(r.per_row_per_ulp_e6)} per million have a gap "
                "that small.")
    agree, ratio = densities_agree(table)
    rates = ", ".join(f"{r.model} {r.candidate_rate:.2%}" for r in table.itertuples())
    rows = ", ".join(f"{r.model} {count(r.rows_per_seed)}" for r in table.itertuples())
    scale = ", ".join(f"{r.model} {significant(r.top_logit_median)} ({r.threshold_ulps:.0f} ulps)"
                      for r in table.itertuples())
    density = ", ".join(f"{r.model} {significant(r.per_row_per_ulp_e6)} ({significant(r.per_row_per_ulp_e6_low)} to "
                        f"{significant(r.per_row_per_ulp_e6_high)})" for r in table.itertuples())
    spread = "inf" if math.isinf(ratio) else significant(ratio)
    if agree:
        how = "within" if ratio <= SAME_DENSITY_FACTOR else "more than"
        verdict = (f"{how} a factor {SAME_DENSITY_FACTOR:g} of each other (largest ratio {spread})"
                   + ("" if ratio <= SAME_DENSITY_FACTOR else ", but inside each other's 95% intervals")
                   + ": rows per seed and logit scale explain the difference in candidates")
    else:
        verdict = (f"a factor {spread} apart, outside each other's 95% intervals: rows and scale explain only part; "
                   "the gaps themselves are distributed differently")
    return (f"Candidates per seed differ by class ({rates}) for two measured reasons: argmax rows per seed ({rows}) "
            f"and logit scale (median top logit, and the threshold {threshold:g} in its ulps: {scale}). Per row and "
            f"per ulp of the top logit, the density of a gap below the threshold is (per million, 95% interval) "
            f"{density}: {verdict}.")


LISTED = 6  # seeds named in the sentence; the exact-ties table names every one


def _listed(seeds: pd.DataFrame) -> str:
    """The tied seeds by name when they are few; else how many per class and the first few (the table has all)."""
    if len(seeds) <= LISTED:
        return ", ".join(f"{r.model} {r.seed}" for r in seeds.itertuples())
    per_class = ", ".join(f"{model} {count(n)}" for model, n in seeds.groupby("model", sort=False).size().items())
    first = ", ".join(f"{r.model} {r.seed}" for r in seeds.head(3).itertuples())
    return f"{per_class}; e.g. {first}; every one in the exact-ties table"


def tie_why(ort_gap: float, flipped_at_tie: bool) -> str:
    """One seed's tie in words, from ORT's top-1 minus top-2 logit (eager's two codes) at the tied row."""
    if ort_gap == 0:
        return ("both logits bit-identical on ORT too: both argmax take the first code, no flip" if not flipped_at_tie
                else "both logits bit-identical on ORT, yet the row flipped: not explained by the tie")
    if ort_gap < 0:
        return (f"ORT's rounding put the second code ahead by {significant(-ort_gap)}: flip" if flipped_at_tie
                else f"ORT put the second code ahead by {significant(-ort_gap)}, yet no flip: not explained")
    return (f"ORT's rounding kept the first code ahead by {significant(ort_gap)}: no flip" if not flipped_at_tie
            else f"ORT kept the first code ahead by {significant(ort_gap)}, yet the row flipped: not explained")


def with_tie_why(ties: pd.DataFrame) -> pd.DataFrame:
    """The exact-ties table (`ties.exact_ties`) with each tie's `why` in words, as the report shows it."""
    return ties.assign(why=pd.Series([tie_why(r.ort_min_row_gap, r.flipped_at_tie) for r in ties.itertuples()],
                                     index=ties.index, dtype=object))


def ties_sentence(ties: pd.DataFrame) -> str:
    """How many checked seeds had an exact tie, how many flipped, and why, from the seeds' rows."""
    seeds = ties.drop_duplicates(["model", "seed"]) if len(ties) else ties
    if not len(seeds):
        return "No checked seed had an exact tie (gap 0)."
    flipped = int(ties.flipped_at_tie.sum())
    identical = ties[ties.ort_bit_identical]
    separated = ties[~ties.ort_bit_identical]
    second_ahead = int((separated.ort_min_row_gap < 0).sum())
    unexplained = ties[~explained(ties)]
    text = (f"{plural(len(seeds), 'checked seed')} had an exact tie (gap 0: "
            f"{_listed(seeds)}); "
            f"{count(flipped)} of {count(len(ties))} tied rows flipped. ")
    if len(identical):
        text += (f"On {count(len(identical))} ORT also computed the two tied logits bit-identical, so both argmax "
                 "took the first code" + ("" if identical.flipped_at_tie.any() else " and none flipped") + "; ")
    else:
        text += "ORT never computed the two tied logits bit-identical: "
    text += (f"on {count(len(separated))} ORT's rounding separated them, with the second code ahead on "
             f"{count(second_ahead)}")
    if len(unexplained):
        return text + (f". {plural(len(unexplained), 'tie')} "
                       "did not follow that rule: " + "; ".join(
                           f"{r.model} {r.seed}: {tie_why(r.ort_min_row_gap, r.flipped_at_tie)}"
                           for r in unexplained.itertuples()) + ".")
    return text + ": every tie flipped exactly when ORT put the second code ahead."


def kernel_sets_sentence(table: pd.DataFrame, capabilities: dict[str, str], reference: str = "native") -> str:
    """Plainly: whether a failing seed is portable between kernel sets and whether the rate is."""
    if not len(table):
        return (f"Only the machine's own kernels ran ({reference}): set cpu_kernels to compare kernel sets "
                f"(available here: {', '.join(machine.available_kernel_sets())}).")
    parts = []
    for r in table.itertuples():
        parts.append(
            f"{r.model} under {r.kernel_set} (torch {capabilities.get(r.kernel_set, '?')}): "
            f"{r.identical_gap_fraction:.1%} of {count(r.seeds)} seeds keep a bit-identical smallest gap; "
            f"{count(r.candidates_both)} of {count(r.candidates)} candidates are candidates there too "
            f"({count(r.candidates_other)} there); {count(r.failing_both)} of {count(r.failing)} failing seeds fail "
            f"there too ({count(r.failing_other)} there); rates {significant(r.rate)} against "
            f"{significant(r.rate_other)} (p = {significant(r.p_value)})")
    seeds, rates = portability(table)
    if seeds is None:
        verdict = "No seed failed under any kernel set: whether a failing seed is portable is not measured here"
    elif seeds:
        verdict = "A failing seed is portable: every seed that fails under one kernel set fails under the others"
    else:
        verdict = ("A failing seed is not portable: it may pass on a machine whose CPU picks other kernels, and "
                   "other seeds fail there instead")
    if seeds is None:  # 0 against 0 agrees with any rate: it says nothing about portability
        verdict += "; nor is the rate: no failure to compare."
    else:
        verdict += ("; the rate is portable: the failure rates agree at the 5% level in every class." if rates else
                    "; the rate is not portable: in some class the failure rates differ at the 5% level.")
    return (f"Against the machine's own kernels ({reference}, torch {capabilities.get(reference, '?')}): "
            + "; ".join(parts) + ". " + verdict)


def predicted_rate(p) -> str:
    """A predicted failure count per `p.scale` seeds as the one rate shape: '1 in 2,700 (95% 1 in 3,600 to ...)'."""
    if not p.failures_per_scale_high:  # an interval of 0 to 0: nothing predicted, said once, not "none to none"
        return "none predicted"
    return (f"{wording.one_in(p.failures_per_scale / p.scale)} "
            f"({wording.interval(p.failures_per_scale_low / p.scale, p.failures_per_scale_high / p.scale)})")


def size_words(tolerances: float, caught: int = 0, graded: int = 0) -> str:
    """What a comparison catches of the graded defects on every seed: 'one output channel off by 10x the tolerance
    and more', or 'no graded size' (with how many it caught on some seeds only, `caught` of `graded`)."""
    if tolerances != tolerances:  # NaN
        return (f"no graded size on every seed, only {caught} of the {graded} size-seed plantings" if caught
                else "no graded size")
    return f"one output channel off by {tolerances:g}x the tolerance and more"


def tolerance_words(row) -> str:
    """One class's tolerance: the median and worst rtol one simulated flip needs, and over how many checks."""
    checks = getattr(row, "checks", None)
    of = f" of {plural(checks, 'check')}" if checks is not None else ""
    return (f"{row.model} median {significant(row.rtol_one_flip_median)} over its "
            f"{plural(row.simulated_flips, 'simulated flip')}{of}, worst {significant(row.rtol_one_flip_worst)}")


def tolerance_sentence(tolerance: pd.DataFrame) -> str:
    """The notebook's sentence under the tolerance table: per class, the median it computed and over what."""
    measured = tolerance[tolerance.simulated_flips > 0] if len(tolerance) else tolerance
    if not len(measured):
        return "No flip was simulated: no tolerance measured."
    return ("Simulated on eager, one flip of the smallest-gap row needs on the perplexity an rtol of: "
            + "; ".join(tolerance_words(r) for r in measured.itertuples())
            + f". The investigation says about {published.value('rtol_observed'):.0e} observed and "
            f"{published.value('rtol_worst'):.0e} worst on {published.NEAR_TIE_CLASS}. A flipped code moves its row of "
            "projected_quantized_states entirely, and such an rtol would apply to every output of every class: a "
            "tie is not a precision problem.")


def _predicted(p: Predicted) -> str:
    return f"{significant(p.expected)} (95% {significant(p.low)} to {significant(p.high)})"


def prediction_sentence(summaries: Sequence[PairSummary]) -> str:
    """Does the gap-noise law extrapolate to this noise? Measured failures on the held-out seeds beside both laws."""
    parts = []
    for s in summaries:
        if s.every_row_law.expected != s.every_row_law.expected:  # NaN: nothing to predict from
            parts.append(f"{Pair.parse(s.pair).other.label}: {count(s.held_out_failures)} failures on "
                         f"{plural(s.held_out, 'held-out seed')}; not predicted (no calibration seed flipped, so the "
                         "failing fraction of flips is unknown)")
            continue
        inside = [name for name, p in (("every row", s.every_row_law), ("smallest row", s.smallest_row_law))
                  if p.low <= s.held_out_failures <= p.high]
        verdict = (f"within the interval of {' and '.join(inside)}" if inside else "outside both intervals")
        parts.append(f"{Pair.parse(s.pair).other.label}: {count(s.held_out_failures)} failures on "
                     f"{plural(s.held_out, 'held-out seed')}; every row predicts {_predicted(s.every_row_law)}, the "
                     f"smallest-gap row alone {_predicted(s.smallest_row_law)}: {verdict}"
                     + ("" if s.reach_covered else " (the noise reaches past each seed's smallest gaps kept: the "
                                                    "every-row law is a lower bound)"))
    return "; ".join(parts) + "."


def beside_reference_sentence(measured: int, seeds: int, ref_failures: int, ref_seeds: int, what: str,
                              source: str = "the investigation") -> str:
    verdict, why = rate_verdict(measured, seeds, ref_failures, ref_seeds, source)
    return f"{what}: {verdict} ({why})."


RATE_COLUMNS = {"model": "class", "pair": "sides", "flips_rate": "a code flips", "fails_rate": "export test fails",
                "noise_median": "logit noise (median)"}


def show_rates(rates) -> None:
    shown = rates.assign(pair=[Pair.parse(p).label for p in rates.pair],
                         flips_rate=[wording.rate(int(r.flips), int(r.seeds)) for r in rates.itertuples()],
                         fails_rate=[wording.rate(int(r.failures), int(r.seeds)) for r in rates.itertuples()])
    table(shown, columns=RATE_COLUMNS, caption="Per class and pair: how often a code flips and how often the export "
          "test fails (1 in N with Wilson's 95% interval), and the median over seeds of the largest logit difference.")


def emulation_sentence(pairs: Sequence[Pair]) -> str:
    return emulation_note([side for pair in pairs for side in (pair.reference, pair.other)]) or \
        "No side here is emulated."


def gpu_run_sentence(gpu) -> str:
    f = gpu.facts
    skipped = f.get("skipped") or []
    return (f"A GPU run, measured on {machine_words(f)} by `python -m exactness.gpu` ({count(f.get('seeds', 0))} "
            f"conformer seeds per pair, {significant(f.get('seconds', 0))} s), read back from `{gpu.folder.name}`: its "
            "CUDA sides are real, its CPU sides ran on that machine's CPU"
            + (f"; not run there: {'; '.join(skipped)}" if skipped else "") + "."
            + ("" if f.get("perplexity_in_side_dtype") else " That run computed every side's perplexity in float32 "
               "from its codes: its bf16 and fp16 failures are those a flipped code makes, a lower bound on the "
               "export test's, whose perplexity rounds in the low dtype too."))


def models_sentence(gpu, here_table) -> str:
    """Why this run's seeds are or are not compared one by one with the GPU run's."""
    if not len(here_table):
        return ""
    same, relative = same_models(gpu.table, here_table)
    if same:
        return "This run's seeds build the same models as the GPU run's: its emulation is compared seed by seed too."
    import transformers

    return (f"This run's seeds build other models than the GPU run's (the reference perplexity of a shared seed "
            f"differs by a median {significant(100 * relative)}%; transformers {gpu.facts.get('transformers')} there, "
            f"{transformers.__version__} here), so only the rates compare across the two machines; "
            "the GPU machine's own emulation is compared seed by seed.")


def show_agreement(frame) -> None:
    if not len(frame):
        return
    shown = frame.assign(cuda_pair=[Pair.parse(p).other.label for p in frame.cuda_pair],
                         emulated_pair=[Pair.parse(p).other.label for p in frame.emulated_pair])
    table(shown, columns={"model": "class", "cuda_pair": "CUDA side", "emulated_pair": "emulated side",
                          "emulated_on": "emulated on", "seeds": "seeds", "cuda_failures": "CUDA fails",
                          "emulated_failures": "emulated fails", "both_fail": "both fail"},
          caption="The real and the emulated side against eager CPU fp32 on the same seeds: how many fail on each, "
                  "and on how many both fail (flips depend on each kernel's own rounding, so the sets can differ "
                  "while the rates agree).")


def probe_sentence(probe) -> str:
    if "cuda_tf32_changes" not in probe:
        return "The GPU run had no CUDA device: which layers run in TF32 was not probed."
    agree = int((probe.cuda_tf32_changes.astype(bool) == probe.emulated_changes.astype(bool)).sum())
    kept = [str(k) for k, c in zip(probe.layer, probe.cuda_tf32_changes, strict=True) if not c]
    return (f"Which layers CUDA runs in TF32, probed with the flag on and off: the emulation changes the same layers "
            f"on {agree} of {plural(len(probe), 'kind')}" + (f"; CUDA keeps in float32: {', '.join(kept)}" if kept
                                                               else "") + ".")


def prototype_sentence(summaries: Sequence[PairSummary]) -> str:
    """The GPU run's CUDA pairs beside the prototype's figures for the same comparison (labelled reference data)."""
    ref_seeds = int(published.value("gpu_seeds"))
    parts = []
    for s in summaries:
        other = Pair.parse(s.pair).other
        key = {"tf32-conv": "gpu_tf32_conv_failures", "fp32": "gpu_fp32_failures"}.get(other.precision.value)
        if other.device.value != "cuda" or key is None or Pair.parse(s.pair).reference.device.value != "cpu":
            continue
        parts.append(beside_reference_sentence(s.failures.events, s.failures.seeds, int(published.value(key)),
                                               ref_seeds, f"{other.label}: {count(s.failures.events)} failures in "
                                               f"{count(s.failures.seeds)} seeds against {published.GPU_PROTOTYPE}'s "
                                               f"{count(published.value(key))} in {count(ref_seeds)}", "the prototype"))
    return " ".join(parts)


def show_gpu_run(gpu, tables: GpuTables, pair_table: pd.DataFrame, artifacts) -> None:
    """A GPU run's section: its pairs' rates, the emulation beside CUDA, the probe, the prototype's figures and the
    prediction; its tables and summary kept in the run folder (nothing without a GPU run: `gpu` None)."""
    if gpu is None:
        return
    artifacts.table("gpu_pair_rates", tables.rates)
    artifacts.table("gpu_tf32_probe", gpu.probe)
    artifacts.table("gpu_agreement", tables.agreement)
    artifacts.summary(gpu_run={"machine": machine_words(gpu.facts), "pairs": tables.rates.to_dict("records")})
    say(gpu_run_sentence(gpu))
    show_rates(tables.rates)
    show_agreement(tables.agreement)
    for words in (models_sentence(gpu, pair_table), probe_sentence(gpu.probe), prototype_sentence(tables.summaries),
                  prediction_sentence(tables.summaries)):
        say(words)


def candidate_rule(threshold: float, threshold_ulps: float = 0.0) -> str:
    """The candidate rule in words, for captions and claims."""
    if threshold_ulps > 0:
        return f"smallest gap is below {threshold_ulps:g} ulps of its row's top logit"
    return f"smallest gap is below {threshold:g}"


def rates_table(counted: pd.DataFrame) -> pd.DataFrame:
    """The rates table people read (`rate.buckets`, alone or beside #50575's: `rate.beside_investigation`): each
    estimate worded in the one rate shape, the answer table's (`rate`, in the estimate's place)."""
    if not len(counted):
        return counted
    if "estimate" not in counted or counted.estimate.isna().any():
        raise ValueError("rates_table words the estimates `rate.buckets` keeps; this table has a row without one")
    return counted.assign(estimate=[rate_words(e) for e in counted.estimate]).rename(columns={"estimate": "rate"})
