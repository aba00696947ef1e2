"""The ulp-noise notebook's words: one computed sentence per section, each reading the run's tables and
nothing else."""

from __future__ import annotations

import numpy as np
import pandas as pd

from exactness.runtimes.sides import Side, emulation_note
from exactness.studies.ulp_noise.depth import FLAT, role, worst_draw
from exactness.studies.ulp_noise.study import settings_medians
from exactness.workbook.findings import count, significant, span
from exactness.workbook.presentation import plural


def growth_sentence(kinds: pd.DataFrame, table: pd.DataFrame) -> str:
    """Where the relative noise grows and where the absolute noise is only rescaled, in two sentences: the
    factors per layer kind are the table's (`growth_by_kind`), not a list in words."""
    if not len(kinds):
        return "No module output differs from its input's noise: no factor to measure."
    rel = table.rel_rms[np.isfinite(table.rel_rms)]
    span = (f"Over the {plural(len(table), 'module output')} with an input, relative noise (max |diff| / RMS) stays "
            f"within {significant(rel.min())} to {significant(rel.max())} while the absolute noise spans "
            f"{significant(table.max_abs_diff.min())} to {significant(table.max_abs_diff.max())}.")
    roles = {r.kind: role(r) for r in kinds.itertuples()}
    growing = [f"{r.kind} (x{significant(r.relative_factor)})" for r in kinds.itertuples()
               if roles[r.kind] == "grows the relative noise"]
    rescaling = kinds[[roles[k].startswith("rescales") and r.absolute_factor > FLAT
                       for k, r in zip(kinds.kind, kinds.itertuples(), strict=True)]]
    lead = (f"The relative noise grows at {', '.join(growing)} (median factor above {FLAT:g}). " if growing else
            f"No layer kind grows the relative noise by more than a factor {FLAT:g} (median). ")
    if len(rescaling):
        lead += ("Absolute noise is raised without relative growth at "
                 + ", ".join(f"{r.kind} (x{significant(r.absolute_factor)})" for r in rescaling.itertuples())
                 + ": values and noise are scaled alike. ")
    return lead + span


def worst_elements_sentence(scaled: pd.DataFrame) -> str:
    """Which elements drive the worst element-wise counts: their size against the RMS (medians over tensors)."""
    have = scaled.dropna(subset=["worst_of_rms"]) if "worst_of_rms" in scaled else scaled.iloc[0:0]
    if not len(have):
        return "No tensor differs: no worst element to locate."
    worst = float(have.worst_of_rms.median())
    below = float(have.top_ulps_below_rms.median())
    small = worst < 0.1
    return ((f"The worst element-wise counts come from small elements: the worst element of a tensor has a "
             f"median magnitude of {significant(worst)} of the tensor's RMS" if small else
             f"The worst element-wise counts are not confined to small elements: the worst element of a tensor "
             f"has a median magnitude of {significant(worst)} of its RMS")
            + f", and the 1% of elements with the most ulps lie below {significant(below)} of the RMS (median over "
            f"{count(len(have))} tensors).")


def precision_sentence(table: pd.DataFrame) -> str:
    """Per precision side: how far its tensors differ from float32's, in its own ulps, and how often it is
    farther from float64 than float32 is."""
    parts = []
    for side, group in table.groupby("side", sort=False):
        worst = group.loc[group.max_ulp_of_rms.idxmax()]
        parts.append(f"{side}: the median tensor's median element differs by {significant(group.median_ulp.median())} "
                     f"of its precision's ulps, its worst by {significant(group.max_ulp_of_rms.median())} ulps of the "
                     f"tensor's RMS in that precision (the worst tensor {significant(worst.max_ulp_of_rms)}, "
                     f"{worst.tensor}); it is farther from float64 than float32 on "
                     f"{int((group.other_vs_float64 > group.fp32_vs_float64).sum())} of {len(group)} tensors")
    note = emulation_note([Side.parse(f"eager:cpu:{p}") for p in table.precision.unique()])
    return "; ".join(parts) + ". " + note


def medians_sentence(medians: pd.DataFrame, model: str, draws: int, swap_status: str) -> str:
    measured = medians.dropna(subset=["ours_median_max_abs_diff"])
    if not len(measured):
        return (f"{model} has none of the investigation's three tensors; the depth profile below covers it "
                f"({draws} draws).")
    return ("; ".join(f"{r.tensor}: {significant(r.ours_median_max_abs_diff)} here, a median of "
                      f"{r.ours_median_ulp:.0f} ulps per element" for r in measured.itertuples())
            + f" ({count(draws)} draws, {swap_status}).")


def depth_sentence(profile: pd.DataFrame) -> str:
    moving = profile[profile.max_abs_diff > 0]
    shrinks = moving[moving.growth < 0.5]
    where = (f"The largest absolute noise is at {moving.loc[moving.max_abs_diff.idxmax(), 'tensor']} "
             f"({significant(moving.max_abs_diff.max())}); " if len(moving) else "No tensor differs; ")
    names = ", ".join(shrinks.tensor.str.split(".").str[-1].unique()[:8]) or "none"
    return (where + f"the median element differs by at most {significant(profile.median_ulp.max())} ulps anywhere. "
            "Tensors where the noise drops by more than half in absolute terms from the previous one (relative "
            f"measures below): {names}.")


def float64_sentence(closer: pd.DataFrame) -> str:
    counts = closer.closer.value_counts()
    return (f"Against a float64 eager run of the same weights, ORT is closer on {count(int(counts.get('ort', 0)))} "
            f"tensors, eager float32 on {count(int(counts.get('eager', 0)))}, and they tie on "
            f"{count(int(counts.get('tie', 0)))}.")


def settings_sentence(settings: pd.DataFrame) -> str:
    spread = settings_medians(settings).groupby("label").max_abs_diff.agg(["min", "max"])
    twice = ("One session run twice gives bit-identical outputs every time." if settings.run_twice_identical.all()
             else "One session run twice is NOT always bit-identical.")
    return ("Across optimisation levels and thread counts each tensor's median noise stays within "
            + "; ".join(f"{label} {span(r['min'], r['max'])}" for label, r in spread.iterrows())
            + ". " + twice)


def passing_failing_sentence(comparison: pd.DataFrame, source: str) -> str:
    tested = comparison[(comparison.failing_seeds > 0) & comparison.p_value.notna()] if len(comparison) else comparison
    if not len(tested):
        return "No near-tie run with failing seeds to compare" + (f" ({source})." if source else ".")
    verdict = ("no difference detected at the 5% level (with few failing seeds the test has little power)"
               if (tested.p_value >= 0.05).all() else "some differ at the 5% level")
    return (f"From {source}: Mann-Whitney U p-values " + ", ".join(
        f"{r.model} {r.label} {significant(r.p_value)} ({count(int(r.failing_seeds))} failing / "
        f"{count(int(r.passing_seeds))} passing)" for r in tested.itertuples()) + f"; {verdict}.")


def gpu_sentence(gpu: pd.DataFrame | None, noise: pd.DataFrame, device: str, device_name: str = "") -> str:
    if gpu is None:  # asked for and missing; a CPU run asks for none and has no such section
        return "" if device == "cpu" else "No GPU run: no CUDA device is present here."

    def medians(table):
        named = table[table.label != ""].groupby("label").max_abs_diff.median()
        return ", ".join(f"{label} {significant(value)}" for label, value in named.items())
    return (f"Eager on {device_name} against ORT on the CPU: median noise of the named tensors {medians(gpu)} "
            f"(CPU eager: {medians(noise)}).")


def depth_caption(profile: pd.DataFrame, scaled: pd.DataFrame) -> str:
    moving = profile[profile.max_abs_diff > 0]
    if not len(moving):
        return "Every tensor matches exactly."
    return (f"The largest absolute noise is {significant(moving.max_abs_diff.max())}; in ulps of the RMS at most "
            f"{significant(scaled.rms_ulps.max())}, while the element-wise 99th percentile reaches "
            f"{scaled.p99_ulp.max():.0f}.")


def histogram_caption(noise: pd.DataFrame, scaled: pd.DataFrame) -> str:
    named = noise[noise.label != ""]
    return ("Per named tensor, how many draws (vertical) reach a given ulp distance (log scale): the worst element "
            f"of the draw and its median element. The median element stays within "
            f"{significant(named.median_ulp.max())} ulps and the worst reaches {significant(named.max_ulp.max())}; "
            f"measured in ulps of the tensor's RMS (figure above) each tensor's median draw stays within "
            f"{significant(scaled.rms_ulps.max())}" + worst_draw_words(noise) + ".")


def worst_draw_words(noise: pd.DataFrame) -> str:
    single = worst_draw(noise)
    return (f" and the worst single draw reaches {significant(single[0])} ({short_tensor(single[1])}, seed {single[2]})"
            if single is not None else "")


def short_tensor(tensor: str) -> str:
    """A module path by its last two parts: enough to find it in the depth table, short enough for a claim."""
    return ".".join(tensor.split(".")[-2:])


def settings_caption(by_setting: pd.DataFrame, draws: int) -> str:
    return ("Median max |eager − ORT| (absolute, log scale) of each named tensor (read from the graph exposing every "
            "module output) and each model output (the graph as exported) under each ORT optimisation level and thread "
            f"count and each eager thread count ({plural(draws, 'draw')} each). Across settings the values span "
            f"{significant(by_setting.max_abs_diff.min())} to {significant(by_setting.max_abs_diff.max())}.")


def reference_caption(draws: int) -> str:
    return f"Max abs difference from a float64 eager run, median over {plural(draws, 'draw')}."
