"""One check's row of the `checks` table, declared: its columns, their types and the small helpers that
compute each group of them from what a check measured. `near_tie_check.check_seed` only runs the sides and
calls these; `CheckRow.record()` flattens a row into the table's columns, in the order declared here."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field

import torch

from exactness.compare import export_rule
from exactness.compare.tie_aware import Gaps, TieAwareResult, needed_rtol, usage_profile
from exactness.runtimes.speedup_paths import BuildPath, LookupPath, SessionPath, WeightsPath


@dataclass(frozen=True)
class Paths:
    """Which path ran, one column per speed-up (`exactness.runtimes.speedup_paths`)."""

    build_path: str = BuildPath.BUILD.value  # the checked model: a plain build or the reused rebuilt template
    weights_path: str = WeightsPath.FRESH_EXPORT.value  # ORT's weights: the seed's own export or swapped in
    session_path: str = SessionPath.PER_SEED.value  # ORT's session: built for the seed or the fed one
    ort_lookup_path: str = LookupPath.PLAIN.value  # the graph's codevector product or its gather
    eager_lookup_path: str = LookupPath.PLAIN.value  # eager's codevector product or its gather


# per table of the study, its columns that say which path ran (all else is equal whichever path ran)
PATH_COLUMNS = {"screen": ("screen_path",), "checks": tuple(f.name for f in dataclasses.fields(Paths))}


@dataclass(frozen=True)
class GapFacts:
    """Eager's smallest top-1/top-2 gap and the rows ORT flipped."""

    min_gap: float
    min_gap_ulps: float
    exact_tie: bool
    n_flipped_rows: int
    flipped_rows: list[int]
    flip_is_min_gap_row: bool
    max_flipped_gap: float  # NaN without a flip
    max_flip_margin: float  # 0 without a flip
    usage_unchanged: bool  # each group's code counts are the same on both sides


def gap_facts(gaps: Gaps, flips: list[int], tie_aware: TieAwareResult, ort_codes: torch.Tensor,
              groups: int) -> GapFacts:
    smallest = float(gaps.gap.min())
    return GapFacts(
        min_gap=smallest, min_gap_ulps=float(gaps.gap_ulps[gaps.min_row]), exact_tie=bool(smallest == 0),
        n_flipped_rows=len(flips), flipped_rows=flips, flip_is_min_gap_row=bool(flips) and gaps.min_row in flips,
        max_flipped_gap=max((float(gaps.gap[r]) for r in flips), default=float("nan")),
        max_flip_margin=max(tie_aware.flip_margins.values(), default=0.0),
        usage_unchanged=usage_profile(gaps.top1_index, groups) == usage_profile(ort_codes, groups))


@dataclass(frozen=True)
class PerplexityFacts:
    perplexity_eager: float
    perplexity_ort: float
    perplexity_shift: float
    perplexity_allowed: float  # the export test's allowance for this difference


def perplexity_facts(eager: float, ort: float, atol: float, rtol: float) -> PerplexityFacts:
    return PerplexityFacts(eager, ort, ort - eager, atol + rtol * abs(eager))


@dataclass(frozen=True)
class RuleFacts:
    """The export test's rule as it runs it, and the `onnx.exactness` skip."""

    test_rule_passed: bool
    rule_forgiven: bool
    first_failing_output: str | None
    never_compared: list[str]
    skip_rule_passed: bool


def rule_facts(rule: export_rule.RuleResult, ort_outputs: dict, eager_outputs: dict) -> RuleFacts:
    return RuleFacts(rule.passed, rule.forgiven, rule.first_mismatch, rule.never_compared,
                     export_rule.names_match(ort_outputs, eager_outputs))


@dataclass(frozen=True)
class AlignedFacts:
    """Eager re-run with ORT's codes against ORT, and the rtol each comparison would need."""

    aligned_ok: bool
    aligned_failing: list[str]
    needed_rtol: float  # the largest over every output
    # the seed's "rtol ~1e-2 observed" is about the perplexity; the other outputs need far more after a flip
    perplexity_needed_rtol: float


def aligned_facts(tie_aware: TieAwareResult, ort_outputs: dict, eager_outputs: dict, atol: float) -> AlignedFacts:
    return AlignedFacts(
        aligned_ok=not tie_aware.failing_outputs, aligned_failing=tie_aware.failing_outputs,
        needed_rtol=max(needed_rtol(ort_outputs[n], eager_outputs[n], atol) for n in eager_outputs),
        perplexity_needed_rtol=needed_rtol(ort_outputs["codevector_perplexity"],
                                           eager_outputs["codevector_perplexity"], atol))


@dataclass(frozen=True)
class NoiseFacts:
    logit_noise: float  # largest |ORT - eager| over the quantizer's logits
    gap_noise_max: float  # largest |ORT's move of a row's top-1 minus top-2 difference|


@dataclass(frozen=True)
class WhatIf:
    """Eager with its smallest-gap row flipped to the runner-up: what one flip would do (NaN/None: not measured)."""

    flip_perplexity_shift: float = float("nan")
    flip_needed_rtol: float = float("nan")
    fails_if_flipped: bool | None = None


@dataclass(frozen=True)
class MinRow:
    """Eager's smallest-gap row on ORT: top-1 minus top-2 logit there, for eager's two codes (0: ORT computed
    the two logits bit-identical too, as an exact tie needs for both argmax to take the first index)."""

    min_row: int
    ort_min_row_gap: float


@dataclass(frozen=True)
class CheckRow:
    model: str
    seed: int
    shape_mode: str
    paths: Paths
    defect: str | None  # what an injected defect changed (None: the graph as exported)
    reference: str  # "float64, eager's codes forced", or why there is no float64 reference
    explained_by_flips: bool | None  # with ORT's codes forced, every output a flip reaches within its noise bound
    gaps: GapFacts
    perplexity: PerplexityFacts
    rule: RuleFacts
    aligned: AlignedFacts
    noise: NoiseFacts
    what_if: WhatIf
    min_row: MinRow
    max_abs_diff: dict[str, float] = field(default_factory=dict)  # per output: column max_abs_diff_<output>

    def record(self) -> dict:
        """The row as the table holds it: every group's columns in declared order, then one column per output."""
        out = {}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if item.name == "max_abs_diff":
                out.update({f"max_abs_diff_{name}": v for name, v in value.items()})
            elif dataclasses.is_dataclass(value):
                out.update({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
            else:
                out[item.name] = value
        return out


def columns() -> list[str]:
    """The table's declared columns before the per-output `max_abs_diff_<output>` ones."""
    types = typing.get_type_hints(CheckRow)
    out = []
    for item in dataclasses.fields(CheckRow):
        group = types[item.name]
        if item.name != "max_abs_diff":
            out += [f.name for f in dataclasses.fields(group)] if dataclasses.is_dataclass(group) else [item.name]
    return out
