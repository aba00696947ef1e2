"""Check: a seed through eager and ONNX Runtime, every output and intermediate compared, flips found,
the export test's rule replicated, and what a tie-aware comparison would say."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from exactness.compare import export_rule
from exactness.compare.intermediates import intermediate_table
from exactness.compare.near_tie import flipped_rows, needed_rtol, tie_aware_compare, top_two, usage_profile
from exactness.compare.per_output import per_output_report
from exactness.models import wav2vec2_family as family
from exactness.runtimes import codevector_lookup
from exactness.runtimes.graph_pool import GraphPool


@dataclass
class Check:
    row: dict
    outputs: pd.DataFrame  # one row per model output
    tensors: pd.DataFrame  # one row per intermediate tensor
    extra: dict = field(default_factory=dict)


def _as_torch(arrays: dict[str, np.ndarray], names) -> dict[str, torch.Tensor]:
    return {name: torch.from_numpy(np.array(arrays[name])) for name in names}


def check_seed(pool: GraphPool, seed: int, atol: float = 1e-3, rtol: float = 1e-3,
               defect: dict | None = None, built: torch.nn.Module | None = None, all_tensors: bool = True,
               what_if: bool = True, session_options: dict | None = None) -> Check:
    """`all_tensors=False` keeps only the three tensors the seed names in the intermediates table;
    `what_if=False` skips the eager forward that measures what flipping the smallest-gap row would do."""
    model = pool.model
    built = built if built is not None else family.build_model(model, seed)
    inputs = family.tester_inputs(model, seed)
    named = family.named_tensors(built)
    # eager's own outputs, with the codevectors gathered (the same values, 2-4x faster; never while exporting)
    eager = codevector_lookup.run(built, inputs, capture=True if all_tensors else {*named, "quantizer.weight_proj"})
    # outputs, codes and logits from a graph exposing little, which computes what the test's bare graph does
    runner, how = pool.runner(seed, built, inputs, defect, all_values=False, **(session_options or {}))
    produced = runner.run(inputs)
    graph = runner.graph
    ort_outputs = _as_torch(produced, [n for n in graph.outputs if n in eager.outputs])
    groups, per_row = built.config.num_codevector_groups, built.config.num_codevectors_per_group
    eager_logits = eager.modules["quantizer.weight_proj"][0].reshape(-1, per_row)
    ort_logits = torch.from_numpy(produced[graph.intermediates["quantizer.weight_proj"]]).reshape(-1, per_row)
    ort_codes = torch.from_numpy(produced[graph.intermediates["quantizer.argmax"]]).flatten()
    gaps = top_two(eager_logits)
    flips = flipped_rows(gaps.top1_index, ort_codes)
    rule = export_rule.export_test_rule(ort_outputs, eager.outputs, atol, rtol)
    # with no flip, eager re-run with ORT's choices is eager itself: skip the forward
    aligned = codevector_lookup.run(built, inputs, capture=False, force_codes=ort_codes).outputs if flips \
        else eager.outputs
    # the noise bound is only known once every check is in: keep the margins, judge later (near_tie.tie_aware)
    tie_aware = tie_aware_compare(eager_logits, ort_codes, aligned, ort_outputs, float("inf"), atol, rtol)
    p_eager_tensor = eager.outputs["codevector_perplexity"]
    p_eager, p_ort = float(p_eager_tensor), float(ort_outputs["codevector_perplexity"])
    labels = {"model": model, "seed": seed, "shape_mode": pool.shape_mode}
    outputs = per_output_report(ort_outputs, eager.outputs, atol, rtol, labels)
    would = _if_min_row_flipped(built, inputs, eager, gaps, atol) if what_if else dict(_NOT_MEASURED)
    delta = _gap_noise(eager_logits, ort_logits, gaps)
    row = {
        "model": model, "seed": seed, "shape_mode": pool.shape_mode, "graph": how,
        "eager_codevectors": "gathered" if eager.gathered else "own forward",
        "defect": getattr(runner, "defect", None),
        "min_gap": float(gaps.gap.min()), "min_gap_ulps": float(gaps.gap_ulps[gaps.min_row]),
        "exact_tie": bool(gaps.gap.min() == 0), "n_flipped_rows": len(flips), "flipped_rows": flips,
        "flip_is_min_gap_row": bool(flips) and gaps.min_row in flips,
        "max_flipped_gap": max((float(gaps.gap[r]) for r in flips), default=float("nan")),
        "max_flip_margin": max(tie_aware.flip_margins.values(), default=0.0),
        "usage_unchanged": usage_profile(gaps.top1_index, groups) == usage_profile(ort_codes, groups),
        "perplexity_eager": p_eager, "perplexity_ort": p_ort, "perplexity_shift": p_ort - p_eager,
        "perplexity_allowed": atol + rtol * abs(p_eager),
        "test_rule_passed": rule.passed, "rule_forgiven": rule.forgiven, "first_failing_output": rule.first_mismatch,
        "never_compared": rule.never_compared, "skip_rule_passed": export_rule.names_match(ort_outputs, eager.outputs),
        "aligned_ok": not tie_aware.failing_outputs, "aligned_failing": tie_aware.failing_outputs,
        "needed_rtol": max(needed_rtol(ort_outputs[n], eager.outputs[n], atol) for n in eager.outputs),
        # the seed's "rtol ~1e-2 observed" is about the perplexity; the other outputs need far more after a flip
        "perplexity_needed_rtol": needed_rtol(ort_outputs["codevector_perplexity"], p_eager_tensor, atol),
        "logit_noise": float((ort_logits - eager_logits).abs().max()),
        "gap_noise_max": float(delta.abs().max()), **would,
        # eager's smallest-gap row on ORT: its top-1 minus top-2 logit there, for eager's two codes (0: ORT computed
        # the two logits bit-identical too, as an exact tie needs for both argmax to take the first index)
        "min_row": gaps.min_row, "ort_min_row_gap": _ort_gap(ort_logits, gaps, gaps.min_row),
    }
    differences = outputs["max_abs_diff"] if "max_abs_diff" in outputs else [float("nan")] * len(outputs)
    for name, difference in zip(outputs["output"], differences, strict=True):
        row[f"max_abs_diff_{name}"] = difference
    everything, everything_graph = produced, graph
    if all_tensors and pool.exposed is not None:  # every module's output: another run, exposing all of them
        full, _ = pool.runner(seed, built, inputs, defect, all_values=True, **(session_options or {}))
        everything, everything_graph = full.run(inputs), full.graph
    tensors = intermediate_table(eager.modules, everything, everything_graph.intermediates, named, all_tensors,
                                 labels)
    return Check(row, outputs, tensors, {"delta": delta})


def _gap_noise(eager_logits: torch.Tensor, ort_logits: torch.Tensor, gaps) -> torch.Tensor:
    """Per row, how much ORT moved eager's top-1 minus top-2 difference: a row flips when this is below
    minus its eager gap. The empirical law of this noise predicts the flip rate."""
    rows = torch.arange(eager_logits.shape[0])
    ort_gap = ort_logits[rows, gaps.top1_index] - ort_logits[rows, gaps.top2_index]
    return (ort_gap - gaps.gap).double()


def _ort_gap(ort_logits: torch.Tensor, gaps, row: int) -> float:
    first, second = int(gaps.top1_index[row]), int(gaps.top2_index[row])
    return float(ort_logits[row, first].double() - ort_logits[row, second].double())


_NOT_MEASURED = {"flip_perplexity_shift": float("nan"), "flip_needed_rtol": float("nan"), "fails_if_flipped": None}


def _if_min_row_flipped(built, inputs, eager, gaps, atol: float) -> dict:
    """Eager re-run with the smallest-gap row switched to its runner-up: what one flip would do."""
    codes = gaps.top1_index.clone()
    codes[gaps.min_row] = gaps.top2_index[gaps.min_row]
    flipped = codevector_lookup.run(built, inputs, capture=False, force_codes=codes).outputs
    p, q = float(eager.outputs["codevector_perplexity"]), float(flipped["codevector_perplexity"])
    return {"flip_perplexity_shift": q - p, "flip_needed_rtol": needed_rtol(
        flipped["codevector_perplexity"], eager.outputs["codevector_perplexity"], atol),
        "fails_if_flipped": not export_rule.export_test_rule(flipped, eager.outputs).passed}
