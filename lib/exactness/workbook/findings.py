"""The findings a report opens with: one claim each, our figure, the investigation's figure only where it
measured the same thing, and a verdict computed from the data.

A study's `findings(...)` returns a list of `Finding`; the notebook renders them with `show`, which also
writes them to summary.json, where the index and `exactness show` read the same records. The block is
displayed once near the top of the notebook (`placeholder`) and filled in at the end, so the executed
notebook and its HTML report open with the answer although it is computed last.
"""

from __future__ import annotations

import html
from dataclasses import asdict, dataclass
from typing import Any

from exactness.compare.rates import RatePolicy, binomial_two_sided_p
from exactness.workbook import wording

# "fact": arithmetic any conforming machine gives (an IEEE 754 spacing): checked, never a reproduction, since no
# measurement could have disagreed with it short of a broken float unit
VERDICTS = ("reproduced", "differs", "not comparable", "new", "fact")
DISPLAY_ID = "exactness-findings"
SUMMARY_KEY = "findings"


class FindingError(ValueError):
    pass


@dataclass(frozen=True)
class Finding:
    claim: str  # one sentence, in words, with our figure
    ours: str  # our figure as the reader sees it, with its interval or unit
    verdict: str  # one of VERDICTS, computed from the data
    source: str = ""  # the investigation's figure, labelled by its pull request, section and model; "" if it never
    # measured this
    why: str = ""  # the measured reason for "differs" or "not comparable" (or "unexplained")
    evidence: str = ""  # the table or figure that backs the claim

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise FindingError(f"verdict {self.verdict!r} is not one of {', '.join(VERDICTS)}")
        if self.verdict in ("reproduced", "differs") and not self.source:
            raise FindingError(f"a {self.verdict!r} finding needs the investigation's figure: {self.claim!r}")
        if self.verdict == "new" and self.source:
            raise FindingError(f"a 'new' finding has no investigation's figure, but got {self.source!r}: "
                               f"{self.claim!r}")
        if self.verdict in ("differs", "not comparable") and not self.why:
            raise FindingError(f"a {self.verdict!r} finding says why (or 'unexplained'): {self.claim!r}")

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Finding:
        if isinstance(data, dict) and "seed" in data and "source" not in data:  # a summary written before the rename
            data = {**{k: v for k, v in data.items() if k != "seed"}, "source": data["seed"]}
        if not isinstance(data, dict) or not all(isinstance(data.get(k, ""), str) for k in cls.__dataclass_fields__):
            raise FindingError(f"not a finding record: {data!r}")
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    def text(self) -> str:
        """One plain line: the verdict word, the claim, the investigation's figure where there is one."""
        source = f" Investigation: {self.source}." if self.source else ""
        why = f" ({self.why})" if self.why else ""
        return f"[{self.verdict}] {self.claim}{why}{source}"


# ---------------------------------------------------------------------------------------------------------
# Rendering

STYLE = """
.exactness-findings { font-family: sans-serif; border: 1px solid #c5cae9; background: #f7f8fd; padding: 8px 16px;
  margin: 8px 0 16px 0; border-radius: 4px; }
.exactness-findings h2 { margin: 4px 0 6px 0; font-size: 1.25em; }
.exactness-findings ol { margin: 0; padding-left: 1.4em; }
.exactness-findings li { margin: 5px 0; line-height: 1.4; }
.exactness-findings .detail { color: #555; font-size: 0.88em; }
.verdict { display: inline-block; min-width: 7.5em; text-align: center; font-size: 0.8em; font-weight: bold;
  padding: 1px 6px; margin-right: 6px; border-radius: 3px; }
.verdict-reproduced { background: #c8e6c9; color: #1b5e20; }
.verdict-differs { background: #ffcdd2; color: #b71c1c; }
.verdict-not-comparable { background: #e0e0e0; color: #424242; }
.verdict-new { background: #bbdefb; color: #0d47a1; }
.verdict-fact { background: #f5f5f5; color: #424242; border: 1px solid #bdbdbd; }
"""


def verdict_badge(verdict: str) -> str:
    return f'<span class="verdict verdict-{verdict.replace(" ", "-")}">{html.escape(verdict)}</span>'


def _item(finding: Finding) -> str:
    details = [f"ours: {html.escape(finding.ours)}"]
    if finding.source:
        details.append(f"investigation: {html.escape(finding.source)}")
    if finding.why:
        details.append(f"why: {html.escape(finding.why)}")
    if finding.evidence:
        details.append(f"evidence: {html.escape(finding.evidence)}")
    return (f"<li>{verdict_badge(finding.verdict)}{html.escape(finding.claim)}"
            f"<br><span class=\"detail\">{' &middot; '.join(details)}</span></li>")


def to_html(findings: list[Finding], title: str = "Findings") -> str:
    items = "".join(_item(f) for f in findings) or "<li>No findings: the run produced nothing to report.</li>"
    return (f"<style>{STYLE}</style><section class=\"exactness-findings\"><h2>{html.escape(title)}</h2>"
            f"<ol>{items}</ol></section>")


PENDING_HTML = (f"<style>{STYLE}</style><section class=\"exactness-findings exactness-pending\"><h2>Findings</h2>"
                "<p>Not computed yet: they appear here when the last cell of the notebook has run. If this text is "
                "still here in a finished report, the run stopped before its findings (see the failing cell).</p>"
                "</section>")


def placeholder() -> None:
    """Reserve the findings' place near the top of the notebook; `show` fills it in."""
    from IPython.display import HTML, display

    display(HTML(PENDING_HTML), display_id=DISPLAY_ID)


def show(findings: list[Finding], artifacts=None) -> None:
    """Fill in the block `placeholder` reserved, and keep the records in summary.json."""
    from IPython.display import HTML, update_display

    if artifacts is not None:
        artifacts.summary(**{SUMMARY_KEY: [f.to_dict() for f in findings]})
    update_display(HTML(to_html(findings)), display_id=DISPLAY_ID)


def from_summary(summary: Any) -> list[Finding]:
    """The findings a summary.json holds; records that do not parse are skipped, not fatal."""
    records = summary.get(SUMMARY_KEY, []) if isinstance(summary, dict) else []
    found = []
    for record in records if isinstance(records, list) else []:
        try:
            found.append(Finding.from_dict(record))
        except (FindingError, TypeError):
            continue
    return found


# ---------------------------------------------------------------------------------------------------------
# Figures in words: counts, rates with their interval, comparisons with an investigation's rate


# one formatter for counts, rates and bounds on every page (`wording`): re-exported for the studies' findings
count, significant, one_in = wording.count, wording.significant, wording.one_in


def span(low: float, high: float, joiner: str = " to ") -> str:
    """A range of measured values as `significant` writes them; one value when both ends print the same."""
    a, b = significant(low), significant(high)
    return a if a == b else f"{a}{joiner}{b}"


def rate_text(k: int, n: int, what: str = "failures", per: str = "seeds") -> str:
    """'failures 1 in 670 (95% 1 in 2,700 to 1 in 230; 3 of 2,000 seeds)', 'no failures in 2,000 seeds: at
    most 1 in 670 (95% bound)': `wording.rate`, named."""
    return named(wording.rate(k, n, per.removesuffix("s")), what)


def named(rate_words: str, what: str = "failures") -> str:
    """A rate in the one shape (`wording.rate`) named by what it counts: 'failures 1 in 670 (...)', 'no failures in
    2,000 seeds: at most ...'."""
    if rate_words.startswith("none in "):
        return f"no {what} in {rate_words.removeprefix('none in ')}"
    return f"{what} {rate_words}"


def rate_verdict(k: int, n: int, seed_k: int, seed_n: int, source: str = "the investigation") -> tuple[str, str]:
    """'reproduced' when our count and the investigation's are consistent with one rate (exact test, 5% level)
    and our sample could have disagreed, i.e. finding no event at all would have been inconsistent; 'not
    comparable' when even none would have agreed (the sample is too small to say anything); else 'differs'.
    The second item says why, with the count expected at the investigation's rate."""
    expected = n * seed_k / seed_n
    p = binomial_two_sided_p(k, n, seed_k, seed_n)
    consistent = p >= 0.05
    why = (f"at {source}'s rate {significant(expected)} were expected in {count(n)} seeds, we found "
           f"{count(k)}: {'consistent' if consistent else 'inconsistent'} with one rate (exact test p = "
           f"{significant(p)})")
    if consistent and binomial_two_sided_p(0, n, seed_k, seed_n) >= 0.05:
        # the one count of seeds that decides, as every answer states it (`RatePolicy`): none failing in that many
        # bounds the rate under the investigation's
        policy = RatePolicy(seed_k / seed_n)
        return "not comparable", (f"{why}; but none at all would agree too (P(0) = "
                                  f"{significant((1 - seed_k / seed_n) ** n)}): {count(policy.seeds_needed())} "
                                  f"seeds with none failing would bound the rate under {source}'s "
                                  f"{one_in(policy.rate)} (one-sided 95%)")
    return ("reproduced" if consistent else "differs"), why
