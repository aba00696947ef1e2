"""The sentences of the precision pairs, words from `precision.PairSummary`, nothing computed; each class's answer
line is the engine's (`engine.answers.pair_answer`), as in discrete_ops."""

from __future__ import annotations

from collections.abc import Sequence

from exactness.engine.answers import pair_answer
from exactness.runtimes.sides import Pair
from exactness.studies.near_tie.precision import PairSummary
from exactness.studies.near_tie.prediction import Predicted
from exactness.workbook import wording
from exactness.workbook.answers import Answer
from exactness.workbook.findings import count, significant
from exactness.workbook.presentation import plural


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
    from exactness.workbook.findings import rate_verdict

    verdict, why = rate_verdict(measured, seeds, ref_failures, ref_seeds, source)
    return f"{what}: {verdict} ({why})."


RATE_COLUMNS = {"model": "class", "pair": "sides", "flips_rate": "a code flips", "fails_rate": "export test fails",
                "noise_median": "logit noise (median)"}


def show_rates(rates) -> None:
    from exactness.workbook.presentation import table

    shown = rates.assign(pair=[Pair.parse(p).label for p in rates.pair],
                         flips_rate=[wording.rate(int(r.flips), int(r.seeds)) for r in rates.itertuples()],
                         fails_rate=[wording.rate(int(r.failures), int(r.seeds)) for r in rates.itertuples()])
    table(shown, columns=RATE_COLUMNS, caption="Per class and pair: how often a code flips and how often the export "
          "test fails (1 in N with Wilson's 95% interval), and the median over seeds of the largest logit difference.")


def emulation_sentence(pairs: Sequence[Pair]) -> str:
    from exactness.runtimes.sides import emulation_note

    return emulation_note([side for pair in pairs for side in (pair.reference, pair.other)]) or \
        "No side here is emulated."


def gpu_run_sentence(gpu) -> str:
    f = gpu.facts
    skipped = f.get("skipped") or []
    return (f"A GPU run, measured on {gpu.machine} by `python -m exactness.gpu` ({count(f.get('seeds', 0))} conformer "
            f"seeds per pair, {significant(f.get('seconds', 0))} s), read back from `{gpu.folder.name}`: its CUDA "
            "sides are real, its CPU sides ran on that machine's CPU"
            + (f"; not run there: {'; '.join(skipped)}" if skipped else "") + "."
            + ("" if f.get("perplexity_in_side_dtype") else " That run computed every side's perplexity in float32 "
               "from its codes: its bf16 and fp16 failures are those a flipped code makes, a lower bound on the "
               "export test's, whose perplexity rounds in the low dtype too."))


def same_models(gpu_table, here_table) -> tuple[bool, float]:
    """Whether a seed builds the same model there and here: the reference side's perplexity of shared seeds agrees
    to float rounding (another transformers can draw a seed's weights in another order). Also the median relative
    difference found."""
    import numpy as np

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
    import pandas as pd

    from exactness.studies.near_tie.precision import agreement

    cuda = gpu_table[gpu_table.pair.str.contains("cuda")]
    emulated_there = gpu_table[~gpu_table.pair.str.contains("cuda")]
    rows = [agreement(cuda, emulated_there).assign(emulated_on="the GPU machine's CPU")]
    if len(here_table) and same_models(gpu_table, here_table)[0]:
        rows.append(agreement(cuda, here_table).assign(emulated_on="this machine"))
    found = pd.concat(rows, ignore_index=True)
    same_precision = [Pair.parse(c).other.precision == Pair.parse(e).other.precision
                      for c, e in zip(found.cuda_pair, found.emulated_pair, strict=True)]
    return found[same_precision].reset_index(drop=True)


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
    from exactness.workbook.presentation import table

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
    from exactness import published

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


def with_pairs(ort_answers: list[Answer], pairs: Sequence[PairSummary], gpu_pairs: Sequence[PairSummary],
               gpu=None, tie_aware: frozenset[str] = frozenset()) -> list[Answer]:
    """The answer table: each class's line against ORT named by the class alone (as in discrete_ops, so the index
    finds it), then a line per class and pair, named with the pair's sides. `tie_aware`: the classes on which a
    tie-aware comparison was measured to keep value checks."""
    from dataclasses import replace

    if not pairs and not gpu_pairs:
        return ort_answers
    found = list(ort_answers)
    ort_rate = {a.subject: a.rate for a in ort_answers}
    fp32_gpu = {s.model: wording.rate(s.failures.events, s.failures.seeds) for s in gpu_pairs
                if Pair.parse(s.pair).other.spec == "eager:cuda:fp32"}
    found += [pair_answer(s.evidence, ort_rate.get(s.model, ""), s.model in tie_aware) for s in pairs]
    where = f" (GPU run: {gpu.facts.get('gpu', 'no GPU')})" if gpu is not None else ""
    for s in gpu_pairs:
        if not Pair.parse(s.pair).needs_cuda:  # the GPU machine's own emulation: in the agreement table
            continue
        line = pair_answer(s.evidence, fp32_gpu.get(s.model, ""), s.model in tie_aware)
        found.append(replace(line, subject=line.subject + where))
    return found


def show_gpu_run(gpu, pair_table, artifacts) -> list[PairSummary]:
    """A GPU run's section: its pairs' rates, the emulation beside CUDA, the probe, the prototype's figures and the
    prediction; its tables and summary kept in the run folder. Returns its pairs' summaries (for the answers)."""
    from exactness.studies.near_tie.precision import summarize, summary_table
    from exactness.workbook.presentation import say

    summaries = summarize(gpu.table)
    rates = summary_table(summaries)
    agreement = emulated_against_cuda(gpu.table, pair_table)
    artifacts.table("gpu_pair_rates", rates)
    artifacts.table("gpu_tf32_probe", gpu.probe)
    artifacts.table("gpu_agreement", agreement)
    artifacts.summary(gpu_run={"machine": gpu.machine, "pairs": rates.to_dict("records")})
    say(gpu_run_sentence(gpu))
    show_rates(rates)
    show_agreement(agreement)
    for words in (models_sentence(gpu, pair_table), probe_sentence(gpu.probe), prototype_sentence(summaries),
                  prediction_sentence(summaries)):
        say(words)
    return summaries
