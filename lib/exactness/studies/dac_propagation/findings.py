"""The DAC propagation study's findings: whether weight norm itself causes error, how a differently rounded
fold grows through the encoder (activation growth times relative-error growth), where it grows most
beside the investigation's per-block table, whether the codes and the codec survive, and whether the published
configurations pass the hop-length check. Every verdict and every claim's wording comes from the tables.

The DAC integration-test fix measured the 44.1 kHz model with trained weights: its figures are set beside the 44khz
variant
only; for the other variants they are "not comparable".
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import PurePath

import pandas as pd

from exactness import published
from exactness.studies.dac_propagation.sentences import times
from exactness.studies.dac_propagation.study import (
    ENCODER_OUTPUT,
    codec_run_ratios,
    seed_chain,
)
from exactness.workbook.findings import Finding, count, significant, span
from exactness.workbook.wording import plural

SEED_VARIANT = "44khz"
SEED_BLOCKS = ("encoder.Block0", "encoder.Block1", "encoder.Block2", "encoder.Block3")
SAME_SIZE_FACTOR = 2.0  # one of our figures "reproduces" the investigation's when within this factor (about one binade)
CODEC_SAME = 1e-2  # runs are "the same codec" when they differ by less than this fraction of the codec's own error


def _seed(what: str, section: str) -> str:
    return f"{what} (the DAC integration-test fix, {section}, DAC 44.1 kHz, trained weights)"


def _within(ours: float, seed: float, factor: float = SAME_SIZE_FACTOR) -> bool:
    return ours > 0 and seed / factor <= ours <= seed * factor


def _on_seed_variant(finding: Finding, variant: str) -> Finding:
    """The investigation measured the 44.1 kHz model: on another variant its figure is context, not a verdict."""
    if variant == SEED_VARIANT or finding.verdict not in ("reproduced", "differs"):
        return finding
    return replace(finding, verdict="not comparable",
                   why=f"the investigation measured the 44.1 kHz model; this run is {variant}")


def _layers_per_init(rows: pd.DataFrame, what: str = "layer") -> str:
    """'40 layers' or '40 layers in each of 2 inits': one row per layer and init (a table over several inits
    has each layer once per init)."""
    inits = rows.init.nunique() if "init" in rows else 1
    per_init = len(rows) // max(inits, 1)
    counted = plural(per_init, what)
    return counted + (f" in each of {count(inits)} inits" if inits > 1 else "")


def fold_finding(propagated: pd.DataFrame, weights: pd.DataFrame) -> Finding:
    """Does folding in float32 from (g, v) give exactly the recomputed weights, and outputs, on this CPU?"""
    fp32 = weights[weights.variant == "folded_fp32"].max_abs_diff.max()
    outputs = propagated[(propagated.variant == "folded_fp32") & (propagated.against == "weight_norm")]
    worst = outputs.max_abs_err.max()
    if fp32 == 0 and worst == 0:
        # equal by construction: the fold evaluates the very call the original makes at every forward, so nothing
        # here could have come out otherwise; a fact, checked, not a measurement of two computations
        claim = ("Folding weight norm once in float32 evaluates the same call (torch._weight_norm) on the same (g, v) "
                 "as the original's recomputation at every forward, so the weights are equal by construction "
                 "(checked) and the folded run is the original's computation, run once: a fact of the code, which "
                 "says the fold cannot be the investigation's error source; the precision section measures what can.")
        ours = (f"largest weight difference 0 over {_layers_per_init(weights[weights.variant == 'folded_fp32'])} "
                "(checked); the layer outputs are the original run's, not computed again")
        return Finding(claim=claim, ours=ours, verdict="fact",
                       evidence="tables/weights.parquet, tables/propagation.parquet")
    claim = (f"Folding weight norm in float32 does NOT reproduce the recomputed weights exactly on this CPU "
             f"(weights up to {significant(fp32)} apart, layer outputs up to {significant(worst)}): the fold "
             "itself rounds differently here.")
    ours = (f"largest weight difference {significant(fp32)}, largest layer-output difference {significant(worst)} "
            f"over {_layers_per_init(outputs, 'layer output')}")
    return Finding(claim=claim, ours=ours, verdict="new",
                   evidence="tables/weights.parquet, tables/propagation.parquet")


def rounding_finding(weights: pd.DataFrame, variant: str) -> Finding:
    """A fold that rounds differently (float64, as another device or kernel would) against the investigation's weight
    differences."""
    fp64 = weights[weights.variant == "folded_fp64"].groupby("init").max_abs_diff.max()
    low, high = published.value("weight_diff_min"), published.value("weight_diff_max")
    parts = ", ".join(f"{init} {significant(v)}" for init, v in fp64.items())
    claim = (f"Error appears only when the fold rounds differently: folding in float64 and casting moves the weights "
             f"by up to {parts}.")
    seed = _seed(f"per-layer weight differences {significant(low)} to {significant(high)}", "weight-differences list")
    ours = f"largest per-layer weight difference per init: {parts}"
    if variant != SEED_VARIANT:
        return Finding(claim=claim, ours=ours, verdict="not comparable", source=seed,
                       why=f"the investigation measured the 44.1 kHz model; this run is {variant}",
                       evidence="tables/weights.parquet")
    inside = [init for init, v in fp64.items() if low / SAME_SIZE_FACTOR <= v <= high * SAME_SIZE_FACTOR]
    if inside:
        return Finding(claim=claim + f" Under {', '.join(inside)} that is the investigation's size.", ours=ours,
                       verdict="reproduced", source=seed, evidence="tables/weights.parquet")
    return Finding(claim=claim, ours=ours, verdict="differs", source=seed,
                   why="no init's largest difference lies within a factor 2 of the investigation's range: the weights' "
                   "magnitudes (and so one ulp of them) differ from the trained checkpoint's",
                   evidence="tables/weights.parquet")


def growth_finding(growth: pd.DataFrame, variant: str, checkpoint: str = "") -> Finding:
    """Raw growth from Conv1 to the encoder output = activation growth x relative-error growth, per init."""
    parts = [f"{init}: {significant(g.conv1_error)} -> {significant(g.encoder_error)}, {times(g.amplification)} = "
             f"activations {times(g.activation_growth)} x relative error {times(g.relative_error_growth)}"
             for init, g in growth.iterrows()]
    claim = ("The raw growth of the error from Conv1 to the encoder output is activation growth times relative-error "
             "growth: " + "; ".join(parts) + ".")
    seed_total, seed_out = published.value("total_amplification"), published.value("encoder.Conv2")
    seed = _seed(f"encoder output error {significant(seed_out)}, x{count(seed_total)} from Conv1",
                 "error propagation table")
    ours = "; ".join(f"{init} {times(g.amplification)}" for init, g in growth.iterrows())
    if variant != SEED_VARIANT:
        return Finding(claim=claim, ours=ours, verdict="not comparable", source=seed,
                       why=f"the investigation measured the 44.1 kHz model; this run is {variant}",
                       evidence="tables/propagation.parquet")
    close = [init for init, g in growth.iterrows() if _within(g.amplification, seed_total)]
    if close:
        return Finding(claim=claim, ours=ours, verdict="reproduced", source=seed, evidence="tables/propagation.parquet")
    most = growth.activation_growth.idxmax()
    grown = (f"activations grow at most {times(growth.activation_growth.max())} here ({most}), the relative error at "
             f"most {times(growth.relative_error_growth.max())}")
    if checkpoint:
        return Finding(claim=claim, ours=ours, verdict="not comparable", source=seed,
                       why=f"{_named(checkpoint)}: {grown}, no total within {SAME_SIZE_FACTOR:g}x of its "
                       f"x{count(seed_total)}", evidence="tables/propagation.parquet")
    return Finding(claim=claim, ours=ours, verdict="not comparable", source=seed,
                   why=f"random weights, not the trained checkpoint the investigation ran: {grown}; its total needs "
                   "far larger growth, which trained weights may have (they cannot be downloaded here, so the two "
                   "cannot contradict each other; -p checkpoint runs yours)",
                   evidence="tables/propagation.parquet")


def _named(checkpoint: str) -> str:
    """Why a checkpoint of the investigation's configuration is still not its subject: nothing here can tell its
    weights from another training's (or from random ones saved), and only descript's published weights are the
    investigation's."""
    return (f"weights of the investigation's configuration from {PurePath(checkpoint).name}, which this run cannot "
            "tell from other weights: the investigation ran descript's published 44.1 kHz checkpoint; if this is "
            "that file, the two disagree")


def block_table(propagated: pd.DataFrame, variant: str) -> pd.DataFrame:
    """Growth per encoder block under each init, with the investigation's figure for the same block (44.1 kHz only)."""
    chain = seed_chain(propagated)
    chain = chain[chain.layer.isin(SEED_BLOCKS)]
    present = [b for b in SEED_BLOCKS if b in set(chain.layer)]  # the tiny model has two blocks
    table = chain.pivot_table(index="layer", columns="init", values="growth", sort=False).reindex(present)
    printed = pd.Series({b: published.value(f"growth.{b}") for b in SEED_BLOCKS})  # as the investigation printed it
    table["seed_002"] = printed.reindex(table.index) if variant == SEED_VARIANT else float("nan")
    return table.reset_index()


def amplifier_finding(propagated: pd.DataFrame, variant: str, checkpoint: str = "") -> Finding:
    """The largest amplifier among the encoder blocks, per init, beside the investigation's (Block0, x1897)."""
    table = block_table(propagated, variant).set_index("layer")
    inits = [c for c in table.columns if c != "seed_002"]
    tops = {init: (table[init].idxmax(), table[init].max()) for init in inits}
    parts = "; ".join(f"{init}: {layer.split('.')[-1]} {times(g)}" for init, (layer, g) in tops.items())
    claim = (f"The encoder block that multiplies the error most: {parts} (the error after the block over the error "
             "at its input; below x1 it shrinks).")
    seed_growth = published.value("growth.encoder.Block0")
    seed_text = ", ".join(f"{b.split('.')[-1]} x{published.value(f'growth.{b}'):g}" for b in SEED_BLOCKS)  # as printed
    seed = _seed(seed_text, "error propagation table")
    if variant != SEED_VARIANT:
        return Finding(claim=claim, ours=parts, verdict="not comparable", source=seed,
                       why=f"the investigation measured the 44.1 kHz model; this run is {variant}",
                       evidence="block growth table, tables/propagation.parquet")
    same = [init for init, (layer, g) in tops.items() if layer == "encoder.Block0" and _within(g, seed_growth)]
    if same:
        return Finding(claim=claim, ours=parts, verdict="reproduced", source=seed,
                       evidence="block growth table, tables/propagation.parquet")
    largest = f"no block here multiplies the error by more than {times(table[inits].max().max())}, its Block0 by " \
              f"{times(seed_growth)}"
    if checkpoint:
        return Finding(claim=claim, ours=parts, verdict="not comparable", source=seed,
                       why=f"{_named(checkpoint)}: {largest}",
                       evidence="block growth table, tables/propagation.parquet")
    return Finding(claim=claim, ours=parts, verdict="not comparable", source=seed,
                   why=f"random weights, not the trained checkpoint the investigation ran ({largest}; trained weights "
                   "cannot be downloaded here, so the two cannot contradict each other; -p checkpoint runs yours)",
                   evidence="block growth table, tables/propagation.parquet")


def codes_finding(codes: pd.DataFrame, margins: pd.DataFrame, propagated: pd.DataFrame) -> Finding:
    """Do the discrete codes survive, and how do the smallest margins compare with the error reaching them?"""
    float32 = codes[~codes.variant.isin(["weight_norm", "float64"])]
    differing = {init: g.fraction_differing.max() for init, g in float32.groupby("init", sort=False)}
    error = seed_chain(propagated)
    error = error[error.layer == ENCODER_OUTPUT].set_index("init").max_abs_err
    parts = "; ".join(f"{init}: {significant(100 * differing[init])}% of code frames differ, smallest winning margin "
                      f"{significant(margins[margins.init == init].min_margin.min())}, encoder output error up to "
                      f"{significant(error[init])}" for init in differing)
    seed = _seed("the quantizer's codes unaffected (test tolerance kept at 1e-6)", "closing notes")
    if max(differing.values()) == 0:
        # an unchanged argmax keeps the error at each frame's distances below its margin, unless the margin is 0
        tied = [init for init in differing if margins[margins.init == init].min_margin.min() == 0]
        claim = ("The codes survive: no float32 run changes a code; the error that reaches the quantizer's "
                 f"normalised distances stays below every frame's winning margin ({parts})")
        if tied:
            claim = ("The codes survive: no float32 run changes a code, though under "
                     f"{', '.join(tied)} a frame's two best codebook entries tie exactly in the weight-norm run "
                     f"(winning margin 0; {parts}): a tie every run broke the same way; other weights or another "
                     "CPU may break it differently")
        claim += "."
        return Finding(claim=claim, ours=parts, verdict="reproduced", source=seed, evidence="tables/codes.parquet")
    claim = f"Some codes flip between runs ({parts}): a near-tie whose margin is below the error reaching it."
    return Finding(claim=claim, ours=parts, verdict="differs", source=seed,
                   why="frames whose winning margin is smaller than the encoder error flip",
                   evidence="tables/codes.parquet")


def codec_finding(codec: pd.DataFrame, checkpoint: str = "") -> Finding:
    """Is the codec error the same for every run (the investigation: 'very similar')?"""
    ratios = codec_run_ratios(codec)
    worst = ratios.idxmax()
    per_init = "; ".join(f"{init}: {significant(r)}" for init, r in ratios.items())
    ours = (f"largest codec error {span(codec.codec_max_abs_err.min(), codec.codec_max_abs_err.max())}; "
            f"largest run-to-run difference against float64 over the same init's largest codec error: {per_init}")
    seed = _seed("codec error very similar for both implementations (tolerance kept at 1e-6)", "closing notes")
    if ratios.max() < CODEC_SAME:
        return Finding(claim=f"For the codec every run is the same: under every init, the largest difference "
                       f"between runs is at most {significant(ratios.max())} of that init's largest codec error "
                       f"({worst}{'' if checkpoint else '; random weights: the codec error is large'}).", ours=ours,
                       verdict="reproduced", source=seed, evidence="tables/codec.parquet")
    return Finding(claim=f"Under {worst} the runs differ by {significant(ratios.max())} of that init's largest codec "
                   "error: not negligible.", ours=ours, verdict="differs", source=seed,
                   why=f"the run-to-run difference reaches {significant(ratios.max())} of the largest codec error "
                   f"(at least {CODEC_SAME:g} counts as different)",
                   evidence="tables/codec.parquet")


def config_finding(configs: pd.DataFrame) -> Finding:
    """Do the published configurations pass the hop-length check, and is the investigation's stale one caught?"""
    published = configs[configs.case.isin(["16khz", "24khz", "44khz"])]
    failing = published[published.result != "consistent"]
    stale = configs[~configs.case.isin(["16khz", "24khz", "44khz"])]
    caught = (stale.result != "consistent").all() and len(stale) > 0
    ours = (f"{count(len(published) - len(failing))} of {count(len(published))} published configurations consistent; "
            f"stale configuration {'caught' if caught else 'NOT caught'}")
    seed = ("hop length 512 instead of 320 for 16 and 24 kHz failed 3 of 6 integration tests (the DAC "
            "integration-test fix, hop-length "
            "note, DAC 16 and 24 kHz configurations)")
    if failing.empty and caught:
        return Finding(claim="The library's own 16, 24 and 44.1 kHz configurations pass the hop-length check, and the "
                       "investigation's bug (ratios set after construction, hop_length left at 512) is caught.",
                       ours=ours, verdict="new", evidence="configuration check table")
    return Finding(claim=f"The hop-length check does not behave as expected: failing published configurations: "
                   f"{', '.join(failing.case) or 'none'}; stale configuration {'caught' if caught else 'missed'}.",
                   ours=ours, verdict="differs", source=seed, why="see the configuration check table",
                   evidence="configuration check table")


def other_codes_finding(others: pd.DataFrame) -> Finding:
    """The codes on the other configurations (`other_rates`' rows): the main run's codes finding speaks of its own
    model only, and a flip on another would otherwise be told at the report's end alone."""
    flipped = others[others.codes_differing_pct > 0]
    seconds = span(others.seconds.min(), others.seconds.max())
    runs = f"{count(len(others))} runs of {', '.join(dict.fromkeys(others.variant))} at {seconds} s"
    if len(flipped):
        parts = "; ".join(f"{r.variant} {r.init}: {significant(r.codes_differing_pct)}% of code frames"
                          for r in flipped.itertuples())
        claim = f"On the other configurations a float32 run changes codes ({parts}): near-ties flip there."
    else:
        claim = "On the other configurations no float32 run changes a code either."
    most = significant(others.codes_differing_pct.max())
    return Finding(claim=claim, ours=f"{runs}; code frames changed: up to {most}%", verdict="new",
                   evidence="tables/other_variants.parquet")


def findings(propagated: pd.DataFrame, weights: pd.DataFrame, growth: pd.DataFrame, codes: pd.DataFrame,
             margins: pd.DataFrame, codec: pd.DataFrame, configs: pd.DataFrame, variant: str,
             others: pd.DataFrame | None = None, checkpoint: str = "") -> list[Finding]:
    """Every finding; `checkpoint`: the user's own weights ran in the inits' place (then a trained model of the
    investigation's configuration can disagree with it, where random weights are not comparable)."""
    return [fold_finding(propagated, weights), rounding_finding(weights, variant),
            growth_finding(growth, variant, checkpoint), amplifier_finding(propagated, variant, checkpoint),
            _on_seed_variant(codes_finding(codes, margins, propagated), variant),
            _on_seed_variant(codec_finding(codec, checkpoint), variant), config_finding(configs)] + (
        [other_codes_finding(others)] if others is not None and len(others) else [])
