"""Check: a seed through eager and ONNX Runtime, every output and intermediate compared, flips found,
the export test's rule replicated, and what a tie-aware comparison would say."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from exactness.compare import export_rule
from exactness.compare.intermediates import intermediate_table
from exactness.compare.tie_aware import flipped_rows, needed_rtol, tie_aware_compare, top_two
from exactness.compare.ulp import ulp
from exactness.engine import margins as margins_of
from exactness.engine.outputs import compare_forced, compare_output, passes_alone
from exactness.engine.rows import MarginRow, OutputRow, frame
from exactness.errors import brief
from exactness.models import wav2vec2_family as family
from exactness.runtimes import codevector_lookup, eager_capture
from exactness.runtimes.graph_pool import GraphPool
from exactness.runtimes.speedup_paths import BuildPath, LookupPath
from exactness.studies.near_tie.row import (
    CheckRow,
    MinRow,
    NoiseFacts,
    Paths,
    WhatIf,
    aligned_facts,
    gap_facts,
    perplexity_facts,
    rule_facts,
)


@dataclass
class Check:
    row: CheckRow
    outputs: pd.DataFrame  # one row per model output: the engine's `OutputRow` columns, then `passes_alone`
    tensors: pd.DataFrame  # one row per intermediate tensor
    delta: torch.Tensor  # per argmax row, ORT's move of eager's top-1 minus top-2 difference (`_gap_noise`)
    delta_ulps: torch.Tensor  # the same move in ulps of the row's top logit (the gaps' unit, `Gaps.gap_ulps`)
    margin: MarginRow  # the quantizer's argmax as the engine reads a discrete op (`engine.margins`)


def _as_torch(arrays: dict[str, np.ndarray], names) -> dict[str, torch.Tensor]:
    return {name: torch.from_numpy(np.array(arrays[name])) for name in names}


def eager_runner(fast_paths: bool):
    """Eager's forward: with the codevectors gathered where verified (fast), or the model's own (plain)."""
    return codevector_lookup.run if fast_paths else eager_capture.run


def check_seed(pool: GraphPool, seed: int, *, atol: float = 1e-3, rtol: float = 1e-3, defect: dict | None = None,
               built: torch.nn.Module | None = None, build_path: BuildPath = BuildPath.BUILD,
               all_tensors: bool = True, what_if: bool = True, session_options: dict | None = None,
               fast_paths: bool = True) -> Check:
    """`all_tensors=False` keeps only the three tensors the seed names in the intermediates table;
    `what_if=False` skips the eager forward that measures what flipping the smallest-gap row would do.
    `built`: the seed's model when the caller has it (`build_path` says how it was made); `fast_paths=False`:
    eager runs the model's own codevector product (the pool decides the ORT side's paths)."""
    model = pool.model
    built = built if built is not None else family.build_model(model, seed)
    inputs = family.tester_inputs(model, seed)
    named = family.named_tensors(built)
    run_eager = eager_runner(fast_paths)
    eager = run_eager(built, inputs, capture=True if all_tensors else {*named, "quantizer.weight_proj"})
    # outputs, codes and logits from a graph exposing little, which computes what the test's bare graph does
    options = session_options or {}
    runner, ran = pool.runner(seed, built, inputs, defect, all_values=False, **options)
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
    aligned = run_eager(built, inputs, capture=False, force_codes=ort_codes).outputs if flips else eager.outputs
    margin = _margin_row(model, seed, pool.shape_mode, eager_logits, ort_logits, gaps.top1_index, ort_codes, atol,
                         rtol)
    reference, reference_note = float64_reference(built, inputs, gaps.top1_index)
    # the noise bound is only known once every check is in: keep the margins, judge later (near_tie.tie_aware)
    tie_aware = tie_aware_compare(eager_logits, ort_codes, aligned, ort_outputs, float("inf"), atol, rtol)
    labels = {"model": model, "seed": seed, "shape_mode": pool.shape_mode}
    compared = engine_outputs(labels, ort_outputs, eager.outputs, aligned if flips else None, reference, atol, rtol)
    # the engine's test of a flip's explanation: every output it reaches agrees within its noise bound once ORT's
    # codes are forced on eager (None without a flip)
    explained = all(bool(r.explained_by_flip) for r in compared if r.reached_by_flip) if flips else None
    delta = _gap_noise(eager_logits, ort_logits, gaps)
    eager_lookup = LookupPath.GATHERED if eager.gathered else LookupPath.PLAIN
    row = CheckRow(
        model=model, seed=seed, shape_mode=pool.shape_mode,
        paths=Paths(BuildPath(build_path).value, ran.weights.value, ran.session.value, ran.lookup.value,
                    eager_lookup.value),
        defect=getattr(runner, "defect", None), reference=reference_note, explained_by_flips=explained,
        gaps=gap_facts(gaps, flips, tie_aware, ort_codes, groups),
        perplexity=perplexity_facts(float(eager.outputs["codevector_perplexity"]),
                                    float(ort_outputs["codevector_perplexity"]), atol, rtol),
        rule=rule_facts(rule, ort_outputs, eager.outputs),
        aligned=aligned_facts(tie_aware, ort_outputs, eager.outputs, atol),
        noise=NoiseFacts(float((ort_logits - eager_logits).abs().max()), float(delta.abs().max())),
        what_if=_if_min_row_flipped(built, inputs, eager, gaps, atol, run_eager) if what_if else WhatIf(),
        min_row=MinRow(gaps.min_row, _ort_gap(ort_logits, gaps, gaps.min_row)),
        max_abs_diff={r.output: r.max_abs_diff for r in compared})
    everything, everything_graph = produced, graph
    if all_tensors and pool.exposed is not None:  # every module's output: another run, exposing all of them
        full, _ = pool.runner(seed, built, inputs, defect, all_values=True, **options)
        everything, everything_graph = full.run(inputs), full.graph
    tensors = intermediate_table(eager.modules, everything, everything_graph.intermediates, named, all_tensors,
                                 labels)
    return Check(row, output_table(compared), tensors, delta, delta / ulp(gaps.top1).double(), margin)


def _gap_noise(eager_logits: torch.Tensor, ort_logits: torch.Tensor, gaps) -> torch.Tensor:
    """Per row, how much ORT moved eager's top-1 minus top-2 difference: a row flips when this is below
    minus its eager gap. The empirical law of this noise predicts the flip rate."""
    rows = torch.arange(eager_logits.shape[0])
    ort_gap = ort_logits[rows, gaps.top1_index] - ort_logits[rows, gaps.top2_index]
    return (ort_gap - gaps.gap).double()


def _ort_gap(ort_logits: torch.Tensor, gaps, row: int) -> float:
    first, second = int(gaps.top1_index[row]), int(gaps.top2_index[row])
    return float(ort_logits[row, first].double() - ort_logits[row, second].double())


def _if_min_row_flipped(built, inputs, eager, gaps, atol: float, run_eager) -> WhatIf:
    """Eager re-run with the smallest-gap row switched to its runner-up: what one flip would do."""
    codes = gaps.top1_index.clone()
    codes[gaps.min_row] = gaps.top2_index[gaps.min_row]
    flipped = run_eager(built, inputs, capture=False, force_codes=codes).outputs
    p, q = float(eager.outputs["codevector_perplexity"]), float(flipped["codevector_perplexity"])
    return WhatIf(q - p, needed_rtol(flipped["codevector_perplexity"], eager.outputs["codevector_perplexity"], atol),
                  not export_rule.export_test_rule(flipped, eager.outputs).passed)


ARGMAX = margins_of.Selection(axis=-1, k=1)  # one decision per code row: its largest logit


def _margin_row(model: str, seed: int, shape_mode: str, eager_logits: torch.Tensor, ort_logits: torch.Tensor,
                eager_codes: torch.Tensor, ort_codes: torch.Tensor, atol: float, rtol: float) -> MarginRow:
    """The quantizer's argmax as the engine reads any discrete op: both sides' margins in ulps of each row's
    scale, the read noise, and the rows ORT chose differently, by the engine's own arithmetic."""
    row = MarginRow(model, shape_mode, seed, QUANTIZER_NODE, "ArgMax", "argmax", "the quantizer's logits by name")
    eager_read, ort_read = [eager_logits.double().numpy()], [ort_logits.double().numpy()]
    eager_margins, reads = margins_of.fill_reads(row, "argmax", "ArgMax", eager_read, ort_read, ARGMAX, ARGMAX,
                                                 atol, rtol)
    row.match_trusted = True  # the graph's value is the module's output by name, whatever the values show
    changed = margins_of.flipped_decisions("argmax", eager_codes.numpy(), ort_codes.numpy(), ARGMAX)
    margins_of.fill_flips(row, changed, eager_margins, reads)
    return row


QUANTIZER_NODE = "quantizer.argmax"  # the graph value a check reads ORT's codes from (`GraphPool.exposed`)


def float64_reference(built: torch.nn.Module, inputs: dict, codes: torch.Tensor) -> tuple[dict | None, str]:
    """Eager in float64 with eager's own codes forced: what the float32 arithmetic approximates (the engine's
    reference), on a float64 copy of the model."""
    wide_inputs = {k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                   for k, v in inputs.items()}

    def run(wide):
        return eager_capture.run(wide, wide_inputs, capture=False, force_codes=codes).outputs

    try:
        return run(copy.deepcopy(built).double()), "float64, eager's codes forced"
    except Exception as error:  # a model that does not run in float64 has no reference: said, not hidden
        return None, f"no float64 reference ({brief(error)})"


def engine_outputs(labels: dict, ort: dict, eager: dict, forced: dict | None, reference: dict | None,
                   atol: float, rtol: float) -> list[OutputRow]:
    """Each output as the engine compares it (`engine.outputs`): against eager by the test's count, both against
    float64, planted defects, and after a flip eager with ORT's codes forced against ORT. A flip reaches the
    outputs that read a code (`CODE_OUTPUTS`). In sorted order, as the export test walks them."""
    rows = []
    for name, expected in sorted(eager.items()):
        if name not in ort:
            continue
        row = OutputRow(labels["model"], labels["shape_mode"], labels["seed"], name, expected.is_floating_point(),
                        True, reached_by_flip=forced is not None and name in family.CODE_OUTPUTS)
        compare_output(row, ort[name].numpy(), expected, reference.get(name) if reference is not None else None,
                       atol, rtol)
        if row.reached_by_flip and row.same_shape:
            compare_forced(row, ort[name].numpy(), forced[name], atol, rtol)
        rows.append(row)
    return rows


def output_table(rows: list[OutputRow]) -> pd.DataFrame:
    """The engine's rows with `passes_alone`: what the export test's rule says of each output on its own, which the
    first-failure rule never shows."""
    return frame(rows, OutputRow).assign(passes_alone=pd.Series([passes_alone(r) for r in rows], dtype=bool))


@dataclass
class RuleViews:
    failed_or_forgiven: pd.DataFrame  # checks the export test's rule failed or forgave
    per_output: pd.DataFrame  # per check and output: passes when compared alone
    failing_alone: pd.DataFrame  # checks with an output that fails on its own


def rule_views(checks: pd.DataFrame, outputs: pd.DataFrame) -> RuleViews:
    failed = checks[~checks.test_rule_passed | checks.rule_forgiven] if len(checks) else checks
    per_output = outputs.pivot_table(index=["model", "seed", "shape_mode"], columns="output", values="passes_alone",
                                     aggfunc="first") if len(outputs) else pd.DataFrame()
    failing_alone = per_output[~per_output.all(axis=1)].reset_index() if len(per_output) else per_output
    return RuleViews(failed, per_output, failing_alone)
