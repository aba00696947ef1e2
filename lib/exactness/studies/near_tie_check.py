"""Check: a seed through eager and ONNX Runtime, every output and intermediate compared, flips found,
the export test's rule replicated, and what a tie-aware comparison would say.

Exports are expensive (10-20 s), so a `GraphPool` exports once per (model, shape mode) and reuses the
graph for other seeds by weight swapping, learnt and verified against a second fresh export.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from exactness.compare import export_rule
from exactness.compare.near_tie import flipped_rows, needed_rtol, tie_aware_compare, top_two, usage_profile
from exactness.compare.per_output import per_output_report, tensor_difference
from exactness.models import wav2vec2_family as family
from exactness.runtimes import eager_capture, onnx_graph, weight_swap

SHAPE_MODES = ("dynamic", "static")
NOISE_TENSORS = {"conv_features": "{base}.feature_extractor",
                 "extract_features": "{base}.feature_projection.layer_norm",
                 "logits": "quantizer.weight_proj"}


class GraphPool:
    """Exports for one (model, shape mode): fresh at first, then one template reused by swapping weights."""

    def __init__(self, model: str, shape_mode: str, swap: bool = True):
        if shape_mode not in SHAPE_MODES:
            raise ValueError(f"unknown shape mode {shape_mode!r}; use one of {SHAPE_MODES}")
        self.model, self.shape_mode, self.swap = model, shape_mode, swap
        self.template: tuple[onnx_graph.ExportedGraph, torch.nn.Module] | None = None
        self.template_seed: int | None = None
        self.plan: weight_swap.SwapPlan | None = None
        self.exports, self.export_seconds, self.swap_status = 0, 0.0, "not needed yet"

    def fresh(self, built: torch.nn.Module, inputs: dict) -> onnx_graph.ExportedGraph:
        graph = onnx_graph.export(built, inputs, dynamic=self.shape_mode == "dynamic")
        self.exports += 1
        self.export_seconds += graph.export_seconds
        return graph

    def runner(self, seed: int, built: torch.nn.Module, inputs: dict,
               defect: dict | None = None) -> tuple[onnx_graph.OrtRunner, str]:
        if self.plan is not None:
            return onnx_graph.OrtRunner(self.template[0], self.plan.initializers(built), defect=defect), "swapped"
        if defect is not None and self.template is not None and self.template[1] is built:
            return onnx_graph.OrtRunner(self.template[0], defect=defect), "fresh"
        graph = self.fresh(built, inputs)
        if self.template is None:
            self.template, self.template_seed = (graph, built), seed
        elif self.swap and self.swap_status == "not needed yet":
            try:
                self.plan = weight_swap.learn(self.template[0], self.template[1], graph, built, seed)
                self.swap_status = f"verified against a fresh export of seed {seed}"
            except weight_swap.SwapError as error:
                self.swap_status = f"disabled: {error}"
        return onnx_graph.OrtRunner(graph), "fresh"


@dataclass
class Check:
    row: dict
    outputs: pd.DataFrame  # one row per model output
    tensors: pd.DataFrame  # one row per intermediate tensor
    extra: dict = field(default_factory=dict)


def _as_torch(arrays: dict[str, np.ndarray], names) -> dict[str, torch.Tensor]:
    return {name: torch.from_numpy(np.array(arrays[name])) for name in names}


def check_seed(pool: GraphPool, seed: int, atol: float = 1e-3, rtol: float = 1e-3,
               defect: dict | None = None, built: torch.nn.Module | None = None, all_tensors: bool = True) -> Check:
    """`all_tensors=False` keeps only the three tensors the seed names in the intermediates table."""
    model = pool.model
    built = built if built is not None else family.build_model(model, seed)
    inputs = family.tester_inputs(model, seed)
    eager = eager_capture.run(built, inputs)
    runner, how = pool.runner(seed, built, inputs, defect)
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
    aligned = eager_capture.run(built, inputs, capture=False, force_codes=ort_codes).outputs if flips else eager.outputs
    # the noise bound is only known once every check is in: keep the margins, judge later (near_tie.tie_aware)
    tie_aware = tie_aware_compare(eager_logits, ort_codes, aligned, ort_outputs, float("inf"), atol, rtol)
    p_eager, p_ort = float(eager.outputs["codevector_perplexity"]), float(ort_outputs["codevector_perplexity"])
    outputs = per_output_report(ort_outputs, eager.outputs, atol, rtol)
    would = _if_min_row_flipped(built, inputs, eager, gaps, atol)
    delta = _gap_noise(eager_logits, ort_logits, gaps)
    row = {
        "model": model, "seed": seed, "shape_mode": pool.shape_mode, "graph": how,
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
        "logit_noise": float((ort_logits - eager_logits).abs().max()),
        "gap_noise_max": float(delta.abs().max()), **would,
    }
    for _, out in outputs.iterrows():
        row[f"max_abs_diff_{out['output']}"] = out.get("max_abs_diff", float("nan"))
    tensors = _tensor_table(model, seed, pool.shape_mode, built, eager, produced, graph, all_tensors)
    return Check(row, outputs.assign(model=model, seed=seed, shape_mode=pool.shape_mode), tensors, {"delta": delta})


def _gap_noise(eager_logits: torch.Tensor, ort_logits: torch.Tensor, gaps) -> torch.Tensor:
    """Per row, how much ORT moved eager's top-1 minus top-2 difference: a row flips when this is below
    minus its eager gap. The empirical law of this noise predicts the flip rate."""
    rows = torch.arange(eager_logits.shape[0])
    ort_gap = ort_logits[rows, gaps.top1_index] - ort_logits[rows, gaps.top2_index]
    return (ort_gap - gaps.gap).double()


def _if_min_row_flipped(built, inputs, eager, gaps, atol: float) -> dict:
    """Eager re-run with the smallest-gap row switched to its runner-up: what one flip would do."""
    codes = gaps.top1_index.clone()
    codes[gaps.min_row] = gaps.top2_index[gaps.min_row]
    flipped = eager_capture.run(built, inputs, capture=False, force_codes=codes).outputs
    p, q = float(eager.outputs["codevector_perplexity"]), float(flipped["codevector_perplexity"])
    return {"flip_perplexity_shift": q - p, "flip_needed_rtol": needed_rtol(
        flipped["codevector_perplexity"], eager.outputs["codevector_perplexity"], atol),
        "fails_if_flipped": not export_rule.export_test_rule(flipped, eager.outputs).passed}


def _tensor_table(model, seed, shape_mode, built, eager, produced, graph, all_tensors: bool) -> pd.DataFrame:
    base = built.base_model_prefix
    named = {path.format(base=base): label for label, path in NOISE_TENSORS.items()}
    rows = []
    for depth, (path, value_name) in enumerate(graph.intermediates.items()):
        if path not in eager.modules or not (all_tensors or path in named):
            continue
        ort_value = torch.from_numpy(np.array(produced[value_name]))
        candidates = [t for t in eager.modules[path] if tuple(t.shape) == tuple(ort_value.shape)]
        if not candidates:
            continue
        difference = tensor_difference(ort_value.to(candidates[0].dtype), candidates[0])
        rows.append({"model": model, "seed": seed, "shape_mode": shape_mode, "tensor": path,
                     "label": named.get(path, ""), "depth": depth, **difference})
    return pd.DataFrame(rows)
