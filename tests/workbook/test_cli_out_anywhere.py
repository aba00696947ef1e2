"""`--out` before or after the command: the same outputs folder either way."""

import pytest

from exactness.workbook import cli


@pytest.mark.parametrize("argv", [["--out", "/x", "run", "near_tie", "-f", "smoke"],
                                  ["run", "near_tie", "--out", "/x", "-f", "smoke"],
                                  ["run", "near_tie", "-f", "smoke", "--out", "/x"]])
def test_out_is_read_before_or_after_the_study_name(argv):
    rest, pairs = cli.split_params([*argv, "-p", "n_seeds", "-3"])
    args = cli._parser().parse_args(rest)
    assert args.out == "/x" and args.study == "near_tie" and args.file == ["smoke"]
    assert pairs == [["n_seeds", "-3"]]


def test_out_after_index_and_show_and_its_absence():
    assert cli._parser().parse_args(["index", "--out", "/y"]).out == "/y"
    assert cli._parser().parse_args(["show", "near_tie", "--out", "/y"]).out == "/y"
    assert cli._parser().parse_args(["run", "near_tie"]).out is None


@pytest.mark.slow
def test_a_run_with_out_after_the_study_writes_there(tiny_project, tmp_path):
    outputs = tmp_path / "elsewhere"
    assert cli.main(["run", "ok", "--out", str(outputs), "-f", "smoke"]) == 0
    assert (outputs / "index.html").exists() and len(list((outputs / "ok").iterdir())) == 1
