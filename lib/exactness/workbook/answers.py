"""The answer table a report opens with: one line per class or configuration, its cause, what to do, and how
often it fails, each with the proof that names the cause.

A study builds its `Answer`s from its own result; `show` fills the block `placeholder` reserved at the top of
the notebook (so the report opens with the answer although it is computed last) and writes the records to
summary.json under `answers`, where the index and `exactness show` read the same records.
"""

from __future__ import annotations

import html
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from exactness.workbook.presentation import inline_markdown

DISPLAY_ID = "exactness-answers"
SUMMARY_KEY = "answers"
COLUMNS_KEY = "answers_columns"


@dataclass(frozen=True)
class Columns:
    """The headers of the answer table: a model study answers per class, the DAC studies per init or cause, the
    environment for its machine. A column every answer leaves empty is not shown."""

    subject: str = "class"
    cause: str = "cause"
    action: str = "what to do"
    rate: str = "export test fails"
    flips: str = "a discrete choice flips"
    proof: str = "proof"

    @classmethod
    def from_summary(cls, summary: Any) -> Columns:
        data = summary.get(COLUMNS_KEY) if isinstance(summary, dict) else None
        if not isinstance(data, dict):
            return cls()
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if isinstance(data.get(k), str)})


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
    flips: str = ""  # how often a discrete choice flips, apart from failures ("" where a study counts no flips)
    seeds: int | None = None  # the seeds the rate is over (0: none measured); None where a study keeps no count

    def to_dict(self) -> dict[str, Any]:
        return {"class": self.subject, **asdict(self)}  # "class": the name machine readers of a model study use

    @classmethod
    def from_dict(cls, data: Any) -> Answer | None:
        if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in ("subject", "cause",
                                                                                        "action", "rate")):
            return None
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        if not isinstance(known.get("seeds"), int) or isinstance(known.get("seeds"), bool) or known["seeds"] < 0:
            known.pop("seeds", None)  # a damaged count is no count: the line stays, unranked by its seeds
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
.exactness-answers td.answer-proof { color: #555; font-size: 0.85em; min-width: 22em; max-width: 36em; }
.exactness-answers td.answer-proof summary { cursor: pointer; }
.exactness-answers td.answer-subject { font-weight: bold; }
.exactness-answers .legend { color: #555; font-size: 0.85em; margin: 4px 0; }
.cause { display: inline-block; font-size: 0.85em; font-weight: bold; padding: 1px 6px; border-radius: 3px;
  background: #e0e0e0; white-space: nowrap; }
.cause-defect { background: #ffcdd2; color: #b71c1c; }
.cause-exact-tie, .cause-near-tie, .cause-random-draw { background: #fff3c4; color: #6d4c00; }
.cause-float-noise, .cause-nothing-reaches, .cause-never-flips, .cause-exact, .cause-within-rounding,
.cause-IEEE-floats { background: #c8e6c9; color: #1b5e20; }
.cause-codes-flip, .cause-padding, .cause-flushes-subnormals, .cause-not-IEEE-spacing {
  background: #fff3c4; color: #6d4c00; }
.cause-undecided, .cause-export-failed, .cause-not-run { background: #e0e0e0; color: #424242; }
"""

# Every cause word any study uses, explained once (the index and every report show the same legend).
MEANINGS = {
    "defect": "one side computes something else: NaN or infinity on one side, or an error far beyond float rounding; "
              "or the model itself breaks (NaN in eager too); localized to where it starts",
    "exact tie": "a discrete choice between exactly equal values, which the runtimes break differently",
    "near-tie": "a discrete choice between values closer than the float noise, flipped by rounding",
    "random draw": "a random op on the output path: the runtimes draw different numbers",
    "float noise": "both sides within float32 rounding of a float64 reference: the difference is rounding (a model "
                   "study says so where it exceeds the test's tolerance)",
    "nothing reaches": "no discrete choice reaches an output (or none runs at all), so no seed can flip; where a study "
                       "compares the values, both sides are within rounding of float64",
    "never flips": "discrete choices reach outputs but flipped on no seed, often enough to bound the rate",
    "never fails here": "under this pair of sides the export test passed on every seed run (a bound, not never)",
    "precision noise": "a reduced precision's rounding moves an output beyond the test's tolerance with every "
                       "discrete choice the same; each side near float64 in its own roundoff",
    "near-tie and noise": "some failures flipped a near-tie, others are the precision's rounding with the same "
                          "choices",
    "TF32 rounding": "a TF32 convolution's 10-bit operands turn a one-ulp weight difference into TF32-sized "
                     "differences; float32 does not",
    "not reproduced": "no precision run here grows the difference as the investigation saw",
    "not comparable": "this run's subject is not the one the investigation measured: set the run beside it first",
    "undecided": "the run cannot decide yet; the line says what would",
    "not run": "the class did not build or did not export: the line says why",
    "exact": "bit-identical to the reference: no rounding step differs",
    "within rounding": "apart from the reference by float rounding only, and every discrete code the same",
    "codes flip": "float rounding changes a discrete code (a quantizer's choice), so decoded values move by far "
                  "more than rounding",
    "padding": "a clip's last frames, whose receptive field reaches past its end, read the batch's appended zeros "
               "(and what the layers compute from them) where the clip alone reads each layer's own zero padding",
    "IEEE floats": "subnormals kept and every float spacing as IEEE 754 defines it: results here depend only on "
                   "the kernels, thread counts and versions named",
    "flushes subnormals": "a runtime sets values below the smallest normal float to zero: results near zero differ "
                          "from a machine that keeps them",
    "not IEEE spacing": "a measured float spacing is not the IEEE 754 value",
}


# The order a maintainer reads causes in (the index's class table, a model study's answer table): what computes the
# wrong thing first, then what the run could not settle, then flaky comparisons, then what is fine as it is.
CAUSE_ORDER = ("defect", "undecided", "not run", "random draw", "near-tie", "near-tie and noise", "exact tie",
               "precision noise", "TF32 rounding", "codes flip", "padding", "float noise", "never flips",
               "never fails here", "nothing reaches")


def cause_rank(cause: str) -> int:
    return CAUSE_ORDER.index(cause) if cause in CAUSE_ORDER else len(CAUSE_ORDER)


def by_cause(found: list[Answer]) -> list[Answer]:
    """`found` sorted by cause (`CAUSE_ORDER`), then by subject: the same order on every run."""
    return sorted(found, key=lambda a: (cause_rank(a.cause), a.subject))


def cause_badge(word: str) -> str:
    return f'<span class="cause cause-{html.escape(word.replace(" ", "-"))}">{html.escape(word)}</span>'


def legend(words) -> str:
    """The meaning of each cause word among `words` that has one, once, in the order of MEANINGS."""
    words = set(words)
    used = [w for w in MEANINGS if w in words]
    return "; ".join(f"<b>{html.escape(w)}</b>: {html.escape(MEANINGS[w])}" for w in used)


def anchor(subject: str) -> str:
    """The id of a subject's answer row, so that the index (and a sentence elsewhere) links straight to it."""
    return "answer-" + re.sub(r"[^A-Za-z0-9_-]+", "-", subject).strip("-")


# A proof longer than this shows its first sentence and folds the rest: the table is read row by row first
PROOF_SHOWN = 240
_PERIOD = re.compile(r"\.\s+(?=[A-Z])")  # a period, then a capital: "... flipped. Then", never "1.2e-07"
_ABBREVIATIONS = ("e.g.", "i.e.", "vs.", "cf.", "etc.")


def first_sentence_end(text: str) -> int | None:
    """Where the first sentence of `text` ends (after its period), or None: a period followed by a capital, outside
    a code span, a quotation and brackets, and not an abbreviation's (an error's text holds all of these)."""
    for found in _PERIOD.finditer(text):
        left = text[:found.start() + 1]
        if (left.count("`") % 2 or left.count('"') % 2 or left.count("(") > left.count(")")
                or left.count("[") > left.count("]") or left.lower().endswith(_ABBREVIATIONS)):
            continue
        return found.start() + 1
    return None


def proof_html(proof: str) -> str:
    """A proof as one cell: whole when short; else its first sentence, and the rest one click away."""
    end = first_sentence_end(proof) if len(proof) > PROOF_SHOWN else None
    if end is None:
        return inline_markdown(proof)
    return (f"<details><summary>{inline_markdown(proof[:end])}</summary>{inline_markdown(proof[end:].strip())}"
            "</details>")


def table_html(answers: list[Answer], columns: Columns | None = None, anchors: bool = True) -> str:
    """The answer table alone: one row per answer, the columns every answer leaves empty left out."""
    columns = columns or Columns()
    cells = {"subject": lambda a: html.escape(a.subject), "cause": lambda a: cause_badge(a.cause),
             "action": lambda a: inline_markdown(a.action), "rate": lambda a: html.escape(a.rate),
             "flips": lambda a: html.escape(a.flips), "proof": lambda a: proof_html(a.proof)}
    shown = [name for name in cells if name in ("subject", "cause") or any(getattr(a, name) for a in answers)]
    head = "".join(f"<th>{html.escape(getattr(columns, name))}</th>" for name in shown)
    rows = "".join((f'<tr id="{anchor(a.subject)}">' if anchors else "<tr>")
                   + "".join(f"<td class=\"answer-{name}\">{cells[name](a)}</td>" for name in shown)
                   + "</tr>" for a in answers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def to_html(answers: list[Answer], title: str = "Answers", columns: Columns | None = None) -> str:
    words = legend(a.cause for a in answers)
    body = (table_html(answers, columns) if answers else
            "<p>Nothing answered: the run had no class or configuration to report.</p>")
    return (f"<style>{STYLE}</style><section class=\"exactness-answers\"><h2>{html.escape(title)}</h2>{body}"
            + (f"<p class=\"legend\">{words}</p>" if words else "") + "</section>")


PENDING_HTML = (f"<style>{STYLE}</style><section class=\"exactness-answers exactness-pending\"><h2>Answers</h2>"
                "<p>Not computed yet: they appear here when the run has finished. If this text is still here in a "
                "finished report, the run stopped before its answers (see the failing cell).</p></section>")


def placeholder() -> None:
    """Reserve the answers' place at the top of the notebook; `show` fills it in."""
    from IPython.display import HTML, display

    display(HTML(PENDING_HTML), display_id=DISPLAY_ID)


def show(answers: list[Answer], artifacts=None, columns: Columns | None = None) -> None:
    """Fill in the block `placeholder` reserved, and keep the records (and the headers) in summary.json."""
    from IPython.display import HTML, update_display

    if artifacts is not None:
        artifacts.summary(**{SUMMARY_KEY: [a.to_dict() for a in answers],
                             COLUMNS_KEY: asdict(columns or Columns())})
    update_display(HTML(to_html(answers, columns=columns)), display_id=DISPLAY_ID)


NOT_RUN = "not run"  # a class that did not build or export: a line of its own, never part of a "passed" alone


def not_run(found: list[Answer]) -> list[Answer]:
    return [a for a in found if a.cause == NOT_RUN]


PAIR_SEPARATOR = " · "  # a class under another pair of sides answers as "<class> · <pair>"


def class_lines(found: list[Answer]) -> list[Answer]:
    """The lines that answer for a class itself, not for one under another pair of sides."""
    return [a for a in found if PAIR_SEPARATOR not in a.subject]


def from_summary(summary: Any) -> list[Answer]:
    """The answers a summary.json holds; records that do not parse are skipped, not fatal."""
    records = summary.get(SUMMARY_KEY, []) if isinstance(summary, dict) else []
    parsed = [Answer.from_dict(r) for r in (records if isinstance(records, list) else [])]
    return [a for a in parsed if a is not None]
