"""The DAC propagation notebook's words: one computed sentence per section, each reading the run's tables
and nothing else, and the precision section as the reader sees it."""

from __future__ import annotations

import pandas as pd

from exactness.runtimes.sides import Side, emulation_note
from exactness.studies.dac_propagation.figures import run_name
from exactness.studies.dac_propagation.precision import AGREE_FACTOR, Pattern, beside_investigation, patterns
from exactness.studies.dac_propagation.study import (
    ENCODER_OUTPUT,
    PUBLISHED,
    against_float64,
    codec_run_ratios,
    seed_chain,
)
from exactness.workbook.findings import count, significant, span
from exactness.workbook.presentation import say, table
from exactness.workbook.wording import machine_words


def other_rates_caption(seconds: float, checkpoint: str = "") -> str:
    """The other configurations' caption: random inits always, said so where a checkpoint ran above."""
    return (f"Per configuration and init{' (random weights, not your checkpoint)' if checkpoint else ''}, "
            f"{seconds:g} s of audio: the float64 fold against weight norm recomputed, as above (the growth's two "
            "factors: in the full table).")


def other_rates_sentence(others: pd.DataFrame) -> str:
    """One computed sentence over `other_rates`' rows."""
    if others.empty:
        return "No other configuration was asked for (other_variants is empty; paper.yaml runs 16khz and 24khz)."
    exact = int(others.fold_fp32_exact.sum())
    parts = "; ".join(f"{r.variant} {r.init}: x{significant(r.amplification, 3)} = activations "
                      f"x{significant(r.activation_growth, 3)} x relative error "
                      f"x{significant(r.relative_error_growth, 3)}" for r in others.itertuples())
    flips = others.codes_differing_pct.max()
    return (f"Folding in float32 is exact in {count(exact)} of {count(len(others))} runs; the float64 fold's error "
            f"from Conv1 to the encoder output: {parts}. Code frames changed by a float32 run: "
            + (f"up to {significant(flips)}%." if flips > 0 else "none."))


def pattern_sentence(found: list[Pattern], init: str) -> str:
    words = [f"{p.side}: Conv1 {significant(p.first)}, Block0 {significant(p.jump)} "
             f"({'reproduces' if p.reproduces else 'does not reproduce'})" for p in found]
    return (f"Init {init}, the investigation's comparison (folded in float64 against weight norm recomputed), "
            f"against its Conv1 {significant(found[0].first_ref)} and Block0 {significant(found[0].jump_ref)} "
            f"(within {AGREE_FACTOR:g}x each counts as reproduced): " + "; ".join(words) + ".")


def emulation_words(precisions: list[str]) -> str:
    return emulation_note([Side.parse(f"eager:cpu:{p}") for p in precisions])


def show_precision(chain: pd.DataFrame, gpu_facts: dict, precisions: list[str], artifacts) -> None:
    """The precision section: the chains (`precision.with_gpu_rows`), a table and a sentence per init."""
    if not len(chain):
        say("No other precision asked for (`precisions` is empty and no `gpu_run`): the comparison above is float32.")
        return
    artifacts.table("precision_chain", chain)
    if gpu_facts:
        say(f"The CUDA rows were measured on {machine_words(gpu_facts)} by `python -m exactness.gpu`, on the 44.1 "
            "kHz model and 1 s of audio; the emulated rows on this CPU, with this run's model and clip.")
    for init, part in chain.groupby("init", sort=False):
        table(beside_investigation(part), caption=f"Init {init}: the largest |difference| after each encoder layer, "
              "per side, beside the investigation's figure.")
        say(pattern_sentence(patterns(part), init))
    say(emulation_words(precisions))


def config_sentence(configs: pd.DataFrame) -> str:
    published = configs[configs.case.isin(PUBLISHED)]
    stale = configs[~configs.case.isin(PUBLISHED)]
    caught = len(stale) > 0 and bool((stale.result != "consistent").all())
    return (f"{count(int((published.result == 'consistent').sum()))} of {count(len(published))} published "
            f"configurations pass the check; the stale configuration is {'caught' if caught else 'NOT caught'}.")


def fold_sentence(weights: pd.DataFrame) -> str:
    same = weights[weights.variant == "folded_fp32"].max_abs_diff.max() == 0
    fp64 = weights[weights.variant == "folded_fp64"].max_abs_diff.max()
    return (f"Folding in float32 on this machine gives {'exactly' if same else 'NOT exactly'} the weights the "
            f"original recomputes; folding in float64 moves them by up to {significant(fp64)}.")


def growth_sentence(growth: pd.DataFrame) -> str:
    return "; ".join(f"{init}: encoder output error {significant(g.encoder_error)}, {times(g.amplification)} from Conv1"
                     for init, g in growth.iterrows()) + "."


def closeness_sentence(propagated: pd.DataFrame, growth: pd.DataFrame) -> str:
    """The growth's two factors per init, and the runs ranked by their distance from float64 at the encoder
    output; runs whose errors are equal are identical there and are named together, never ranked."""
    parts = [f"{init}: error {times(g.amplification)} = activations {times(g.activation_growth)} x relative error "
             f"{times(g.relative_error_growth)}" for init, g in growth.iterrows()]
    rel = against_float64(propagated)
    orders = []
    for (init, layer), group in rel[rel.layer.isin(["encoder.Conv2", "decoder.Conv2"])].groupby(["init", "layer"],
                                                                                                   sort=False):
        at = group.groupby("variant").rel_err.max()
        ranked = [" / ".join(sorted(run_name(n) for n in names)) for _, names in sorted(at.groupby(at).groups.items())]
        where = "encoder output" if layer == "encoder.Conv2" else "decoder output"
        orders.append(f"{init} at the {where}: " + (f"all identical ({ranked[0]})" if len(ranked) == 1 else
                                                     ", ".join(ranked)))
    return (f"From Conv1 to the encoder output, {'; '.join(parts)}. Closest to float64 first (runs joined by / are "
            f"identical), per init and end, since the order changes with both: {'; '.join(orders)}.")


def codes_sentence(codes: pd.DataFrame, margins: pd.DataFrame, propagated: pd.DataFrame) -> str:
    error = seed_chain(propagated)
    error = error[error.layer == ENCODER_OUTPUT].set_index("init").max_abs_err
    changed = codes[codes.variant != "weight_norm"].groupby("init", sort=False).fraction_differing.max()
    parts = [f"{init}: {significant(100 * changed[init])}% of code frames differ; the smallest winning margin is "
             f"{significant(margins[margins.init == init].min_margin.min())} and the largest encoder error "
             f"{significant(error[init])}" for init in changed.index]
    return ("; ".join(parts) + ". The margin is a distance between normalised projections, not in the encoder's "
            "units: a code flips only where the error, carried through the quantizer's projection, exceeds it "
            "(a near-tie again).")


def codec_sentence(codec: pd.DataFrame, checkpoint: str = "") -> str:
    ratios = codec_run_ratios(codec)
    return ("The codec error (" + "; ".join(
        f"{init}: {span(g.codec_rms_err.min(), g.codec_rms_err.max())} RMS and "
        f"{span(g.codec_max_abs_err.min(), g.codec_max_abs_err.max())} at most, runs at most "
        f"{significant(g.decoded_vs_float64.max())} from float64 ({significant(ratios[init])} of the largest error)"
        for init, g in codec.groupby("init", sort=False))
            + (")." if checkpoint else "; random weights make the codec error large)."))


def times(factor: float) -> str:
    return f"x{significant(factor, 3)}"


def error_depth_caption(propagated: pd.DataFrame, against: str) -> str:
    """The error-along-depth figure's caption against one reference run, with the largest difference it shows."""
    shown = propagated[propagated.against == against]
    worst = shown.loc[shown.max_abs_err.idxmax()]
    return (f"Top: the largest absolute difference from the {run_name(against)} run at each layer's output (log "
            "scale); middle: that difference over the layer's activation RMS; bottom: the activation RMS. Colour: run, "
            "line style: init; a run identical to another is one line named for both; runs identical to the reference "
            f"have no points. Largest: {significant(worst.max_abs_err)} ({run_name(worst.variant)}, {worst.init}, "
            f"{worst.layer}).")


def error_depth_alt(against: str) -> str:
    return ("Three log-scale panels over the DAC layers (Conv1, Block0 to Block3, Snake1, Conv2 of the encoder, then "
            f"the decoder): absolute error against {run_name(against)}, relative error and activation RMS, per run and "
            "init.")
