"""The ulp-noise study's findings: how large the eager/ORT noise is, where it lives, which side is closer to
float64, what ORT's settings change, and whether failing near-tie seeds are noisier. Every verdict and every
claim's wording comes from the tables.

transformers #50575 (section 3) measured three medians on Wav2Vec2ConformerForPreTraining with a dynamic export only:
they are set beside that subject and export alone; any other subject gets ours alone.
"""

from __future__ import annotations

import math

import pandas as pd

from exactness import published
from exactness.studies.ulp_noise import depth as ulp_noise_depth
from exactness.studies.ulp_noise import sentences as ulp_noise_sentences
from exactness.studies.ulp_noise.depth import scale_profile
from exactness.studies.ulp_noise.sentences import short_tensor
from exactness.studies.ulp_noise.study import median_interval
from exactness.workbook.findings import Finding, count, significant, span
from exactness.workbook.wording import plural

SEED_MODEL = published.NEAR_TIE_CLASS
SEED_SHAPE_MODE = "dynamic"
# A median within this factor of the investigation's counts as the same noise (the near-tie report uses the same rule).
NOISE_FACTOR = 3.0
SEED_TENSORS = {"conv_features": "noise_conv_features", "extract_features": "noise_extract_features",
                "logits": "noise_logits"}
FEW_ULPS = 16  # "a few float32 rounding steps": the typical (median) element within this many ulps
SETTINGS_FACTOR = 2.0  # a setting "changes the noise" when a tensor's median moves by more than this factor


def seed_label() -> str:
    return f"transformers #50575, section 3, {SEED_MODEL}, dynamic export, median of 300 runs"


def medians_finding(noise: pd.DataFrame, model: str, shape_mode: str) -> Finding:
    """Our median max abs difference of the investigation's three tensors with its 95% interval; compared with the
    seed only for the investigation's subject and export."""
    named = noise[noise.label.isin(SEED_TENSORS)]
    draws = int(noise.seed.nunique()) if len(noise) else 0
    if not len(named):
        return Finding(f"{model} has none of the investigation's three tensors (conv features, "
                       f"extract_features, logits); "
                       "its noise is in the depth profile.", f"{count(draws)} draws", "new", evidence="noise table")
    parts, brief, ratios = [], [], {}
    for label in SEED_TENSORS:
        values = named[named.label == label].max_abs_diff
        if not len(values):
            continue
        low, high = median_interval(values)
        ours = float(values.median())
        # under 6 values no pair of order statistics covers the median with 95%: say "range", not "interval"
        spread = "95% interval" if len(values) >= 6 else f"range of {count(len(values))} draws"
        parts.append(f"{label} {significant(ours)} ({spread} {significant(low)} to {significant(high)})")
        brief.append(f"{label} {significant(ours)}")
        if ours > 0:
            ratios[label] = ours / published.value(SEED_TENSORS[label])
    ours_text = "; ".join(parts) + f"; median over {count(draws)} draws"
    seed_text = ", ".join(f"{label} {significant(published.value(key))}" for label, key in SEED_TENSORS.items())
    comparable = model == SEED_MODEL and shape_mode == SEED_SHAPE_MODE
    if not comparable:
        why = (f"the investigation measured {SEED_MODEL}, not {model}" if model != SEED_MODEL
               else f"the investigation measured the {SEED_SHAPE_MODE} export, this run the {shape_mode} one")
        return Finding(f"Median max abs difference, eager against ORT, of {model} ({shape_mode} export): "
                       + ", ".join(brief) + ".", ours_text, "not comparable",
                       source=f"{seed_text} ({seed_label()})", why=why, evidence="noise table")
    within = len(ratios) == len(SEED_TENSORS) and all(1 / NOISE_FACTOR <= r <= NOISE_FACTOR for r in ratios.values())
    ratio_words = ", ".join(f"{label} x{significant(r)}" for label, r in ratios.items())
    claim = (f"The investigation's three tensors differ between eager and ORT by float noise of the "
             f"investigation's size: each median "
             f"is {'within' if within else 'not within'} a factor {NOISE_FACTOR:g} of the investigation's "
             f"({ratio_words}).")
    return Finding(claim, ours_text, "reproduced" if within else "differs", source=f"{seed_text} ({seed_label()})",
                   why="" if within else "unexplained (other CPU kernels can round differently; see the environment "
                                         "report)", evidence="noise table, seed medians table")


def ulps_finding(profile: pd.DataFrame, scaled: pd.DataFrame | None = None,
                 noise: pd.DataFrame | None = None) -> Finding:
    """Is the noise a few rounding steps for the typical element of every tensor? And how large is the worst,
    in ulps of the tensor's RMS. The claim is those two figures (each tensor's median draw; with `noise`, the
    worst single draw beside it); where the element-wise counts come from goes with our figures (`ours`) and the
    worst-elements sentence of the notebook."""
    typical = float(profile.median_ulp.max())
    at = profile.loc[profile.median_ulp.idxmax(), "tensor"]
    few = typical <= FEW_ULPS
    worst = float(profile.p99_ulp.max())
    claim = (f"In every tensor the median element differs by at most {significant(typical)} ulps in the median "
             "draw, a few float32 rounding steps" if few else
             f"Not just a few rounding steps: the median element of {short_tensor(at)} differs by "
             f"{significant(typical)} ulps in the median draw (more than {FEW_ULPS})")
    ours = f"largest median ulp {significant(typical)} ({at}); largest 99th percentile {significant(worst)} ulps"
    if scaled is not None and scaled.rms_ulps.notna().any():
        by_scale = float(scaled.rms_ulps.max())
        scale_at = scaled.loc[scaled.rms_ulps.idxmax(), "tensor"]
        single = ulp_noise_depth.worst_draw(noise) if noise is not None else None
        beyond = (f", {significant(single[0])} ({short_tensor(single[1])}) in the worst draw"
                  if single is not None and single[0] > by_scale else "")
        claim += (f"; in ulps of each tensor's RMS the worst difference is {significant(by_scale)} "
                  f"({short_tensor(scale_at)}) in the median draw{beyond}.")
        ours += f"; largest max |diff| in ulps of the RMS {significant(by_scale)} ({scale_at})"
        if single is not None:
            ours += f", {significant(single[0])} in one draw ({single[1]}, seed {single[2]})"
        if worst > by_scale:
            ours += "; the larger element-wise counts come from elements far below the RMS, where 1 ulp is tiny"
    else:
        claim += " (element-wise ulps blow up for elements near zero, where 1 ulp is tiny)."
    if scaled is not None and "worst_of_rms" in scaled and scaled.worst_of_rms.notna().any():
        ours += f"; worst element at a median {significant(float(scaled.worst_of_rms.median()))} of the RMS"
    return Finding(claim, ours, "new", evidence="depth profile and scale tables, ulp histograms")


def growth_finding(scaled: pd.DataFrame) -> Finding:
    """The notebook's question in relative terms: where the noise grows and where it is only rescaled, with the
    median factor per layer kind (`ulp_noise_depth`)."""
    table = ulp_noise_depth.growth(scaled)
    kinds = ulp_noise_depth.growth_by_kind(table)
    if not len(kinds):
        return Finding(_no_growth(scaled), "no factor", "new", evidence="growth per layer kind table")
    ours = "; ".join(f"{r.kind} x{significant(r.relative_factor)} relative" for r in kinds.itertuples())
    return Finding(ulp_noise_sentences.growth_sentence(kinds, table), ours, "new",
                   evidence="growth per layer kind table, noise figure")


def _no_growth(scaled: pd.DataFrame) -> str:
    """Why no factor was measured: no module, nothing differs, or nothing that differs has a measured input that
    differs (the leaf module outputs `depth.growth` reads; a sum or a container's output is no measured input)."""
    modules = scaled[~scaled.model_output.astype(bool)] if "model_output" in scaled else scaled
    modules = modules[modules.tensor.isin(ulp_noise_depth.leaves(modules.tensor.tolist()))]
    if not len(modules):
        return "The model has no module whose output could be compared: no growth to measure."
    differing = modules[modules.max_abs_diff > 0]
    if not len(differing):
        return (f"Every one of the {plural(len(modules), 'module output')} is bit-identical between eager and ORT: no "
                "growth to measure.")
    worst = differing.loc[differing.max_abs_diff.idxmax()]
    return (f"{count(len(differing))} of {plural(len(modules), 'module output')} "
            f"{'differs' if len(differing) == 1 else 'differ'} between eager and ORT (largest "
            f"max |diff| {significant(float(worst.max_abs_diff))}, at {short_tensor(worst.tensor)}), but none has a "
            "measured input that differs (an input that is a sum or a container's output has no factor): no growth "
            "factor to measure.")


def float64_finding(closer: pd.DataFrame) -> Finding:
    counts = closer.closer.value_counts() if len(closer) else pd.Series(dtype=int)
    ort, eager, tie = (int(counts.get(k, 0)) for k in ("ort", "eager", "tie"))
    total = ort + eager + tie
    if total == 0:
        return Finding("No tensor was compared against float64.", "0 tensors", "new", evidence="float64 table")
    if ort and eager and max(ort, eager) >= 4 * min(ort, eager):  # one side wins four to one or more
        words = f"{'eager float32' if eager > ort else 'ORT'} is usually the closer one, but neither is exact"
    elif ort and eager:
        words = "neither side is the exact one"
    elif ort:
        words = "ORT is never further from float64 than eager"
    elif eager:
        words = "eager is never further from float64 than ORT"
    else:
        words = "the two sides are equally far on every tensor"
    claim = (f"Against a float64 eager run of the same weights, ORT is closer on {count(ort)} of {count(total)} "
             f"tensors, eager float32 on {count(eager)}, tied on {count(tie)}: {words}.")
    return Finding(claim, f"ORT {count(ort)}, eager {count(eager)}, tie {count(tie)}", "new",
                   evidence="float64 reference table")


def _factor(low: float, high: float) -> float:
    """high / low, where a zero beside a non-zero is an infinite factor and two zeros none."""
    if low > 0:
        return high / low
    return math.inf if high > 0 else 1.0


def settings_finding(settings: pd.DataFrame) -> Finding:
    if not len(settings):
        return Finding("No ORT setting was varied.", "0 settings", "new", evidence="settings table")
    medians = settings.groupby(["setting", "value", "label"]).max_abs_diff.median()
    spread = medians.groupby("label").agg(["min", "max"])
    largest = max(_factor(float(r["min"]), float(r["max"])) for _, r in spread.iterrows())
    repeatable = bool(settings.run_twice_identical.all())
    changes = largest > SETTINGS_FACTOR
    factor_text = "inf" if math.isinf(largest) else significant(largest)
    graphs = ("; named tensors read from the graph exposing every module output, the model's outputs from the "
              "graph as exported" if "graph" in settings and settings.graph.nunique() > 1 else "")
    claim = (("Optimisation level and thread counts change the noise: " if changes else
              "Optimisation level and thread counts leave the noise's size alone: ")
             + f"a tensor's median moves by at most a factor {factor_text} across settings "
               f"(threshold {SETTINGS_FACTOR:g}){graphs}; one session run twice "
             + ("is bit-identical every time." if repeatable else "is NOT always bit-identical."))
    ours = "; ".join(f"{label} {span(r['min'], r['max'])}" for label, r in spread.iterrows())
    return Finding(claim, ours, "new", evidence="settings table and figure")


FEW_FAILING = 10  # fewer failing seeds give a rank test little power against a modest difference


def passing_failing_finding(comparison: pd.DataFrame, source: str = "") -> Finding:
    """transformers #50575 (section 5) found the noise the same in passing and failing runs of its model."""
    seed_text = ("noise the same in failing and passing runs (transformers #50575, section 5, "
                 "Wav2Vec2ConformerForPreTraining)")
    tested = comparison[(comparison.failing_seeds > 0) & comparison.p_value.notna()] if len(comparison) else comparison
    if not len(tested):
        return Finding("Failing and passing near-tie seeds were not compared: "
                       + (f"near-tie run {source} has no failing seed." if source
                          else "no near-tie run with failing seeds was given."), "no failing seeds", "not comparable",
                       source=seed_text, why="this run had no failing near-tie seeds to compare")
    differ = tested[tested.p_value < 0.05]
    pvalues = ", ".join(f"{r.model} {r.label} p = {significant(r.p_value)} ({count(r.failing_seeds)} failing, "
                        f"{count(r.passing_seeds)} passing)" for r in tested.itertuples())
    claim = ("No difference in noise between failing and passing near-tie seeds is detected (Mann-Whitney U, 5% "
             "level" + (", little power with few failing seeds)." if tested.failing_seeds.min() < FEW_FAILING else ").")
             if not len(differ) else
             f"Failing near-tie seeds differ in noise from passing ones for {count(len(differ))} of "
             f"{count(len(tested))} tensor comparisons (Mann-Whitney U, 5% level).")
    on_seed_model = tested[tested.model == SEED_MODEL]
    if not len(on_seed_model):
        return Finding(claim, pvalues, "new", evidence="passing vs failing table")
    same = bool((on_seed_model.p_value >= 0.05).all())
    few = int(on_seed_model.failing_seeds.min())
    if same and few < FEW_FAILING:  # no difference found could also be a difference too small for so few to show
        return Finding(claim, pvalues, "not comparable", source=seed_text,
                       why=f"{plural(few, 'failing seed')} of {SEED_MODEL}: the test could detect only a large "
                           f"difference, so finding none cannot bear the investigation's 'the same' out (at least "
                           f"{FEW_FAILING} needed)", evidence="passing vs failing table")
    return Finding(claim, pvalues, "reproduced" if same else "differs", source=seed_text,
                   why="" if same else "unexplained", evidence="passing vs failing table")


def findings(noise: pd.DataFrame, profile: pd.DataFrame, closer: pd.DataFrame, settings: pd.DataFrame,
             comparison: pd.DataFrame, model: str, shape_mode: str, near_tie_source: str = "") -> list[Finding]:
    scaled = scale_profile(noise)
    return [medians_finding(noise, model, shape_mode), ulps_finding(profile, scaled, noise), growth_finding(scaled),
            float64_finding(closer), settings_finding(settings), passing_failing_finding(comparison, near_tie_source)]
