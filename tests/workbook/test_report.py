import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output

from exactness.workbook import report
from exactness.workbook.manifest import Manifest


def _executed(tmp_path):
    cell = new_code_cell("secret_code_marker = 1\nprint('visible output')")
    cell.outputs = [new_output("stream", name="stdout", text="visible output\n"),
                    new_output("stream", name="stderr", text="progress 50%\n")]
    path = tmp_path / "study.ipynb"
    nbformat.write(new_notebook(cells=[cell]), path)
    return path


def _manifest(status="passed", error=None):
    return Manifest(study="study", run_id="r1", param_set="smoke", params={}, batch="b", status=status,
                    error=error, failed_cell=2 if error else None)


def test_report_hides_code_and_stderr_and_needs_no_network(tmp_path):
    page = report.export(_executed(tmp_path), tmp_path / "r.html", _manifest(), {"notebook": "study.ipynb"}).read_text()
    assert "visible output" in page
    assert "secret_code_marker" not in page
    assert "progress 50%" not in page
    assert 'src="http' not in page and "src='http" not in page
    assert '<a href="study.ipynb">notebook</a>' in page


def test_with_code_keeps_the_code(tmp_path):
    page = report.export(_executed(tmp_path), tmp_path / "r.html", _manifest(), {}, with_code=True).read_text()
    assert "secret_code_marker" in page


def test_banner_shows_status_and_error_of_a_failed_run(tmp_path):
    page = report.export(_executed(tmp_path), tmp_path / "r.html", _manifest("failed", "ValueError: <bad>"),
                         {}).read_text()
    assert "status <b>failed</b>" in page and "ValueError: &lt;bad&gt;" in page


def test_the_banner_names_the_machine_the_run_ran_on():
    from exactness.workbook.manifest import Manifest
    from exactness.workbook.report import banner

    manifest = Manifest(study="s", run_id="r", param_set="smoke", params={}, batch="b",
                        machine={"cpu_model": "AMD EPYC 9B14", "usable_cpus": 2})
    assert "ran on AMD EPYC 9B14 (2 cores)" in banner(manifest, {})
