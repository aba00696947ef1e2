"""The answer table a report opens with: one line per class or configuration, its cause, what to do, and how
often it fails, each with the proof that names the cause.

A study builds its `Answer`s from its own result; `show` fills the block `placeholder` reserved at the top of
the notebook (so the report opens with the answer although it is computed last) and writes the records to
summary.json under `answers`, where the index and `exactness show` read the same records.
"""

from __future__ import annotations

import html
from dataclasses import asdict, dataclass, field
from typing import Any

DISPLAY_ID = "exactness-answers"
SUMMARY_KEY = "answers"


@dataclass(frozen=True)
class Answer:
    subject: str  # the class or configuration the line answers for
    cause: str  # the study's cause word (a defect, float noise, an exact tie, ...)
    action: str  # what a test should do about it
    rate: str  # how often the export test fails because of it, in words ("" where a study measures no rate)
    proof: str = ""  # the numbers that show the cause
    compare: list[str] = field(default_factory=list)  # outputs a test keeps comparing
    exclude: list[str] = field(default_factory=list)  # outputs it leaves out
    where: str = ""  # where a defect starts
    failures_per_40000: float | None = None
    failures_low: float | None = None
    failures_high: float | None = None
    verified: bool | None = None  # the recommended test change, run on this run's seeds

    def to_dict(self) -> dict[str, Any]:
        return {"class": self.subject, **asdict(self)}  # "class": the name machine readers of a model study use

    @classmethod
    def from_dict(cls, data: Any) -> Answer | None:
        if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in ("subject", "cause",
                                                                                        "action", "rate")):
            return None
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        try:
            return cls(**known)
        except TypeError:
            return None


STYLE = """
.exactness-answers { font-family: sans-serif; margin: 8px 0 16px 0; }
.exactness-answers h2 { margin: 4px 0 6px 0; font-size: 1.25em; }
.exactness-answers table { border-collapse: collapse; font-size: 0.92em; }
.exactness-answers th, .exactness-answers td { border-bottom: 1px solid #ddd; padding: 4px 8px;
  text-align: left !important; vertical-align: top; }
.exactness-answers td.proof { color: #555; font-size: 0.85em; max-width: 36em; }
.exactness-answers .legend { color: #555; font-size: 0.85em; margin: 4px 0; }
.cause { display: inline-block; font-size: 0.85em; font-weight: bold; padding: 1px 6px; border-radius: 3px;
  background: #e0e0e0; white-space: nowrap; }
.cause-defect { background: #ffcdd2; color: #b71c1c; }
.cause-exact-tie, .cause-near-tie, .cause-random-draw { background: #fff3c4; color: #6d4c00; }
.cause-float-noise, .cause-nothing-reaches, .cause-never-flips, .cause-exact, .cause-within-rounding {
  background: #c8e6c9; color: #1b5e20; }
.cause-undecided, .cause-export-failed { background: #e0e0e0; color: #424242; }
"""

# Every cause word any study uses, explained once (the index and every report show the same legend).
MEANINGS = {
    "defect": "one side computes something else: NaN or inf on one side, or an error far beyond float rounding; "
              "localized to where it starts",
    "exact tie": "a discrete choice between exactly equal values, which the runtimes break differently",
    "near-tie": "a discrete choice between values closer than the float noise, flipped by rounding",
    "random draw": "a random op on the output path: the runtimes draw different numbers",
    "float noise": "both sides within float32 rounding of a float64 reference, yet beyond the test's tolerance",
    "nothing reaches": "no discrete choice reaches an output, and both sides are within rounding of float64",
    "never flips": "discrete choices reach outputs but flipped on no seed, often enough to bound the rate",
    "undecided": "the run cannot decide yet; the line says what would",
    "export failed": "the class did not export",
}


def _cause(word: str) -> str:
    return f'<span class="cause cause-{html.escape(word.replace(" ", "-"))}">{html.escape(word)}</span>'


def to_html(answers: list[Answer], title: str = "Answers") -> str:
    rows = "".join(
        f"<tr><td>{html.escape(a.subject)}</td><td>{_cause(a.cause)}</td><td>{html.escape(a.action)}</td>"
        f"<td>{html.escape(a.rate)}</td><td class=\"proof\">{html.escape(a.proof)}</td></tr>" for a in answers)
    used = sorted({a.cause for a in answers if a.cause in MEANINGS})
    legend = "; ".join(f"<b>{html.escape(w)}</b>: {html.escape(MEANINGS[w])}" for w in used)
    body = (f"<table><thead><tr><th>class</th><th>cause</th><th>what to do</th><th>export test fails</th>"
            f"<th>proof</th></tr></thead><tbody>{rows}</tbody></table>" if answers else
            "<p>Nothing answered: the run had no class or configuration to report.</p>")
    return (f"<style>{STYLE}</style><section class=\"exactness-answers\"><h2>{html.escape(title)}</h2>{body}"
            + (f"<p class=\"legend\">{legend}</p>" if legend else "") + "</section>")


PENDING_HTML = (f"<style>{STYLE}</style><section class=\"exactness-answers exactness-pending\"><h2>Answers</h2>"
                "<p>Not computed yet: they appear here when the run has finished. If this text is still here in a "
                "finished report, the run stopped before its answers (see the failing cell).</p></section>")


def placeholder() -> None:
    """Reserve the answers' place at the top of the notebook; `show` fills it in."""
    from IPython.display import HTML, display

    display(HTML(PENDING_HTML), display_id=DISPLAY_ID)


def show(answers: list[Answer], artifacts=None) -> None:
    from IPython.display import HTML, update_display

    if artifacts is not None:
        artifacts.summary(**{SUMMARY_KEY: [a.to_dict() for a in answers]})
    update_display(HTML(to_html(answers)), display_id=DISPLAY_ID)


def from_summary(summary: Any) -> list[Answer]:
    """The answers a summary.json holds; records that do not parse are skipped, not fatal."""
    records = summary.get(SUMMARY_KEY, []) if isinstance(summary, dict) else []
    parsed = [Answer.from_dict(r) for r in (records if isinstance(records, list) else [])]
    return [a for a in parsed if a is not None]
