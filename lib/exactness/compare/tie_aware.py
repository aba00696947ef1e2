"""The near-tie view of a discrete choice: how close the top two candidates are, which rows flipped,
what a flip does to the outputs, and a comparison that excuses flips only where eager itself was on a
coin flip."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
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
    """Per row the model's choice (argmax: the first maximum, as the model's own `argmax` takes it), the
    runner-up (the first maximum of the rest: on an exact tie, the next tied code) and the gap between
    their logits. numpy's argmax and max are 3-4x faster on one thread than `topk(2)`, which on exact ties
    may also list the later code first."""
    values = logits.detach()
    values = (values if values.dtype in (torch.float32, torch.float64) else values.float()).numpy()
    rows = np.arange(values.shape[0])
    first = values.argmax(axis=-1)
    top1 = values[rows, first]
    rest = values.copy()
    rest[rows, first] = -np.inf
    second = rest.argmax(axis=-1)
    return Gaps(torch.from_numpy(top1 - rest[rows, second]), torch.from_numpy(top1), torch.from_numpy(first),
                torch.from_numpy(second))


def flipped_rows(eager_codes: torch.Tensor, other_codes: torch.Tensor) -> list[int]:
    return (eager_codes != other_codes).nonzero().flatten().tolist()


def usage_profile(codes: torch.Tensor, groups: int) -> list[list[int]]:
    """Per group, the sorted list of how often each used code was picked: perplexity depends on nothing else."""
    per_group = codes.view(-1, groups)
    return [sorted((c for c in torch.bincount(per_group[:, g]).tolist() if c), reverse=True) for g in range(groups)]


def needed_rtol(actual: torch.Tensor, expected: torch.Tensor, atol: float) -> float:
    """The smallest rtol with which every element passes |a - e| <= atol + rtol * |e|."""
    diff = (actual.double() - expected.double()).abs() - atol
    scale = expected.double().abs().clamp_min(1e-30)
    return max(0.0, float((diff / scale).max())) if diff.numel() else 0.0


@dataclass
class TieAwareResult:
    noise_bound: float
    flip_margins: dict[int, float] = field(default_factory=dict)  # flipped row -> eager's preference for its code
    failing_outputs: list[str] = field(default_factory=list)  # differ from eager re-run with ORT's choices

    @property
    def confident_flips(self) -> list[int]:
        """Flips eager was sure about (its code won by more than the noise bound): a defect, not a tie."""
        return [row for row, margin in self.flip_margins.items() if margin > self.noise_bound]

    @property
    def passed(self) -> bool:
        return not self.confident_flips and not self.failing_outputs

    def __bool__(self) -> bool:
        return self.passed

    @property
    def message(self) -> str:
        parts = []
        if self.confident_flips:
            parts.append(f"rows {self.confident_flips} flipped although eager preferred its code by more than "
                         f"{self.noise_bound:.3g}")
        if self.failing_outputs:
            parts.append(f"outputs {self.failing_outputs} differ from eager re-run with ORT's choices")
        return "; ".join(parts)


def tie_aware_compare(eager_logits: torch.Tensor, ort_codes: torch.Tensor, aligned: dict[str, torch.Tensor],
                      ort_outputs: dict[str, torch.Tensor], noise_bound: float, atol: float = 1e-3,
                      rtol: float = 1e-3) -> TieAwareResult:
    """Excuse a flipped row only if ORT's code was within `noise_bound` of eager's best in eager's own
    logits; compare every output against eager re-run with ORT's choices (`aligned`), each output on its
    own, every element at full tolerance, no allowance."""
    gaps = top_two(eager_logits)
    chosen = eager_logits.gather(-1, ort_codes.view(-1, 1)).flatten()
    margins = {r: float(gaps.top1[r] - chosen[r]) for r in flipped_rows(gaps.top1_index, ort_codes)}
    failing = [name for name in sorted(aligned) if name not in ort_outputs or not torch.allclose(
        ort_outputs[name].to(aligned[name].dtype), aligned[name], atol=atol, rtol=rtol)]
    return TieAwareResult(noise_bound, margins, failing)
