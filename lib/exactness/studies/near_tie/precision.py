"""The quantizer's argmax under another runner's precision: two eager sides (`runtimes.sides.Pair`), every seed.

A CI runner on a GPU computes the convolutions in TF32 unless told otherwise; its flips are not the CPU's rare
near-ties but TF32's noise, about a thousand times larger. Because that noise is large, every seed is compared (no
gap threshold): both sides' quantizer logits (the fast replay or a plain forward, as the screen), each row's code,
and `codevector_perplexity` computed from each side's codes with the quantizer's own function as that side
computes it (in bf16/fp16 autocast the function itself rounds), judged by the export test's rule for a scalar.

The prediction asks whether the gap-noise law extrapolates to this noise. The first `calibration` seeds measure
the law (every row's change of the reference's top-1 minus top-2 difference on the other side); the rest are
predicted from their own gaps and compared with what they did. Two forms: the study's law for ONNX Runtime (the
smallest-gap row alone) and every row (`1 - prod(1 - P(noise < -gap))` over a seed's smallest gaps), each with a
95% interval from a bootstrap over the calibration seeds and a Poisson draw.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from exactness import compat
from exactness.compare.tie_aware import top_two
from exactness.engine.pairs import PairEvidence
from exactness.models import wav2vec2_family as family
from exactness.models.quantizer_logits import FastLogits, plain_logits
from exactness.runtimes import worker_state
from exactness.runtimes.sides import Pair, Runtime, SideError
from exactness.studies.near_tie.prediction import RANDOM_SEED, Predicted, forecast
from exactness.workbook import sweep

FLOAT64_SEEDS = 20  # calibration seeds whose logits are also computed in float64: each side's error from it
SMALLEST_ROWS = 64  # the gaps a seed keeps for the prediction; the table says whether the 64th is out of reach
# replicates of a pair's forecast: each looks up every kept row of every held-out seed (a GPU folder's 19,685 seeds x 64
# rows, six pairs: 18 s at 200, 3 min at the ORT forecast's 2,000)
BOOTSTRAP = 200

PAIR_COLUMNS = ["model", "pair", "seed", "n_flipped_rows", "flipped_gap_max", "min_gap", "max_logit_diff",
                "perplexity_reference", "perplexity_other", "perplexity_allowed", "test_rule_passed",
                "calibration", "reference_error_units", "other_error_units"]

def _fast(model: str) -> FastLogits:
    return worker_state.current().made_by(FastLogits, model)  # one per model class and process


def eager_pairs(specs: Sequence[str]) -> list[Pair]:
    """The pairs this part compares; ONNX Runtime's pair is the rest of the study (one line for anything else)."""
    pairs = [Pair.parse(spec) for spec in specs]
    for pair in pairs:
        if Runtime.ORT in (pair.reference.runtime, pair.other.runtime):
            raise SideError(f"pair {pair.spec!r}: an ONNX Runtime side is the study's main comparison (eager CPU fp32 "
                            "vs ORT CPU fp32); the pairs compare two eager sides")
        if pair.needs_cuda and not torch.cuda.is_available():
            raise SideError(f"pair {pair.spec!r}: this machine has no CUDA device; run the GPU command "
                            "(python -m exactness.gpu) where one is, or compare an emulated side (eager:cpu:tf32-conv)")
    return pairs


@dataclass
class _Seed:
    row: dict
    deltas: np.ndarray  # every row's change of the reference's top-1 minus top-2 difference on the other side
    smallest: np.ndarray  # the reference's SMALLEST_ROWS smallest gaps


def compare_seed(model: str, pair: Pair, seed: int, atol: float, rtol: float, fast_paths: bool = True,
                 float64: bool = False) -> _Seed:
    """`float64`: also each side's largest error from a float64 forward, in units of that side's unit roundoff
    times the float64 logits' RMS (NaN otherwise): noise is a few such units on both sides; a defect is not."""
    if fast_paths:
        fast = _fast(model)
        reference, other = fast(seed, pair.reference), fast(seed, pair.other)
    else:
        reference, other = plain_logits(model, seed, pair.reference), plain_logits(model, seed, pair.other)
    dtypes = reference.dtype, other.dtype
    reference, other = reference.float(), other.float()
    codes_other = other.argmax(-1)
    # the export test's perplexity is computed as each side computes it: in the side's own dtype and precision
    p_ref = _perplexity(model, reference.argmax(-1), reference.shape, dtypes[0], pair.reference)
    p_other = _perplexity(model, codes_other, other.shape, dtypes[1], pair.other)
    gaps = top_two(reference)
    rows = torch.arange(len(reference))
    delta = (other[rows, gaps.top1_index] - other[rows, gaps.top2_index]) - gaps.gap
    flipped = codes_other != gaps.top1_index
    allowed = atol + rtol * abs(p_ref)
    row = {"model": model, "pair": pair.spec, "seed": int(seed), "n_flipped_rows": int(flipped.sum()),
           "flipped_gap_max": float(gaps.gap[flipped].max()) if flipped.any() else float("nan"),
           "min_gap": float(gaps.gap.min()), "max_logit_diff": float((other - reference).abs().max()),
           "perplexity_reference": p_ref, "perplexity_other": p_other, "perplexity_allowed": allowed,
           "test_rule_passed": bool(abs(p_other - p_ref) <= allowed),
           "reference_error_units": float("nan"), "other_error_units": float("nan")}
    if float64:
        exact = _float64_logits(model, seed, fast_paths)
        scale = float(exact.pow(2).mean().sqrt())
        for key, side, values in (("reference_error_units", pair.reference, reference),
                                  ("other_error_units", pair.other, other)):
            row[key] = float((values.double() - exact).abs().max()) / (side.precision.unit_roundoff * scale)
    return _Seed(row, delta.numpy().astype(np.float64), np.sort(gaps.gap.numpy())[:SMALLEST_ROWS].astype(np.float64))


def _float64_logits(model: str, seed: int, fast_paths: bool) -> torch.Tensor:
    """The same forward in float64 on the CPU (the seed's float32 weights, widened exactly)."""
    if not fast_paths:
        return plain_logits(model, seed, double=True)
    fast = _fast(model)
    fast.rebuild(seed)
    extractor, layer_norm, weight_proj = (copy.deepcopy(m).double() for m in fast.modules)
    with torch.no_grad():
        features = extractor(family.tester_input_values(model, seed).double()).transpose(1, 2)
        return weight_proj(layer_norm(features)).reshape(-1, fast.codes_per_row)


def _quantizer(model: str):
    return worker_state.current().made_by(family.construct, model).quantizer


def _perplexity(model: str, codes: torch.Tensor, shape: torch.Size, dtype: torch.dtype = torch.float32,
                side=None) -> float:
    """The quantizer's own perplexity of one-hot codes (the model's eval forward passes no time mask), as `side`
    computes it: the one-hot in the logits' dtype (the quantizer's `new_zeros`), the function run on the side's
    device under its precision (bf16/fp16 autocast leaves the mean and the logarithm in the low dtype)."""
    quantizer = _quantizer(model)
    probs = torch.zeros(shape, dtype=dtype).scatter_(-1, codes.view(-1, 1), 1.0).view(-1, quantizer.num_groups,
                                                                                         shape[-1])
    if side is None:
        return float(compat.perplexity_of(quantizer)(probs))
    if side.device.value == "cuda":
        probs = probs.cuda()
    with torch.no_grad(), side.applied():
        return float(compat.perplexity_of(quantizer)(probs))


class _PairChunk:
    """Picklable `seeds -> table` for worker processes; the calibration seeds keep every row's noise."""

    def __init__(self, model: str, pair_spec: str, calibration: int, atol: float, rtol: float, fast_paths: bool):
        self.model, self.pair_spec, self.calibration = model, pair_spec, calibration
        self.atol, self.rtol, self.fast_paths = atol, rtol, fast_paths

    def __call__(self, seeds) -> pd.DataFrame:
        pair = Pair.parse(self.pair_spec)
        rows = []
        for i, seed in seeds:
            found = compare_seed(self.model, pair, int(seed), self.atol, self.rtol, self.fast_paths,
                                 float64=i < min(self.calibration, FLOAT64_SEEDS))
            calibrating = i < self.calibration
            rows.append({**found.row, "calibration": calibrating, "smallest_gaps": found.smallest.tolist(),
                         "noise": found.deltas.tolist() if calibrating else []})
        return pd.DataFrame(rows, columns=[*PAIR_COLUMNS, "smallest_gaps", "noise"])


def compare_pairs(models: Sequence[str], pairs: Sequence[Pair], seed_start: int, n_seeds: int, *,
                  calibration: int = 200, atol: float = 1e-3, rtol: float = 1e-3, workers: int = 1,
                  scheduler: str = "", shards=None, progress_every: float = 10.0, fast_paths: bool = True,
                  chunk_size: int = 100) -> pd.DataFrame:
    """Every seed of every class under every pair: one row each (`PAIR_COLUMNS`, plus the seed's smallest gaps
    and, for the first `calibration` seeds, every row's gap noise)."""
    seeds = list(enumerate(range(seed_start, seed_start + n_seeds)))
    parts = [sweep.map_chunks(_PairChunk(model, pair.spec, calibration, atol, rtol, fast_paths), seeds, workers,
                              chunk_size, f"{pair.other.label}: {model}", progress_every, scheduler, shards)
             for pair in pairs for model in models]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=[*PAIR_COLUMNS, "smallest_gaps",
                                                                                   "noise"])


@dataclass(frozen=True)
class Rate:
    """k events in n seeds (stated per `compare.rates.PER` seeds by `engine.pairs.PairEvidence.per_scale`)."""

    events: int
    seeds: int


@dataclass(frozen=True)
class PairSummary:
    model: str
    pair: str
    flips: Rate
    failures: Rate
    failures_without_flip: int
    reference_error_units: float  # the largest error from float64 (FLOAT64_SEEDS seeds), in the side's roundoff
    other_error_units: float  # x the float64 logits' RMS
    noise_median: float  # median over seeds of the largest logit difference
    noise_max: float
    calibration_seeds: int
    held_out: int
    held_out_flips: int
    held_out_failures: int
    fail_given_flip: float
    smallest_row_law: Predicted  # the study's ORT law: each seed's smallest-gap row alone
    every_row_law: Predicted
    reach_covered: bool  # every seed's 64th smallest gap beyond the most negative noise: no row left out could flip

    @property
    def evidence(self) -> PairEvidence:
        """What the engine judges and words (`engine.answers.pair_answer`)."""
        return PairEvidence(self.model, self.pair, self.failures.seeds, self.flips.events, self.failures.events,
                            self.failures_without_flip, self.reference_error_units, self.other_error_units,
                            input_noise_median=self.noise_median, input_noise_max=self.noise_max,
                            measured_on="the quantizer's logits, before any choice")


def summarize(table: pd.DataFrame) -> list[PairSummary]:
    """One summary per class and pair, with both laws' predictions for the held-out seeds."""
    out = []
    for (model, pair), group in table.groupby(["model", "pair"], sort=False):
        group = group.sort_values("seed")
        calib, held = group[group.calibration.astype(bool)], group[~group.calibration.astype(bool)]
        flipped = group.n_flipped_rows > 0
        failed = ~group.test_rule_passed.astype(bool)
        noise_rows = np.stack([np.asarray(n, dtype=np.float64) for n in calib.noise]) if len(calib) else \
            np.zeros((0, 0))
        reach = float(-noise_rows.min()) if noise_rows.size else float("nan")  # only a negative change flips
        calib_flipped = calib[calib.n_flipped_rows > 0]
        fails_of_flips = (~calib_flipped.test_rule_passed.astype(bool)).to_numpy(dtype=float)
        fail_given_flip = float(fails_of_flips.mean()) if len(fails_of_flips) else float("nan")
        gaps = np.stack([np.asarray(g, dtype=np.float64) for g in held.smallest_gaps]) if len(held) else \
            np.zeros((0, SMALLEST_ROWS))
        smallest, every = _predictions(gaps, noise_rows, fails_of_flips)
        out.append(PairSummary(
            model, pair, Rate(int(flipped.sum()), len(group)), Rate(int(failed.sum()), len(group)),
            int((failed & ~flipped).sum()), float(group.reference_error_units.max()),
            float(group.other_error_units.max()), float(group.max_logit_diff.median()),
            float(group.max_logit_diff.max()), len(calib), len(held), int((held.n_flipped_rows > 0).sum()),
            int((~held.test_rule_passed.astype(bool)).sum()), fail_given_flip, smallest, every,
            bool(len(gaps) == 0 or not noise_rows.size or gaps[:, -1].min() > reach)))
    return out


def _predictions(gaps: np.ndarray, noise_rows: np.ndarray, fails_of_flips: np.ndarray) -> tuple[Predicted, Predicted]:
    """Failures expected on the held-out seeds (their own gaps, not resampled) by each law, from
    `prediction.forecast`: without a flipped calibration seed the fraction of flips that fail is unknown and
    nothing is predicted (NaN)."""
    if not len(gaps) or not noise_rows.size or not len(fails_of_flips):
        nan = Predicted(float("nan"), float("nan"), float("nan"))
        return nan, nan
    (held,) = forecast(gaps, noise_rows, fails_of_flips, [len(gaps)], np.random.default_rng(RANDOM_SEED), BOOTSTRAP,
                       resample_seeds=False)
    return held.failures, held.every_row_failures


def summary_table(summaries: Sequence[PairSummary]) -> pd.DataFrame:
    """The summaries as a table for people and for summary.json (rates per `compare.rates.PER` seeds)."""
    rows = []
    for s in summaries:
        row = {"model": s.model, "pair": s.pair, "seeds": s.flips.seeds}
        for name, rate in (("flips", s.flips), ("failures", s.failures)):
            per, low, high = s.evidence.per_scale(rate.events)
            row |= {name: rate.events, f"{name}_per_scale": per, f"{name}_low": low, f"{name}_high": high}
        row |= {"failures_without_flip": s.failures_without_flip, "reference_error_units": s.reference_error_units,
                "other_error_units": s.other_error_units, "noise_median": s.noise_median, "noise_max": s.noise_max,
                "held_out": s.held_out, "held_out_failures": s.held_out_failures}
        for name, law in (("smallest_row", s.smallest_row_law), ("every_row", s.every_row_law)):
            row |= {f"predicted_{name}": law.expected, f"predicted_{name}_low": law.low,
                    f"predicted_{name}_high": law.high}
        rows.append(row | {"fail_given_flip": s.fail_given_flip, "reach_covered": s.reach_covered})
    return pd.DataFrame(rows)


def noise_law(table: pd.DataFrame) -> pd.DataFrame:
    """The calibration seeds' gap noise in long form (model, pair, seed, delta): the law the prediction uses."""
    calib = table[table.calibration.astype(bool)]
    if not len(calib):
        return pd.DataFrame(columns=["model", "pair", "seed", "delta"])
    return calib[["model", "pair", "seed", "noise"]].explode("noise").rename(columns={"noise": "delta"}).astype(
        {"delta": float}).reset_index(drop=True)


def smallest_gaps(table: pd.DataFrame) -> pd.DataFrame:
    """Each reference side's smallest gaps per seed, once (every pair with that reference has the same)."""
    reference = table.pair.str.split(" vs ").str[0]
    first = table[~pd.DataFrame({"r": reference, "m": table.model, "s": table.seed}).duplicated()]
    return pd.DataFrame({"model": first.model, "reference": reference[first.index], "seed": first.seed,
                         "smallest_gaps": [np.asarray(g, dtype=np.float32) for g in first.smallest_gaps]})


def with_read_back(pairs: pd.DataFrame, noise: pd.DataFrame, gaps: pd.DataFrame) -> pd.DataFrame:
    """A GPU run's three tables joined back into the shape `summarize` reads."""
    table = pairs.assign(reference=pairs.pair.str.split(" vs ").str[0])
    table = table.merge(gaps, on=["model", "reference", "seed"], how="left").drop(columns="reference")
    per_seed = noise.groupby(["model", "pair", "seed"], sort=False).delta.apply(list)
    table["noise"] = [per_seed.get((m, p, s), []) for m, p, s in zip(table.model, table.pair, table.seed,
                                                                    strict=True)]
    return table


def agreement(cuda: pd.DataFrame, emulated: pd.DataFrame) -> pd.DataFrame:
    """Per class: a GPU run's pair beside the emulated pair on the same seeds: each rate, and how often the two
    agree seed by seed on failing (flips depend on the kernel's own rounding, so they need not coincide)."""
    rows = []
    for (model, pair_cuda), g in cuda.groupby(["model", "pair"], sort=False):
        for pair_emulated, e in emulated[emulated.model == model].groupby("pair", sort=False):
            both = g.merge(e, on=["model", "seed"], suffixes=("_cuda", "_emulated"))
            if not len(both):
                continue
            fail_c = ~both.test_rule_passed_cuda.astype(bool)
            fail_e = ~both.test_rule_passed_emulated.astype(bool)
            rows.append({"model": model, "cuda_pair": pair_cuda, "emulated_pair": pair_emulated, "seeds": len(both),
                         "cuda_failures": int(fail_c.sum()), "emulated_failures": int(fail_e.sum()),
                         "both_fail": int((fail_c & fail_e).sum()), "same_outcome": int((fail_c == fail_e).sum())})
    return pd.DataFrame(rows)


def same_models(gpu_table, here_table) -> tuple[bool, float]:
    """Whether a seed builds the same model there and here: the reference side's perplexity of shared seeds agrees
    to float rounding (another transformers can draw a seed's weights in another order). Also the median relative
    difference found."""
    there = gpu_table.drop_duplicates("seed").set_index("seed").perplexity_reference
    here = here_table.drop_duplicates("seed").set_index("seed").perplexity_reference
    shared = there.index.intersection(here.index)
    if not len(shared):
        return False, float("nan")
    relative = float(np.median(np.abs(there[shared] - here[shared]) / np.abs(here[shared])))
    return relative < 1e-4, relative


def emulated_against_cuda(gpu_table, here_table):
    """Each CUDA pair of the GPU run beside the emulated pairs on the same seeds: the GPU machine's own emulation,
    and this run's where its seeds build the same models as there (`same_models`)."""
    cuda = gpu_table[gpu_table.pair.str.contains("cuda")]
    emulated_there = gpu_table[~gpu_table.pair.str.contains("cuda")]
    rows = [agreement(cuda, emulated_there).assign(emulated_on="the GPU machine's CPU")]
    if len(here_table) and same_models(gpu_table, here_table)[0]:
        rows.append(agreement(cuda, here_table).assign(emulated_on="this machine"))
    found = pd.concat(rows, ignore_index=True)
    same_precision = [Pair.parse(c).other.precision == Pair.parse(e).other.precision
                      for c, e in zip(found.cuda_pair, found.emulated_pair, strict=True)]
    return found[same_precision].reset_index(drop=True)


@dataclass(frozen=True)
class GpuTables:
    """What a GPU run's section shows and the answers read: its pairs' summaries, their rates table, and its CUDA
    pairs beside the emulated ones on the same seeds."""

    summaries: list[PairSummary]
    rates: pd.DataFrame
    agreement: pd.DataFrame


def gpu_tables(gpu, here_table: pd.DataFrame) -> GpuTables:
    """A GPU run's tables (`gpu_run.read`), with `here_table`, this run's pairs; empty without a GPU run (None)."""
    if gpu is None:
        return GpuTables([], pd.DataFrame(), pd.DataFrame())
    summaries = summarize(gpu.table)
    return GpuTables(summaries, summary_table(summaries), emulated_against_cuda(gpu.table, here_table))
