"""How a tiny weight difference grows through the DAC encoder and decoder, and why the codes survive it.

Memory stays flat in the clip's length: no layer output is kept. The four runs of one checkpoint share one
copy of the weights (`dac.build_variant`), go through each window of the clip together one layer at a time
(`dac_chunks.lockstep`), and each layer's outputs are reduced to statistics (largest and summed difference
against each reference, sum of squares) before the next layer runs. A run whose every weight, bias and buffer is
an earlier run's bit for bit (the float32 fold, on this CPU) is that run's computation and runs once
(`dac.twin_runs`). A clip of at most
`dac_chunks.CHUNK_FRAMES` latent frames runs whole, as the library runs it; a longer one in windows whose
context covers every kept value's receptive field (see `dac_chunks`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from exactness import published
from exactness.models import dac, dac_chunks
from exactness.models.dac_chunks import CHUNK_FRAMES

REFERENCES = ("weight_norm", "float64")
# The investigation's comparison: weights folded in float64 (its conversion) against weight norm recomputed (the
# original codebase), and the two ends of its growth, the first convolution and the encoder output
# (`dac_chunks.encoder_steps` labels them so).
SEED_RUN, SEED_REFERENCE = "folded_fp64", "weight_norm"
FIRST_LAYER, ENCODER_OUTPUT = "encoder.Conv1", "encoder.Conv2"


def checkpoint_path(checkpoint: str) -> Path:
    """A `checkpoint` parameter as a path: absolute, or relative to the project's root (as `exactness run` checks
    it), never to the notebook's run folder."""
    from exactness.workbook.project import find_root

    return Path(checkpoint) if Path(checkpoint).is_absolute() else find_root() / checkpoint


def templates(variant: str, seed: int, inits: list[str], checkpoint: str = "") -> dict[str, Callable[[], object]]:
    """The plain models the study runs, by name, each built when it runs (one in memory at a time): each init's
    random weights, or in their place a checkpoint of the user's own, named by its file. A checkpoint is read once
    here, so that one that is not `variant`'s configuration is refused before any run; the first build is that
    read."""
    if not checkpoint:
        return {init: functools.partial(dac.template, variant, seed, init) for init in inits}
    from exactness.models import dac_checkpoints

    path = checkpoint_path(checkpoint)
    first = [dac_checkpoints.load(path, variant)]
    return {path.name: lambda: first.pop() if first else dac_checkpoints.load(path, variant)}


def layers(model) -> list[tuple[str, str, str]]:
    """(label, module path, role) along the encoder then the decoder; role 'main' is the path the signal
    takes, 'inner' a residual unit inside a block (its growth is measured from the block's input)."""
    return [(s.label, s.path, s.role) for s in dac_chunks.encoder_steps(model) + dac_chunks.decoder_steps(model)]


def _cast(x: torch.Tensor, model) -> torch.Tensor:
    return x.to(next(model.parameters()).dtype)


def _identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same values in the same dtype (NaN never equals itself, so a NaN takes the long way)."""
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def _larger(a: float, b: float) -> float:
    """max(a, b) that keeps a NaN as torch's max does (Python's max(-inf, nan) is -inf)."""
    return a if math.isnan(a) or (not math.isnan(b) and a >= b) else b


class LayerStatistics:
    """Per run and layer, what the table needs and nothing more: the sum of squares of the output (for its
    RMS) and, against each reference run listed before it, the largest and the summed |difference|.

    Sums are added window by window; over one window they are torch's own sums, so mean = sum / n is exactly
    `tensor.mean()` (torch's CPU mean is its sum divided by n). Over several windows the sum's order differs
    from a whole-tensor reduction: the mean and RMS then agree with it to a few ulps, the largest values
    exactly. A run whose output equals an earlier run's bit for bit (the float32 fold computes the weights
    weight norm recomputes, so its run is weight norm's) takes that run's numbers without recomputing them:
    the same values give the same sums, and |x - x| is +0.0 everywhere."""

    def __init__(self, order: list[str]):
        self.order = order
        self.against = {v: [r for r in order[:i] if r in REFERENCES] for i, v in enumerate(order)}
        self.sums: dict[tuple[str, str], dict] = {}
        self._last: dict = {}

    def _measure(self, outputs: dict[str, torch.Tensor]) -> dict:
        wide: dict[str, torch.Tensor] = {}
        numbers: dict[str, dict] = {}
        for variant in self.order:
            value = outputs[variant]
            # finite sums only: an infinity would give inf - inf = NaN where the shortcut says 0
            twin = next((seen for seen in numbers if math.isfinite(numbers[seen]["squares"])
                         and _identical(outputs[seen], value)), None)
            entry: dict = {"count": value.numel()}
            for reference in self.against[variant]:
                if reference == twin:
                    entry[reference] = (0.0, 0.0)  # what |x - x| gives: +0.0 everywhere
                elif twin is not None and reference in numbers[twin]:
                    entry[reference] = numbers[twin][reference]
                else:  # float32 minus float64 promotes exactly as value.double() would, without the copy
                    error = torch.sub(value, wide[reference]).abs_()
                    entry[reference] = (float(error.max()), float(error.sum()))
                    del error
            if variant in REFERENCES:
                wide[variant] = value.double()
            if twin is not None:  # the same values: the same sum of squares
                entry["squares"] = numbers[twin]["squares"]
            elif variant in REFERENCES:
                entry["squares"] = float(wide[variant].square().sum())
            else:  # its own float64 copy, squared in place (x * x, as square() computes it)
                entry["squares"] = float(value.to(torch.float64, copy=True).square_().sum())
            numbers[variant] = entry
        return numbers

    def add(self, step: dac_chunks.Step, outputs: dict[str, torch.Tensor]) -> None:
        if outputs[self.order[0]].numel() == 0:
            return
        numbers = self._last if step.same_as_previous else self._measure(outputs)
        self._last = numbers
        for variant, entry in numbers.items():
            total = self.sums.setdefault((variant, step.path), {"squares": 0.0, "count": 0})
            total["squares"] += entry["squares"]
            total["count"] += entry["count"]
            for reference in self.against[variant]:
                largest, summed = total.get(reference, (-math.inf, 0.0))
                total[reference] = (_larger(largest, entry[reference][0]), summed + entry[reference][1])

    def rows(self, model) -> list[dict]:
        rows = []
        for variant in self.order:
            for depth, (label, path, role) in enumerate(layers(model)):
                total = self.sums[(variant, path)]
                # torch's float64 sqrt, as `tensor.square().mean().sqrt()` takes it: it is not always math.sqrt's
                # correctly rounded one (about 1 value in 70 differs by an ulp)
                rms = float(torch.tensor(total["squares"] / total["count"], dtype=torch.float64).sqrt())
                for reference in (r for r in REFERENCES if r in total):
                    max_err, summed = total[reference]
                    mean_err = summed / total["count"]
                    rows.append({"variant": variant, "against": reference, "layer": label, "depth": depth,
                                 "role": role, "max_abs_err": max_err, "mean_abs_err": mean_err, "act_rms": rms,
                                 "rel_err": max_err / rms if rms else np.nan})
        return rows


def propagate(plain, audio: torch.Tensor, variants=dac.VARIANTS,
              chunk_frames: int = CHUNK_FRAMES) -> tuple[pd.DataFrame, dict]:
    """Error per layer of every variant against each reference (float64 first, then weight norm), plus
    each variant's codes, quantized representation, the quantizer's projected latents, and the audio decoded
    from the shared codes (weight norm's: every decoder gets these)."""
    if "weight_norm" not in variants:
        raise ValueError(f"variants must include weight_norm (its codes feed every decoder), got {list(variants)}")
    order = [v for v in ("float64", "weight_norm") if v in variants] + [v for v in variants if v not in REFERENCES]
    models = {v: dac.build_variant(plain, v, shared=True) for v in order}
    twins = dac.twin_runs(models)
    running = {v: m for v, m in models.items() if v not in twins}
    statistics = LayerStatistics(order)

    def with_twins(outputs: dict) -> dict:
        return outputs | {twin: outputs[run] for twin, run in twins.items()}

    def measure(step: dac_chunks.Step, outputs: dict) -> None:  # each layer's outputs, reduced before the next
        statistics.add(step, with_twins(outputs))

    plan = dac_chunks.encoder_windows(plain, audio.shape[-1], chunk_frames)
    latents = with_twins(dac_chunks.lockstep(running, {v: _cast(audio, models[v]) for v in running},
                                             dac_chunks.encoder_steps(plain), plan, measure))
    results = {}
    with torch.no_grad():
        for variant in order:
            quantized, codes, projected, _, _ = models[variant].quantizer(latents.pop(variant))
            results[variant] = {"codes": codes, "quantized": quantized, "projected": projected}
        codes = results["weight_norm"]["codes"]
        inputs = {v: models[v].quantizer.from_codes(codes)[0] for v in running}  # the decoder fed identical codes
    plan = dac_chunks.decoder_windows(plain, codes.shape[-1], chunk_frames)
    decoded = with_twins(dac_chunks.lockstep(running, inputs, dac_chunks.decoder_steps(plain), plan, measure))
    with torch.no_grad():
        for variant in order:
            results[variant]["audio"] = models[variant].decoder.tanh(decoded.pop(variant)).squeeze(1)
    table = _with_growth(pd.DataFrame(statistics.rows(plain)))
    return table, {"codes": codes, "results": results, "models": models, "chunk_frames": chunk_frames,
                   "twins": twins}


def _with_growth(table: pd.DataFrame) -> pd.DataFrame:
    """growth: error over the error at the input of this layer (the previous main-path layer), as the seed
    measured it; a residual unit is measured from its block's input."""
    table = table.sort_values(["variant", "against", "depth"]).copy()
    growth = []
    for _, group in table.groupby(["variant", "against"], sort=False):
        previous_main = np.nan
        for row in group.itertuples():
            if row.layer == "decoder.Conv1":  # the decoder starts from identical codes: a new chain
                previous_main = np.nan
            growth.append(row.max_abs_err / previous_main if previous_main else np.nan)
            if row.role == "main":
                previous_main = row.max_abs_err
    table["growth"] = growth
    return table.reset_index(drop=True)


def seed_chain(propagation: pd.DataFrame) -> pd.DataFrame:
    """The investigation's comparison, layer by layer: weights folded in float64 against weight norm recomputed."""
    return propagation[(propagation.variant == SEED_RUN) & (propagation.against == SEED_REFERENCE)]


def encoder_growth(propagation: pd.DataFrame) -> pd.DataFrame:
    """Per init, from Conv1 to the encoder output: error, its growth, the activations' growth, and the
    growth of the relative error (which tells error growth from activation growth)."""
    rows = []
    for init, chain in seed_chain(propagation).groupby("init", sort=False):
        first = chain[chain.layer == FIRST_LAYER].iloc[0]
        last = chain[chain.layer == ENCODER_OUTPUT].iloc[0]
        error = last.max_abs_err / first.max_abs_err if first.max_abs_err else float("inf")
        activations = last.act_rms / first.act_rms
        rows.append({"init": init, "conv1_error": first.max_abs_err, "encoder_error": last.max_abs_err,
                     "amplification": error, "activation_growth": activations,
                     "relative_error_growth": error / activations})
    return pd.DataFrame(rows).set_index("init")


def _largest_difference(a: torch.Tensor, b: torch.Tensor, elements: int = 1 << 22) -> float:
    """max |a - b| in float64: the exact maximum, without float64 copies of a whole large layer.

    Two shortcuts give the same number as the float64 blocks: identical tensors differ by 0.0 everywhere, and
    for two float32 tensors the float32 differences are computed first. Rounding to nearest is monotone, so
    the element whose float64 difference is largest also has the largest float32 difference: only the
    elements at that float32 value are recomputed in float64. Where a difference is NaN (a NaN, or inf - inf)
    the float64 blocks run as they always did (their largest value then depends on the block the NaN is in)."""
    if _identical(a, b) and bool(torch.isfinite(a).all()):  # inf - inf would be NaN, not 0
        return 0.0
    if a.dtype == b.dtype == torch.float32 and a.shape == b.shape:
        rounded = torch.sub(a, b).abs_()
        top = rounded.max()
        if not torch.isnan(top):
            at = rounded == top
            return float((a[at].double() - b[at].double()).abs().max())
    rows = max(1, elements // max(1, a[0].numel()))
    return max(float((a[i:i + rows].double() - b[i:i + rows].double()).abs().max()) for i in range(0, len(a), rows))


def weight_table(models: dict) -> pd.DataFrame:
    """Per weight-normed layer, how far each variant's effective weight is from the recomputed one (one
    layer's weights at a time)."""
    reference = dict(dac.weight_paths(models["weight_norm"]))
    walks = {variant: dac.weight_paths(model) for variant, model in models.items()}
    rows: dict[str, list[dict]] = {variant: [] for variant in models}
    with torch.no_grad():
        for index, name in enumerate(reference):
            recomputed = reference[name].weight  # computed from (g, v) at each access: once per layer here
            for variant, walk in walks.items():
                layer_name, layer = walk[index]
                assert layer_name == name, f"{variant}'s layer {index} is {layer_name}, weight_norm's {name}"
                weight = recomputed if layer is reference[name] else layer.weight
                rows[variant].append({"variant": variant, "layer": name,
                                      "max_abs_diff": _largest_difference(weight, recomputed)})
    return pd.DataFrame([row for variant in models for row in rows[variant]])


def code_margins_from(model, projected: torch.Tensor) -> pd.DataFrame:
    """Per codebook and frame: how far the chosen codebook entry beats the runner-up (the near-tie view:
    a code only flips when the latent error exceeds this margin), from the quantizer's projected latents
    (each codebook's `in_proj` output, as `quantizer(...)` returns them)."""
    rows, offset = [], 0
    with torch.no_grad():
        for k, q in enumerate(model.quantizer.quantizers):
            width = q.in_proj.out_channels
            latent = projected[:, offset:offset + width]
            offset += width
            encodings = torch.nn.functional.normalize(latent.permute(0, 2, 1).reshape(-1, latent.shape[1]))
            codebook = torch.nn.functional.normalize(q.codebook.weight)
            # the same distance DacVectorQuantize.decode_latents maximises
            squared = encodings.pow(2).sum(1, keepdim=True)
            dist = -(squared - 2 * encodings @ codebook.t()) + codebook.pow(2).sum(1).unsqueeze(0)
            top = dist.topk(2, dim=1).values
            margin = (top[:, 0] - top[:, 1]).double()
            rows.append({"codebook": k, "frames": margin.numel(), "min_margin": float(margin.min()),
                         "median_margin": float(margin.median()),
                         "margins_below_1e-4": int((margin < 1e-4).sum())})
    return pd.DataFrame(rows)


@torch.no_grad()
def code_margins(model, audio: torch.Tensor) -> pd.DataFrame:
    """`code_margins_from` after encoding `audio` (whole)."""
    return code_margins_from(model, model.encode(_cast(audio, model)).projected_latents)


def code_agreement(codes: dict[str, torch.Tensor], reference: str = "weight_norm") -> pd.DataFrame:
    rows = []
    for variant, value in codes.items():
        differs = (value != codes[reference])
        for k in range(value.shape[1]):
            rows.append({"variant": variant, "codebook": k, "fraction_differing": float(differs[:, k].double().mean())})
    return pd.DataFrame(rows)


@torch.no_grad()
def codec_errors(extra: dict, audio: torch.Tensor) -> pd.DataFrame:
    """Per variant (from `propagate`'s results): codec error (own decode against the input, over the samples
    both have), decoded audio from the shared codes against float64's, and decoding from codes against
    decoding from the quantized representation (each decode in the same windows as `propagate`'s)."""
    results, models = extra["results"], extra["models"]
    reference = results["float64"]["audio"].double()
    twins, rows, kept = extra.get("twins", {}), [], {}
    for variant, model in models.items():
        from_codes = results[variant]["audio"].double()
        if variant in twins:  # the same computation on the same quantized representation
            own = kept[twins[variant]]
        else:
            own = dac_chunks.decode(model, results[variant]["quantized"], extra["chunk_frames"]).double()
        if variant in twins.values():
            kept[variant] = own
        n = min(own.shape[-1], audio.shape[-1])
        error = own[..., :n] - audio[:, 0, :n].double()
        rows.append({"variant": variant, "codec_max_abs_err": float(error.abs().max()),
                     "codec_rms_err": float(error.square().mean().sqrt()),
                     "decoded_vs_float64": float((from_codes - reference).abs().max()),
                     "codes_vs_quantized_decode": float((from_codes - own).abs().max()),
                     "samples_in": audio.shape[-1], "samples_out": own.shape[-1]})
    return pd.DataFrame(rows)


def one_init(plain, audio: torch.Tensor, chunk_frames: int = CHUNK_FRAMES) -> dict[str, pd.DataFrame]:
    """Every table of one template: propagation, weights, codes (agreement), margins and codec. The runs are
    dropped on return, so one template's weights are in memory at a time."""
    table, extra = propagate(plain, audio, chunk_frames=chunk_frames)
    results = extra["results"]
    return {"propagation": table, "weights": weight_table(extra["models"]),
            "codes": code_agreement({v: r["codes"] for v, r in results.items()}),
            "margins": code_margins_from(extra["models"]["weight_norm"], results["weight_norm"]["projected"]),
            "codec": codec_errors(extra, audio)}


def other_rates(variants: list[str], seconds: float, seed: int, audio_seed: int, inits: list[str]) -> pd.DataFrame:
    """The same study on other configurations (the paper runs the 16 and 24 kHz models at 10 s), one row per
    variant and init: whether the float32 fold is exact, the float64 fold's error from Conv1 to the encoder
    output (and its two factors), how many code frames any float32 run changes, and the decoded audio's
    largest difference from float64's."""
    rows = []
    for variant in variants:
        signal = dac.audio(variant, seconds, audio_seed)
        for init in inits:
            tables = one_init(dac.template(variant, seed, init), signal)
            table = tables["propagation"].assign(init=init)
            growth = encoder_growth(table).loc[init]
            folded = tables["weights"][tables["weights"].variant == "folded_fp32"].max_abs_diff.max()
            outputs = table[(table.variant == "folded_fp32") & (table.against == "weight_norm")].max_abs_err.max()
            codes = tables["codes"]
            rows.append({"variant": variant, "init": init, "seconds": seconds,
                         "fold_fp32_exact": bool(folded == 0 and outputs == 0),
                         "conv1_error": growth.conv1_error, "encoder_error": growth.encoder_error,
                         "amplification": growth.amplification, "activation_growth": growth.activation_growth,
                         "relative_error_growth": growth.relative_error_growth,
                         "codes_differing_pct": 100 * codes[codes.variant.isin(["folded_fp32", "folded_fp64"])]
                         .fraction_differing.max(),
                         "decoded_vs_float64": tables["codec"].decoded_vs_float64.max()})
    return pd.DataFrame(rows)


def codec_run_ratios(codec: pd.DataFrame) -> pd.Series:
    """Per init: the largest difference between a run's decoded audio and the float64 run's, over the smallest
    largest codec error (decoded audio against the input) of the same init's runs: both from one set of weights,
    both a largest absolute difference."""
    grouped = codec.groupby("init", sort=False)
    return grouped.decoded_vs_float64.max() / grouped.codec_max_abs_err.min()


PUBLISHED = ("16khz", "24khz", "44khz")


def against_float64(propagated: pd.DataFrame) -> pd.DataFrame:
    """Each run against float64 at the encoder's input and output and the decoder's output."""
    ends = [FIRST_LAYER, ENCODER_OUTPUT, "decoder.Conv2"]
    return propagated[(propagated.against == "float64") & propagated.layer.isin(ends)]


def summary_values(growth: pd.DataFrame, weights: pd.DataFrame) -> dict:
    """summary.json's figures: ours beside the investigation's where the investigation measured the same quantity."""
    values = {f"{init}_encoder_error": {"ours": g.encoder_error, "seed": published.value("encoder.Conv2")}
              for init, g in growth.iterrows()}
    values.update({f"{init}_amplification": {"ours": g.amplification, "seed": published.value("total_amplification")}
                   for init, g in growth.iterrows()})
    values["fold_fp32_bit_identical"] = bool(weights[weights.variant == "folded_fp32"].max_abs_diff.max() == 0)
    return values
