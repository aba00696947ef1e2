import html
import json
import re

from exactness.workbook import index
from exactness.workbook.manifest import Manifest
from exactness.workbook.project import Project


def _fake_run(outputs, study, run_id, started, status="passed", summary=None, error=None):
    folder = outputs / study / run_id
    folder.mkdir(parents=True)
    Manifest(study=study, run_id=run_id, param_set="smoke", params={}, batch="b", status=status,
             started=started, duration_s=1.25, error=error, failed_cell=3 if error else None).write(folder)
    (folder / f"{study}.ipynb").write_text("{}")
    if summary is not None:
        (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def test_index_lists_every_run_newest_first_with_status_and_headlines(tmp_path):
    project = Project.at(tmp_path, tmp_path / "outputs")
    _fake_run(project.outputs, "near_tie", "r1", "2026-11-30T01:00:00", summary={"rate": 0.000371, "n": 40000})
    _fake_run(project.outputs, "environment", "r2", "2026-11-30T02:00:00", status="failed", error="ValueError: x")
    page = index.write(project).read_text()
    runs = page[page.index("<h2>All runs</h2>"):]
    assert runs.index("environment") < runs.index("near_tie")
    assert '<tr class="failed">' in page and "cell 3: ValueError: x" in page
    assert "rate: 0.000371" in page and "n: 40000" in page
    assert 'href="near_tie/r1/report.html"' in page and 'href="near_tie/r1/near_tie.ipynb"' in page
    assert "<script" not in page and "http" not in page  # opens from disk, offline


def test_a_damaged_or_ill_typed_manifest_is_an_unreadable_row_named_with_its_path(tmp_path):
    project = Project.at(tmp_path, tmp_path / "outputs")
    _fake_run(project.outputs, "a", "good", "2026-11-30T01:00:00")
    for name, text in {"broken": "{not json", "null": "null", "list": "[]",
                       "nostart": '{"study": "a", "run_id": "x", "param_set": "p", "params": {}, "batch": "b",'
                                  ' "started": null}'}.items():
        (project.outputs / "a" / name).mkdir()
        (project.outputs / "a" / name / "manifest.json").write_text(text)
    entries = index.collect(project)
    assert {e.manifest.run_id: e.manifest.status for e in entries} == {
        "good": "passed", "broken": "unreadable", "null": "unreadable", "list": "unreadable",
        "nostart": "unreadable"}
    unreadable = next(e for e in entries if e.manifest.run_id == "nostart")
    assert str(project.outputs / "a" / "nostart" / "manifest.json") in unreadable.manifest.error
    assert "started" in unreadable.manifest.error
    assert "unreadable" in index.write(project).read_text()


def test_concurrent_index_writers_do_not_collide(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    project = Project.at(tmp_path, tmp_path / "outputs")
    _fake_run(project.outputs, "a", "good", "2026-11-30T01:00:00")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: index.write(project), range(100)))
    assert not list(project.outputs.glob("*.tmp*"))


def test_headline_values_are_shortened():
    assert index.short(0.123456789) == "0.1235"
    assert index.short({"ours": 1.0, "seed": 2.5}) == "ours 1, seed 2.5"
    assert index.short(list(range(10))) == "0, 1, 2, 3, 4, 5 ..."


def _dead_pid():
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_running_run_whose_process_is_gone_shows_as_died_unless_on_another_host(tmp_path):
    import socket

    project = Project.at(tmp_path, tmp_path / "outputs")
    for run_id, host in (("here", socket.gethostname()), ("there", "another-machine")):
        folder = _fake_run(project.outputs, "a", run_id, "2026-11-30T01:00:00", status="running")
        manifest = Manifest.read(folder)
        manifest.pid, manifest.host = _dead_pid(), host
        manifest.write(folder)
    assert {e.manifest.run_id: e.manifest.status for e in index.collect(project)} == {
        "here": "died", "there": "running"}
    assert Manifest.read(project.outputs / "a" / "here").observed_status() == "died"


def test_each_study_gets_a_card_with_its_newest_passed_runs_findings_and_verdict_words(tmp_path):
    from exactness.workbook.findings import Finding

    project = Project.at(tmp_path, tmp_path / "outputs")
    old = Finding(claim="old claim", ours="1", verdict="new").to_dict()
    new = Finding(claim="rate 1 in 2,000", ours="1", verdict="differs", source="1 in 2,667 (transformers "
                                                                               "#50575, section 5)",
                  why="unexplained").to_dict()
    _fake_run(project.outputs, "near_tie", "r1", "2026-11-30T01:00:00", summary={"findings": [old]})
    _fake_run(project.outputs, "near_tie", "r2", "2026-11-30T02:00:00", summary={"findings": [new]})
    _fake_run(project.outputs, "near_tie", "r3", "2026-11-30T03:00:00", status="failed", error="ValueError: x")
    page = index.write(project).read_text()
    cards = page[:page.index("<h2>All runs</h2>")]
    assert cards.count('class="card"') == 1 and "rate 1 in 2,000" in cards and "old claim" not in cards
    assert "verdict-differs" in cards and 'href="near_tie/r2/report.html"' in cards
    runs = page[page.index("<h2>All runs</h2>"):]
    assert "rate 1 in 2,000" not in runs and runs.count("<tr class=") == 3  # one line per run, no finding again


def _answer(subject, cause, rate="1 in 2,700", seeds=None):
    from exactness.workbook.answers import Answer

    return Answer(subject, cause, f"what to do for {subject}", rate, f"proof for {subject}", seeds=seeds).to_dict()


def test_a_card_opens_with_the_answer_table_its_findings_folded_and_the_words_explained_once(tmp_path):
    from exactness.workbook.answers import MEANINGS
    from exactness.workbook.findings import Finding

    project = Project.at(tmp_path, tmp_path / "outputs")
    finding = Finding(claim="a long finding", ours="1", verdict="new").to_dict()
    _fake_run(project.outputs, "near_tie", "r1", "2026-11-30T01:00:00",
              summary={"answers": [_answer("Wav2Vec2ForPreTraining", "near-tie"), _answer("HubertModel", "near-tie")],
                       "answers_columns": {"subject": "class", "rate": "export test fails"}, "findings": [finding]})
    _fake_run(project.outputs, "dac_batching", "r2", "2026-11-30T02:00:00",
              summary={"answers": [_answer("alone against padded", "padding", "last 12 frames")],
                       "answers_columns": {"subject": "the shorter clip: compared", "rate": "what changes"}})
    page = index.write(project).read_text()
    cards = page[page.index("<h2>Studies</h2>"):page.index("<h2>All runs</h2>")]
    near_tie = cards[cards.index(">near_tie<"):]
    # a model study's classes are in the table of every class: its card counts them, never repeats them
    assert "Wav2Vec2ForPreTraining" not in near_tie and "2 classes in" in near_tie
    assert near_tie.index('href="#classes"') < near_tie.index("<details>") < near_tie.index("a long finding")
    assert "<summary>1 finding</summary>" in near_tie
    assert "the shorter clip: compared" in cards and "last 12 frames" in cards
    for word in ("near-tie", "padding"):  # each cause word used, explained once on the page
        assert page.count(html.escape(MEANINGS[word])) == 1
    for verdict, meaning in index.VERDICT_MEANINGS.items():
        assert page.count(html.escape(meaning)) == 1, verdict
    assert cards.index(">dac_batching<") < cards.index(">near_tie<")  # by study, not by run time


def test_a_card_of_a_summary_without_answers_shows_its_claims_one_line_each(tmp_path):
    from exactness.workbook.findings import Finding

    project = Project.at(tmp_path, tmp_path / "outputs")
    found = [Finding(claim=f"claim {n}", ours="1", verdict="new").to_dict() for n in range(3)]
    _fake_run(project.outputs, "old_study", "r1", "2026-11-30T01:00:00", summary={"findings": found})
    page = index.write(project).read_text()
    card = page[page.index('<div class="card">'):page.index("<h2>All runs</h2>")]
    assert card.count("<li>") == 3 and "<details>" not in card and "<table" not in card


def test_a_summary_that_is_not_a_json_object_is_unreadable_and_breaks_nothing(tmp_path):
    project = Project.at(tmp_path, tmp_path / "outputs")
    for number, text in enumerate(["null", "[]", '"text"', "{truncated", "\xff\xfe"]):
        folder = _fake_run(project.outputs, "a", f"r{number}", f"2026-11-30T0{number}:00:00")
        (folder / "summary.json").write_text(text)
    entries = index.collect(project)
    assert [e.summary for e in entries] == [index.UNREADABLE_SUMMARY] * 5
    assert "summary.json: unreadable" in index.write(project).read_text()


def test_a_json_nested_deeper_than_the_parser_follows_is_unreadable_and_breaks_nothing(tmp_path):
    project = Project.at(tmp_path, tmp_path / "outputs")
    deep = "[" * 100_000 + "]" * 100_000  # beyond the parser
    shallower = '{"x": ' + "[" * 500 + "]" * 500 + "}"  # parses, yet would overflow whatever walks it
    good = _fake_run(project.outputs, "a", "good", "2026-11-30T01:00:00", summary={"n": 3})
    damaged_summary = _fake_run(project.outputs, "a", "deep_summary", "2026-11-30T02:00:00")
    (damaged_summary / "summary.json").write_text(deep)
    damaged_manifest = project.outputs / "a" / "deep_manifest"
    damaged_manifest.mkdir()
    (damaged_manifest / "manifest.json").write_text(deep)
    walked_summary = _fake_run(project.outputs, "a", "walked_summary", "2026-11-30T03:00:00")
    (walked_summary / "summary.json").write_text(shallower)
    entries = {e.manifest.run_id: e for e in index.collect(project)}
    assert entries["good"].summary == {"n": 3} and entries["good"].manifest.status == "passed"
    assert entries["deep_summary"].summary == entries["walked_summary"].summary == index.UNREADABLE_SUMMARY
    assert entries["deep_manifest"].manifest.status == "unreadable"
    assert "nested deeper" in entries["deep_manifest"].manifest.error
    assert str(good.relative_to(project.outputs)) in index.write(project).read_text()


def test_an_environment_run_that_is_not_a_folder_under_outputs_is_never_a_link(tmp_path):
    project = Project.at(tmp_path, tmp_path / "outputs")
    planted = ["javascript:alert(document.cookie)", "JavaScript:alert(1)//x", "http://example.com/x",
               "/etc", "../elsewhere", "environment/../../x", "data:text/html,<script>alert(1)</script>"]
    for number, value in enumerate(planted):  # a study each: every one is its study's card
        folder = _fake_run(project.outputs, f"s{number}", "r", f"2026-11-30T0{number}:00:00")
        manifest = Manifest.read(folder)
        manifest.environment_run = value
        manifest.write(folder)
    _fake_run(project.outputs, "b", "fine", "2026-11-30T09:00:00")
    fine = Manifest.read(project.outputs / "b" / "fine")
    fine.environment_run = "environment/20261130-090000-smoke-abcd"
    fine.write(project.outputs / "b" / "fine")
    page = index.write(project).read_text()
    hrefs = [h.lower() for h in re.findall(r'href="([^"]*)"', html.unescape(page))]
    assert not [h for h in hrefs if ":" in h or h.startswith(("/", "..")) or "/../" in h], hrefs
    assert 'href="environment/20261130-090000-smoke-abcd/report.html"' in page


def test_the_index_opens_with_every_class_sorted_by_cause_defects_first_each_linked_to_its_answer(tmp_path):
    project = Project.at(tmp_path, tmp_path / "outputs")
    _fake_run(project.outputs, "discrete_ops", "r1", "2026-11-30T01:00:00",
              summary={"answers": [_answer("BertModel", "nothing reaches"), _answer("UniSpeech", "near-tie"),
                                   _answer("Tapas", "defect"), _answer("Tapas · eager CPU fp32 vs TF32", "defect")],
                       "answers_columns": {"subject": "class"}})
    _fake_run(project.outputs, "near_tie", "r2", "2026-11-30T02:00:00",
              summary={"answers": [_answer("UniSpeech", "undecided"), _answer("Conformer", "never flips")],
                       "answers_columns": {"subject": "class"}})
    _fake_run(project.outputs, "dac_batching", "r3", "2026-11-30T03:00:00",
              summary={"answers": [_answer("alone against padded", "padding")],
                       "answers_columns": {"subject": "the shorter clip: compared"}})
    page = index.write(project).read_text()
    table = page[page.index('<table class="classes">'):page.index("</table>", page.index('<table class="classes">'))]
    assert page.index('<table class="classes">') < page.index('class="card"')  # answers before the studies' cards
    order = re.findall(r'#answer-([\w-]+)"', table)
    # defects first; a class of two studies together; the other sides stay in the report
    assert order == ["Tapas", "UniSpeech", "UniSpeech", "Conformer", "BertModel"], order
    assert 'href="near_tie/r2/report.html#answer-UniSpeech"' in table
    # one answer per class: near_tie could not decide UniSpeech, discrete_ops did; the decided line comes first and
    # ranks the class, the undecided one is said to be settled by it
    lines = index.class_lines(index.collect(project), project.outputs)
    unispeech = [(x.study, x.answer.cause, x.settled_by) for x in lines if x.answer.subject == "UniSpeech"]
    assert unispeech == [("discrete_ops", "near-tie", ""), ("near_tie", "undecided", "discrete_ops")]
    assert "(undecided; discrete_ops decides)" in table
    assert "alone against padded" not in table and "1 with a defect" in page
    assert index.render(project) == index.render(project)  # a stable order


def test_one_cause_from_two_studies_is_answered_by_the_line_on_more_seeds_and_a_defect_is_never_settled(tmp_path):
    project = Project.at(tmp_path, tmp_path / "outputs")
    _fake_run(project.outputs, "discrete_ops", "r1", "2026-11-30T01:00:00",
              summary={"answers": [_answer("UniSpeech", "near-tie", seeds=2000), _answer("Tapas", "defect", seeds=8),
                                   _answer("Sat", "nothing reaches", seeds=8), _answer("Bert", "never flips", seeds=9),
                                   _answer("Old", "near-tie", seeds=2000), _answer("Clap", "not run", seeds=0),
                                   _answer("Wav", "undecided", seeds=2000)],
                       "answers_columns": {"subject": "class"}})
    _fake_run(project.outputs, "near_tie", "r2", "2026-11-30T02:00:00",
              summary={"answers": [_answer("UniSpeech", "near-tie", seeds=40000),
                                   _answer("Tapas", "near-tie", seeds=40000),
                                   _answer("Sat", "nothing reaches", seeds=0),
                                   {**_answer("Bert", "never flips"), "seeds": "9000"},
                                   _answer("Old", "near-tie"),  # a run written before answers kept their seeds
                                   _answer("Clap", "undecided", seeds=40000), _answer("Wav", "near-tie", seeds=40000)],
                       "answers_columns": {"subject": "class"}})
    lines = index.class_lines(index.collect(project), project.outputs)
    got = {(x.answer.subject, x.study): x.settled_by for x in lines}
    assert got == {("UniSpeech", "near_tie"): "", ("UniSpeech", "discrete_ops"): "near_tie",
                   ("Tapas", "discrete_ops"): "", ("Tapas", "near_tie"): "",  # two causes: both stand
                   ("Sat", "discrete_ops"): "", ("Sat", "near_tie"): "discrete_ops",
                   ("Bert", "discrete_ops"): "", ("Bert", "near_tie"): "",  # a damaged count is no count
                   ("Old", "discrete_ops"): "", ("Old", "near_tie"): "",  # nor is a missing one
                   ("Clap", "discrete_ops"): "", ("Clap", "near_tie"): "",  # a class that did not run decides nothing
                   ("Wav", "near_tie"): "", ("Wav", "discrete_ops"): "near_tie"}
    assert [(x.answer.subject, x.study) for x in lines][:2] == [("Tapas", "discrete_ops"), ("Tapas", "near_tie")]
    assert [x.study for x in lines if x.answer.subject == "UniSpeech"] == ["near_tie", "discrete_ops"]
    page = index.write(project).read_text()
    assert "(2,000 seeds; near_tie decides on 40,000)" in page
    assert "(no seed counted; discrete_ops decides on 8)" in page
    assert "(undecided on 2,000 seeds; near_tie decides on 40,000)" in page


def test_which_line_settles_another_does_not_depend_on_the_order_of_the_studies(tmp_path):
    import itertools

    lines = {"a": _answer("M", "defect", seeds=8), "b": _answer("M", "near-tie", seeds=2000),
             "c": _answer("M", "near-tie", seeds=40000), "d": _answer("M", "undecided", seeds=100)}
    seen = set()
    for number, order in enumerate(itertools.permutations(lines)):
        project = Project.at(tmp_path / str(number), tmp_path / str(number) / "outputs")
        for hour, study in enumerate(order):
            _fake_run(project.outputs, study, "r", f"2026-11-30T0{hour}:00:00",
                      summary={"answers": [lines[study]], "answers_columns": {"subject": "class"}})
        found = index.class_lines(index.collect(project), project.outputs)
        seen.add(tuple((x.study, x.settled_by) for x in found))
    # the defect ranks the class; the near-tie on 40,000 settles the one on 2,000; the undecided defers to the defect
    assert seen == {(("a", ""), ("c", ""), ("d", "a"), ("b", "c"))}, seen


def test_answers_sort_by_cause_defects_first_then_by_name():
    from exactness.workbook.answers import Answer, by_cause

    found = [Answer(name, cause, "a", "r") for name, cause in
             [("B", "nothing reaches"), ("A", "exact tie"), ("Z", "defect"), ("C", "exact tie")]]
    assert [a.subject for a in by_cause(found)] == ["Z", "A", "C", "B"]
