"""The answer table a report opens with: one line per class or configuration, its cause, what to do, and how
often it fails, each with the proof that names the cause.

A study builds its `Answer`s from its own result; `show` fills the block `placeholder` reserved at the top of
the notebook (so the report opens with the answer although it is computed last) and writes the records to
summary.json under `answers`, where the index and `exactness show` read the same records. Where two studies
judged one class, one line is its answer (`settles`); a report shows, above a line of its own, the answer of an
earlier run of its batch that settles it (`settled_in_batch`).
"""

from __future__ import annotations

import html
import os
import re
import urllib.parse
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from exactness.workbook.manifest import MANIFEST, Manifest, ManifestError, read_json
from exactness.workbook.presentation import inline_markdown
from exactness.workbook.wording import count

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
        texts, lists = ("proof", "where", "flips"), ("compare", "exclude")
        if (any(not isinstance(known.get(k, ""), str) for k in texts)
                or any(not isinstance(known.get(k, []), list) or not all(isinstance(x, str) for x in known.get(k, []))
                       for k in lists)):
            return None  # another run's damaged record: shown nowhere rather than breaking a table
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
.exactness-answers .answer-note { font-weight: normal; color: #555; font-size: 0.85em; }
.exactness-answers tr.answer-settled td, .exactness-answers tr.answer-settled .cause { color: #888; }
.exactness-answers tr.answer-settled .cause { background: #eeeeee; }
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


@dataclass(frozen=True)
class Beside:
    """Another study's answer that settles a line of this table (`settles`), shown above it as the class's answer."""

    answer: Answer
    study: str  # the study whose line it is
    link: str  # its row in that study's report, relative to this report's folder
    note: str  # why this table's line is not the class's answer (`settled_words`)

    @property
    def source(self) -> str:
        seeds = f", {count(self.answer.seeds)} seeds" if self.answer.seeds else ""
        return f'from <a href="{html.escape(self.link, quote=True)}">{html.escape(self.study)}</a>{seeds}'


def table_html(answers: list[Answer], columns: Columns | None = None, anchors: bool = True,
               beside: dict[str, Beside] | None = None) -> str:
    """The answer table alone: one row per answer, the columns every answer leaves empty left out. A line another
    study settles (`beside`) comes under that study's answer, greyed, saying so."""
    columns, beside = columns or Columns(), beside or {}
    cells = {"subject": lambda a: html.escape(a.subject), "cause": lambda a: cause_badge(a.cause),
             "action": lambda a: inline_markdown(a.action), "rate": lambda a: html.escape(a.rate),
             "flips": lambda a: html.escape(a.flips), "proof": lambda a: proof_html(a.proof)}
    every = answers + [b.answer for b in beside.values()]
    shown = [name for name in cells if name in ("subject", "cause") or any(getattr(a, name) for a in every)]
    head = "".join(f"<th>{html.escape(getattr(columns, name))}</th>" for name in shown)

    def row(a: Answer, css: str, note: str, anchored: bool) -> str:
        opening = (f' id="{anchor(a.subject)}"' if anchors and anchored else "") + (f' class="{css}"' if css else "")
        subject_note = f'<div class="answer-note">{note}</div>' if note else ""
        return (f"<tr{opening}>" + "".join(f'<td class="answer-{name}">{cells[name](a)}'
                                           + (subject_note if name == "subject" else "") + "</td>" for name in shown)
                + "</tr>")

    rows = []
    for a in placed(answers, beside):
        other = beside.get(a.subject)
        if other is None:
            rows.append(row(a, "", "", True))
        else:
            rows += [row(other.answer, "", other.source, True),
                     row(a, "answer-settled", html.escape(other.note), False)]
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def to_html(answers: list[Answer], title: str = "Answers", columns: Columns | None = None,
            beside: dict[str, Beside] | None = None) -> str:
    words = legend([a.cause for a in answers] + [b.answer.cause for b in (beside or {}).values()])
    body = (table_html(answers, columns, beside=beside) if answers else
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
    """Fill in the block `placeholder` reserved, and keep the records (and the headers) in summary.json: this study's
    own lines only; a line an earlier run of the batch settles is shown under that run's answer
    (`settled_in_batch`)."""
    from IPython.display import HTML, update_display

    beside = {}
    if artifacts is not None:
        artifacts.summary(**{SUMMARY_KEY: [a.to_dict() for a in answers],
                             COLUMNS_KEY: asdict(columns or Columns())})
        beside = settled_in_batch(answers, artifacts.folder, columns)
    update_display(HTML(to_html(answers, columns=columns, beside=beside)), display_id=DISPLAY_ID)


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


# One answer per class where two studies judged it: the rule (`settles`) that the index and every report apply.
# A batch runs a study whose answers settle another's first (`study_rules.Registration.runs_before`: near_tie's
# 40,000 seeds a class before discrete_ops' 2,000), so the later report shows the class's answer too; a report
# cannot show what runs after it, and the index, written when the batch ends, reads every run.
UNDECIDED = "undecided"


@dataclass(frozen=True)
class Line:
    """A study's answer for one class, and where its report is (relative to outputs/)."""

    study: str
    report: str
    answer: Answer


def class_answers(summary) -> list[Answer]:
    """A model study's lines for one class each (a class under another pair of sides stays in its own report)."""
    if Columns.from_summary(summary).subject != "class":
        return []
    return class_lines(from_summary(summary))


def settles(decided: Answer, other: Answer) -> bool:
    """`decided` is the class's answer over `other`: `other` did not decide, or gives the same cause on fewer seeds
    (the same measurement, made on more). Only counted seeds compare: a line from a run that kept no count (written
    before answers carried one) is settled by nothing but a decided line over its undecided one."""
    if decided.cause in (UNDECIDED, NOT_RUN) or decided is other or decided.subject != other.subject:
        return False
    if other.cause == UNDECIDED:
        return True
    return (decided.cause == other.cause and decided.seeds is not None and other.seeds is not None
            and decided.seeds > other.seeds)


def settler(answer: Answer, lines: list[Line]) -> Line | None:
    """Of the lines that settle `answer`, the most urgent, then the most seeded, then by study: settling is a strict
    order, so the choice never depends on the order the lines come in."""
    found = [line for line in lines if settles(line.answer, answer)]
    if not found:
        return None
    return min(found, key=lambda x: (cause_rank(x.answer.cause), -(x.answer.seeds or 0), x.study))


def settled_words(answer: Answer, by: str, on: int | None) -> str:
    """'2,000 seeds; near_tie decides on 40,000': why a line is not its class's answer."""
    on_words = f" on {count(on)}" if on else ""
    if answer.cause == UNDECIDED:
        return f"undecided{f' on {count(answer.seeds)} seeds' if answer.seeds else ''}; {by} decides{on_words}"
    return f"{f'{count(answer.seeds)} seeds' if answer.seeds else 'no seed counted'}; {by} decides{on_words}"


def earlier_in_batch(folder: Path) -> list[Line]:
    """The class lines of the runs of `folder`'s batch that started before it and passed; none for a folder without
    a readable manifest (an interactive session's scratch folder). A sibling that cannot be read adds nothing: its
    own report says what went wrong."""
    folder = Path(folder).resolve()
    try:
        own = Manifest.read(folder)
    except (ManifestError, OSError, ValueError):
        return []
    started = own.started_at()
    if started.year == 1:  # no readable start (`manifest.instant`): which ran before it is unknown
        return []
    outputs = folder.parent.parent
    found = []
    for path in sorted(outputs.glob(f"*/*/{MANIFEST}")):
        sibling = path.parent.resolve()
        try:
            manifest = Manifest.read(sibling)
            if (sibling == folder or manifest.batch != own.batch or manifest.status != "passed"
                    or manifest.started_at().year == 1 or not manifest.started_at() < started):
                continue
            summary = read_json(sibling / "summary.json")
        except (ManifestError, OSError, ValueError):
            continue
        report = os.path.relpath(sibling / "report.html", outputs)
        found += [Line(manifest.study, report, a) for a in class_answers(summary if isinstance(summary, dict) else {})]
    return found


def placed(found: list[Answer], beside: dict[str, Beside]) -> list[Answer]:
    """`found` with each line another run settles (`beside`) moved among the class lines to where the answer that
    settles it ranks (by cause, then subject): a reader finds the class at its answer's cause, not at the settled
    line's. The other lines keep their order; the lines for another pair of sides stay after the class lines."""
    def key(a: Answer) -> tuple[int, str]:
        return cause_rank((beside[a.subject].answer if a.subject in beside else a).cause), a.subject

    rest = [a for a in found if a.subject not in beside]
    for a in (a for a in found if a.subject in beside):
        at = next((i for i, b in enumerate(rest) if PAIR_SEPARATOR in b.subject or key(b) > key(a)), len(rest))
        rest.insert(at, a)
    return rest


def settled_in_batch(found: list[Answer], folder: Path, columns: Columns | None = None,
                     links_from: Path | None = None) -> dict[str, Beside]:
    """For each of a report's class lines that an earlier run of its batch settles, that run's answer, to show above
    it; none where the report answers for something else than classes (`columns`). `folder` is the report's run
    folder, `links_from` where the answers are shown (the run folder unless said)."""
    if (columns or Columns()).subject != "class":
        return {}
    folder = Path(folder).resolve()
    links_from = Path(links_from).resolve() if links_from is not None else folder
    earlier = earlier_in_batch(folder)
    shown = {}
    for answer in class_lines(found):
        best = settler(answer, earlier)
        if best is None:
            continue
        relative = PurePosixPath(*Path(os.path.relpath(folder.parent.parent / best.report, links_from)).parts)
        link = f"{urllib.parse.quote(str(relative))}#{anchor(answer.subject)}"
        shown[answer.subject] = Beside(best.answer, best.study, link,
                                       settled_words(answer, best.study, best.answer.seeds))
    return shown
