"""`exactness show` prints a run's answer lines before its findings, as its report and the index open."""

import json

from exactness.workbook import cli
from exactness.workbook.answers import Answer
from exactness.workbook.findings import Finding
from exactness.workbook.manifest import Manifest


def test_show_prints_the_answers_then_the_findings(tiny_project, capsys):
    outputs = tiny_project / "outputs"
    folder = outputs / "near_tie" / "r1"
    folder.mkdir(parents=True)
    Manifest(study="near_tie", run_id="r1", param_set="smoke", params={}, batch="b", status="passed",
             started="2026-12-01T00:00:00+00:00", duration_s=1.0).write(folder)
    summary = {"answers": [Answer("HubertModel", "near-tie", "compare tie-aware", "15 (95% 9 to 25)").to_dict()],
               "findings": [Finding(claim="a claim", ours="1", verdict="new").to_dict()]}
    (folder / "summary.json").write_text(json.dumps(summary))
    assert cli.main(["show", str(folder), "--out", str(outputs)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "  HubertModel: near-tie; compare tie-aware; fails 15 (95% 9 to 25)"
    assert lines[2] == "  [new] a claim"


def test_show_prints_control_characters_from_a_run_folder_as_escapes(tiny_project, capsys):
    outputs = tiny_project / "outputs"
    folder = outputs / "ok" / "r1"
    folder.mkdir(parents=True)
    planted = "\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07\u202eevil\r"
    Manifest(study="ok", run_id="r1", param_set="smoke", params={}, batch="b", status="failed", failed_cell=3,
             error=f"ValueError: {planted}", started="2026-12-01T00:00:00+00:00", duration_s=1.0).write(folder)
    (folder / "summary.json").write_text(json.dumps({"note": planted}))
    assert cli.main(["show", str(folder), "--out", str(outputs)]) == 0
    out = capsys.readouterr().out
    assert not [c for c in out if (ord(c) < 32 and c != "\n") or 0x7f <= ord(c) < 0xa0 or c == "\u202e"]
    assert "error in cell [3]: ValueError: \\x1b[2J\\x1b]52;c;cm0gLXJmIH4=\\x07\\u202eevil\\r" in out
    assert "  note: \\x1b[2J" in out
