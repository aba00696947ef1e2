"""The near-tie view of a discrete choice: how close the top two candidates are, which rows flipped,
what a flip does to the outputs, and a comparison that excuses flips only where eager itself was on a
coin flip."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from exactness.compare.ulp import ulp


@dataclass(frozen=True)
class Gaps:
    gap: torch.Tensor  # top-1 minus top-2 logit, per row (0 for an exact tie)
    top1: torch.Tensor
    top1_index: torch.Tensor
    top2_index: torch.Tensor

    @property
    def gap_ulps(self) -> torch.Tensor:
        """The gap in ulps of the top logit: how many rounding steps apart the two candidates are."""
        return self.gap / ulp(self.top1)

    @property
    def min_row(self) -> int:
        return int(torch.argmin(self.gap))


def top_two(logits: torch.Tensor) -> Gaps:
    values, indices = logits.topk(2, dim=-1)
    return Gaps(values[:, 0] - values[:, 1], values[:, 0], indices[:, 0], indices[:, 1])


def flipped_rows(eager_codes: torch.Tensor, other_codes: torch.Tensor) -> list[int]:
    return (eager_codes != other_codes).nonzero().flatten().tolist()


def usage_profile(codes: torch.Tensor, groups: int) -> list[list[int]]:
    """Per group, the sorted list of how often each used code was picked: perplexity depends on nothing else."""
    per_group = codes.view(-1, groups)
    return [sorted(torch.bincount(per_group[:, g]).tolist(), reverse=True) for g in range(groups)]


def needed_rtol(actual: torch.Tensor, expected: torch.Tensor, atol: float) -> float:
    """The smallest rtol with which every element passes |a - e| <= atol + rtol * |e|."""
    diff = (actual.double() - expected.double()).abs() - atol
    scale = expected.double().abs().clamp_min(1e-30)
    return max(0.0, float((diff / scale).max())) if diff.numel() else 0.0


@dataclass
class TieAwareResult:
    passed: bool
    tie_rows: list[int] = field(default_factory=list)  # rows within the noise bound in eager
    excused_flips: list[int] = field(default_factory=list)
    confident_flips: list[int] = field(default_factory=list)  # flips eager was sure about: a defect
    failing_outputs: list[str] = field(default_factory=list)
    message: str = ""

    def __bool__(self) -> bool:
        return self.passed


def tie_aware_compare(eager_logits: torch.Tensor, ort_codes: torch.Tensor, aligned: dict[str, torch.Tensor],
                      ort_outputs: dict[str, torch.Tensor], noise_bound: float, atol: float = 1e-3,
                      rtol: float = 1e-3) -> TieAwareResult:
    """Excuse a flipped row only if ORT's code was within `noise_bound` of eager's best in eager's own
    logits; then compare every output against eager re-run with ORT's choices (`aligned`), each output on
    its own, every element at full tolerance, no allowance."""
    gaps = top_two(eager_logits)
    eager_codes = gaps.top1_index
    chosen = eager_logits.gather(-1, ort_codes.view(-1, 1)).flatten()
    flips = flipped_rows(eager_codes, ort_codes)
    confident = [r for r in flips if float(gaps.top1[r] - chosen[r]) > noise_bound]
    failing = [name for name in sorted(aligned) if name in ort_outputs and not torch.allclose(
        ort_outputs[name].to(aligned[name].dtype), aligned[name], atol=atol, rtol=rtol)]
    failing += [name for name in sorted(aligned) if name not in ort_outputs]
    tie_rows = (gaps.gap <= noise_bound).nonzero().flatten().tolist()
    passed = not confident and not failing
    message = "" if passed else "; ".join(
        ([f"rows {confident} flipped although eager preferred its code by more than {noise_bound:.3g}"]
         if confident else []) + ([f"outputs {failing} differ beyond atol={atol:g}, rtol={rtol:g}"] if failing else []))
    return TieAwareResult(passed, tie_rows, [r for r in flips if r not in confident], confident, failing, message)
