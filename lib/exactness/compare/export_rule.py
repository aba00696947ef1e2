"""The transformers export test's value check (`_check_outputs_close`), as counts.

The test puts the whole output dict into one `torch.testing.assert_close(actual, expected, atol, rtol)`. torch
walks the keys in sorted order, compares every output, and raises with the first one (in that order) that is not
close: an output of another shape or dtype, or one holding elements outside `atol + rtol * |expected|` (torch's
`isclose` in the outputs' own dtype, NaN against NaN not close). The test then forgives that error when its
"Mismatched elements: m / n" says m / n < 5%; a 0-d output's message has no such line, so it gets no allowance.
A forgiven first mismatch ends the check: the outputs after it are never judged.

Here the same rule is computed from counts (`OutputCount`, one per output) by `judge`, so a study that keeps only
counts (the discrete-ops rows, a planted defect's count) applies the rule without tensors and without reading
torch's message text. `export_test_rule` counts two dicts of tensors and judges them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import torch

ALLOWED_FRACTION = 0.05


@dataclass(frozen=True)
class OutputCount:
    """One output as `assert_close` sees it. `comparable`: both sides have it, with one shape and one dtype
    (else torch fails it with no element count)."""

    name: str
    numel: int
    not_close: int  # elements outside atol + rtol * |expected| (NaN never close)
    zero_dim: bool = False
    comparable: bool = True

    @property
    def close(self) -> bool:
        return self.comparable and self.not_close == 0

    @property
    def forgiven(self) -> bool:
        """Whether the test's 5% allowance forgives this output's mismatch (only a counted, not 0-d output)."""
        return (self.comparable and not self.zero_dim and self.numel > 0
                and self.not_close / self.numel < ALLOWED_FRACTION)


@dataclass
class RuleResult:
    passed: bool
    first_mismatch: str | None = None  # the output at which the check stopped
    forgiven: bool = False  # the first mismatch was within the 5% allowance
    message: str = ""  # the first mismatch in words
    compared: list[str] = field(default_factory=list)  # outputs judged, in sorted order
    never_compared: list[str] = field(default_factory=list)  # outputs after a forgiven (or failing) first mismatch

    def __bool__(self) -> bool:
        return self.passed


def not_close(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> int:
    """Elements `assert_close` counts as not close: `torch.isclose` in the tensors' own dtype, NaN never equal."""
    return int((~torch.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=False)).sum())


def count(name: str, actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> OutputCount:
    actual_t, expected_t = actual.detach(), expected.detach()
    numel, zero_dim = int(expected_t.numel()), expected_t.dim() == 0
    if actual_t.shape != expected_t.shape or actual_t.dtype != expected_t.dtype:
        return OutputCount(name, numel, numel, zero_dim, comparable=False)
    return OutputCount(name, numel, not_close(actual_t, expected_t, atol, rtol), zero_dim)


def judge(counts: Iterable[OutputCount]) -> RuleResult:
    """The export test's verdict over these outputs: the first output in sorted order that is not close decides;
    it passes when forgiven, and the outputs after it are never judged."""
    ordered = sorted(counts, key=lambda c: c.name)
    names = [c.name for c in ordered]
    for at, output in enumerate(ordered):
        if output.close:
            continue
        message = (f"{output.name}: {output.not_close:,} / {output.numel:,} elements not close" if output.comparable
                   else f"{output.name}: another shape or dtype on each side")
        return RuleResult(output.forgiven, output.name, output.forgiven, message, names[:at + 1], names[at + 1:])
    return RuleResult(True, None, False, "", names, [])


def export_test_rule(actual: Mapping[str, torch.Tensor], expected: Mapping[str, torch.Tensor],
                     atol: float = 1e-3, rtol: float = 1e-3) -> RuleResult:
    """`judge` over the outputs. Key sets that differ fail before any value is compared, as torch's key check does
    (reported at the first name only one side has)."""
    if set(actual) != set(expected):
        first = sorted(set(actual) ^ set(expected))[0]
        side = "actual" if first in actual else "expected"
        return RuleResult(False, first, False, f"{first}: only the {side} outputs have it", [], sorted(expected))
    return judge(count(name, actual[name], expected[name], atol, rtol) for name in expected)


HALF = (torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class Rule:
    """One version of the export test's check. `left_out`: outputs left out of the comparison whenever another
    output remains (newer tests leave out what a top-k picked); `half_tolerance`: where any expected output is
    half precision, atol and rtol are raised to at least this (None: never)."""

    name: str
    left_out: frozenset[str] = frozenset()
    half_tolerance: float | None = None

    def kept(self, names: Iterable[str]) -> list[str]:
        names = list(names)
        selected = [n for n in names if n in self.left_out]
        return [n for n in names if n not in selected] if selected and len(selected) < len(names) else names

    def judge(self, counts: Iterable[OutputCount]) -> RuleResult:
        """The verdict from counts taken at the test's own tolerances (a half-precision output's count at the
        widened tolerance is the caller's to take: `tolerances`)."""
        counts = list(counts)
        kept = set(self.kept(c.name for c in counts))
        return judge(c for c in counts if c.name in kept)

    def tolerances(self, expected: Mapping[str, torch.Tensor], atol: float, rtol: float) -> tuple[float, float]:
        """The atol and rtol the rule compares at: raised where an output it compares is half precision (the
        outputs it leaves out do not count)."""
        compared = [expected[n] for n in self.kept(expected)]
        if self.half_tolerance is not None and any(t.dtype in HALF for t in compared):
            return max(atol, self.half_tolerance), max(rtol, self.half_tolerance)
        return atol, rtol

    def applied(self, actual: Mapping[str, torch.Tensor], expected: Mapping[str, torch.Tensor],
                atol: float = 1e-3, rtol: float = 1e-3) -> RuleResult:
        tolerances = self.tolerances(expected, atol, rtol)
        left_out = set(expected) - set(self.kept(expected))  # decided by the expected outputs, then both sides
        actual = {n: v for n, v in actual.items() if n not in left_out}
        expected = {n: v for n, v in expected.items() if n not in left_out}
        return export_test_rule(actual, expected, *tolerances)


# The rule this workbook judges by when no checkout is given.
BUILT_IN = Rule("the built-in replica of the export test's _check_outputs_close (every output, sorted; the first "
                "mismatch forgiven under 5%)")


def names_match(actual: dict, expected: dict) -> bool:
    """What the `onnx.exactness` skip still checks: the same output names on both sides."""
    return set(actual) == set(expected)
