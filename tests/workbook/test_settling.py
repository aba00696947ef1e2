"""A report shows its class's answer where an earlier run of its batch settles its own line; the index and the
reports apply one rule; a batch runs the settling study first."""

import json
import re
from pathlib import Path

from exactness.workbook import answers, catalog
from exactness.workbook.answers import Answer
from exactness.workbook.manifest import Manifest
from exactness.workbook.project import Project


def _run(outputs, study, run_id, batch="b", status="passed", found=(), subject="class", hour=1):
    folder = outputs / study / run_id
    folder.mkdir(parents=True)
    Manifest(study=study, run_id=run_id, param_set="default", params={}, batch=batch, status=status,
             started=f"2026-12-07T{hour:02d}:00:00+00:00").write(folder)
    (folder / "summary.json").write_text(json.dumps({"answers": [a.to_dict() for a in found],
                                                    "answers_columns": {"subject": subject}}))
    return folder


def _line(subject, cause, seeds):
    return Answer(subject, cause, f"do for {subject} ({cause})", f"rate of {subject} on {seeds}",
                  f"proof of {subject} ({cause})", seeds=seeds)


def test_a_report_shows_the_answer_of_an_earlier_run_of_its_batch_that_settles_its_line(tmp_path):
    outputs = tmp_path / "outputs"
    _run(outputs, "near_tie", "n1", found=[_line("UniSpeech", "near-tie", 40000), _line("Wav", "never flips", 40000),
                                           _line("Conformer", "undecided", 40000)])
    _run(outputs, "near_tie", "n0", batch="other", found=[_line("Bert", "near-tie", 90000)])  # another batch
    _run(outputs, "ulp_noise", "u1", status="failed", found=[_line("Bert", "near-tie", 90000)])  # did not pass
    _run(outputs, "dac_batching", "d1", found=[_line("Bert", "padding", 90000)], subject="the clip")  # no class
    mine = [_line("UniSpeech", "near-tie", 2000), _line("Wav", "undecided", 2000), _line("Conformer", "defect", 8),
            _line("Bert", "undecided", 2000)]
    folder = _run(outputs, "discrete_ops", "o1", status="running", found=mine, hour=2)
    _run(outputs, "ulp_noise", "u2", found=[_line("Bert", "near-tie", 90000)], hour=3)  # ran after: not shown

    beside = answers.settled_in_batch(mine, folder)
    # same cause on more seeds settles; a decided line settles an undecided one; a defect is never settled by an
    # undecided line; nothing from another batch, a failed run or a study that answers for no class
    assert sorted(beside) == ["UniSpeech", "Wav"]
    assert beside["UniSpeech"].answer == _line("UniSpeech", "near-tie", 40000)
    assert beside["UniSpeech"].note == "2,000 seeds; near_tie decides on 40,000"
    assert beside["Wav"].note == "undecided on 2,000 seeds; near_tie decides on 40,000"
    assert beside["UniSpeech"].link == "../../near_tie/n1/report.html#answer-UniSpeech"
    assert 'from <a href="../../near_tie/n1/report.html#answer-UniSpeech">near_tie</a>, 40,000 seeds' == \
        beside["UniSpeech"].source

    page = answers.to_html(answers.by_cause(mine), beside=beside)
    rows = re.findall(r"<tr[^>]*>.*?</tr>", page[page.index("<tbody>"):])
    # by cause: the defect, the undecided line no earlier run settles, then each settled class at its answer's
    # cause: the class's answer anchored (the index links there), this study's line under it, greyed
    assert [re.search(r"rate of (\w+) on (\d+)", r).groups() for r in rows] == [
        ("Conformer", "8"), ("Bert", "2000"), ("UniSpeech", "40000"), ("UniSpeech", "2000"), ("Wav", "40000"),
        ("Wav", "2000")]
    assert rows[2].startswith('<tr id="answer-UniSpeech">') and "proof of UniSpeech (near-tie)" in rows[2]
    assert "40,000 seeds" in rows[2] and rows[3].startswith('<tr class="answer-settled">')
    assert rows[4].startswith('<tr id="answer-Wav">') and "never flips" in rows[4]
    assert "<b>never flips</b>" in page  # the settling line's cause is explained in the legend too


def test_a_settled_line_moves_to_its_answers_cause_and_the_other_pairs_stay_last():
    mine = [_line("A", "defect", 8), _line("Wav", "undecided", 2000), _line("Z", "undecided", 2000),
            _line("B", "near-tie", 9), _line("C", "never flips", 9), _line("C · eager vs tf32", "near-tie", 9)]
    beside = {"Wav": answers.Beside(_line("Wav", "near-tie", 40000), "near_tie", "x", "note")}
    assert [a.subject for a in answers.placed(mine, beside)] == ["A", "Z", "B", "Wav", "C", "C · eager vs tf32"]
    late = {"Wav": answers.Beside(_line("Wav", "nothing reaches", 40000), "near_tie", "x", "note")}
    assert [a.subject for a in answers.placed(mine, late)] == ["A", "Z", "B", "C", "Wav", "C · eager vs tf32"]
    assert answers.placed(mine, {}) == mine


def test_a_report_without_a_readable_manifest_or_settling_sibling_shows_its_own_lines(tmp_path):
    mine = [_line("UniSpeech", "near-tie", 2000)]
    assert answers.settled_in_batch(mine, tmp_path / "outputs" / "scratch" / "discrete_ops") == {}
    outputs = tmp_path / "outputs"
    folder = _run(outputs, "discrete_ops", "o1", status="running", found=mine, hour=2)
    damaged = _run(outputs, "near_tie", "n1", found=[_line("UniSpeech", "near-tie", 40000)])
    (damaged / "summary.json").write_text("{not json")
    assert answers.settled_in_batch(mine, folder) == {}
    assert answers.to_html(mine) == answers.to_html(mine, beside={})


def test_the_index_and_a_report_settle_by_one_rule():
    decided, fewer = _line("M", "near-tie", 40000), _line("M", "near-tie", 2000)
    assert answers.settles(decided, fewer) and not answers.settles(fewer, decided)
    assert not answers.settles(_line("N", "near-tie", 40000), fewer)  # another class settles nothing
    assert not answers.settles(_line("M", "undecided", 9), _line("M", "undecided", 1))
    assert answers.settles(_line("M", "defect", 8), _line("M", "undecided", 40000))
    lines = [answers.Line("b", "", decided), answers.Line("a", "", _line("M", "defect", 8))]
    assert answers.settler(_line("M", "undecided", 10), lines).study == "a"  # the most urgent
    assert answers.settler(_line("M", "undecided", 10), lines[::-1]).study == "a"


def test_a_batch_runs_a_study_before_those_its_answers_settle():
    order = list(catalog.discover(Project.at(Path(__file__).resolve().parents[2])))
    # near_tie's answers (40,000 seeds a class) settle discrete_ops' (2,000): alphabetically it would run after
    assert order.index("near_tie") < order.index("discrete_ops") and order[0] == "environment"
    assert order == ["environment", "dac_batching", "dac_propagation", "near_tie", "discrete_ops", "ulp_noise"]


def test_show_prints_a_settled_line_under_the_answer_that_settles_it_as_the_report_does(tmp_path, capsys):
    from exactness.workbook import cli

    outputs = tmp_path / "outputs"
    _run(outputs, "near_tie", "n1", found=[_line("UniSpeech", "near-tie", 40000), _line("Conformer", "undecided", 9)])
    folder = _run(outputs, "discrete_ops", "o1", found=[_line("Conformer", "defect", 8),
                                                        _line("UniSpeech", "near-tie", 2000)], hour=2)
    assert cli.main(["show", str(folder), "--out", str(outputs)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("  UniSpeech: near-tie; do for UniSpeech") and "on 40000" in lines[2]
    assert lines[2].endswith(" [near_tie's answer]")
    assert "on 2000" in lines[3] and lines[3].endswith(" [this run: 2,000 seeds; near_tie decides on 40,000]")
    # the earlier run's own report is not settled by what ran after it, here as there
    assert lines[1].startswith("  Conformer: defect;") and "[" not in lines[1]
    assert cli.main(["show", str(outputs / "near_tie" / "n1"), "--out", str(outputs)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("  Conformer: undecided;") and "[" not in "".join(lines[1:3])


def test_a_damaged_or_undated_sibling_settles_nothing_and_breaks_no_table(tmp_path):
    outputs = tmp_path / "outputs"
    damaged = _run(outputs, "near_tie", "n1", found=[_line("UniSpeech", "near-tie", 40000)])
    record = json.loads((damaged / "summary.json").read_text())
    record["answers"][0]["proof"] = 7  # a record another run left: a number where a sentence belongs
    (damaged / "summary.json").write_text(json.dumps(record))
    undated = _run(outputs, "ulp_noise", "u1", found=[_line("UniSpeech", "near-tie", 90000)], hour=0)
    manifest = json.loads((undated / "manifest.json").read_text())
    manifest["started"] = ""  # when it ran is unknown: never taken as before
    (undated / "manifest.json").write_text(json.dumps(manifest))
    mine = [_line("UniSpeech", "near-tie", 2000)]
    folder = _run(outputs, "discrete_ops", "o1", status="running", found=mine, hour=2)
    assert answers.Answer.from_dict(record["answers"][0]) is None
    assert answers.settled_in_batch(mine, folder) == {}
    assert "UniSpeech" in answers.to_html(mine, beside=answers.settled_in_batch(mine, folder))
