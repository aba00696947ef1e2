import pytest

from conftest import write_notebook
from exactness.workbook import parameters
from exactness.workbook.parameters import ParameterError


@pytest.fixture
def notebook(tmp_path):
    return write_notebook(
        tmp_path / "study.ipynb",
        "n_seeds = 100  # how many seeds\nthreshold = 1.5e-5\nmodels = ['a', 'b']\nflag = False\n"
        "name = 'x'\nscheduler: str | None = None\nanything = None",
    )


def test_parameters_cell_gives_names_defaults_types_and_help(notebook):
    spec = parameters.read_parameters(notebook)
    assert list(spec) == ["n_seeds", "threshold", "models", "flag", "name", "scheduler", "anything"]
    assert spec["n_seeds"].default == 100 and spec["n_seeds"].types == (int,)
    assert spec["n_seeds"].help == "how many seeds"
    assert spec["scheduler"].types == (str, type(None))
    assert spec["anything"].types == ()


def test_unknown_name_fails_and_lists_the_valid_names(notebook):
    with pytest.raises(ParameterError) as error:
        parameters.resolve(notebook, [], [("n_sedes", "5")])
    message = str(error.value)
    assert "'n_sedes'" in message
    assert "n_seeds, threshold, models, flag, name, scheduler, anything" in message


def test_wrong_type_names_parameter_given_value_and_expected_type(notebook):
    with pytest.raises(ParameterError) as error:
        parameters.resolve(notebook, [], [("n_seeds", "many")])
    assert str(error.value) == "parameter 'n_seeds' (from -p): expected int, got str 'many'"


@pytest.mark.parametrize(("name", "text", "value"), [
    ("threshold", "1", 1),          # an int is a fine float
    ("scheduler", "tcp://h:8786", "tcp://h:8786"),
    ("scheduler", "null", None),
    ("anything", "[1, 2]", [1, 2]),
    ("models", "[c]", ["c"]),
])
def test_accepted_values(notebook, name, text, value):
    assert parameters.resolve(notebook, [], [(name, text)])[name] == value


@pytest.mark.parametrize(("name", "text"), [("n_seeds", "true"), ("flag", "1"), ("models", "a"), ("threshold", "x")])
def test_rejected_values(notebook, name, text):
    with pytest.raises(ParameterError, match=f"parameter '{name}'"):
        parameters.resolve(notebook, [], [(name, text)])


def test_later_files_and_overrides_win(notebook, tmp_path):
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text("n_seeds: 10\nname: first\n")
    second.write_text("n_seeds: 20\n")
    resolved = parameters.resolve(notebook, [first, second], [("name", "cli")])
    assert resolved["n_seeds"] == 20 and resolved["name"] == "cli" and resolved["threshold"] == 1.5e-5


def test_error_names_the_file_a_bad_value_came_from(notebook, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("threshold: small\n")
    with pytest.raises(ParameterError, match=r"parameter 'threshold' \(from .*bad.yaml\)"):
        parameters.resolve(notebook, [bad], [])


def test_a_yaml_file_that_is_not_a_mapping_is_rejected(notebook, tmp_path):
    bad = tmp_path / "list.yaml"
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ParameterError, match="must hold a mapping"):
        parameters.resolve(notebook, [bad], [])


def test_every_problem_is_reported_at_once(notebook):
    with pytest.raises(ParameterError) as error:
        parameters.resolve(notebook, [], [("bogus", "1"), ("flag", "3")])
    assert "'bogus'" in str(error.value) and "parameter 'flag'" in str(error.value)


def test_a_notebook_without_parameters_cell_is_an_error(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    path = tmp_path / "bare.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("x = 1")]), path)
    with pytest.raises(ParameterError, match="no cell tagged 'parameters'"):
        parameters.read_parameters(path)


def test_scientific_notation_is_a_number_in_p_and_in_files(tmp_path):
    from exactness.workbook.parameters import load_yaml, parse_override

    assert parse_override("1e-4") == 1e-4 and parse_override("-2E+3") == -2000.0
    assert parse_override("[1e-4, 2]") == [1e-4, 2] and parse_override("e5") == "e5"
    path = tmp_path / "set.yaml"
    path.write_text("threshold: 1e-4\n")
    assert load_yaml(path) == {"threshold": 1e-4}


def test_a_parameter_file_over_the_size_limit_is_one_line_naming_it_before_it_is_parsed(tiny_project, tmp_path,
                                                                                       monkeypatch, capsys):
    from exactness.workbook import cli

    huge = tmp_path / "huge.yaml"
    huge.write_text("replay_seeds: [" + ", ".join(map(str, range(400_000))) + "]\n")  # 3.1 MB
    parsed = []
    monkeypatch.setattr(parameters, "_load", lambda text: parsed.append(text))
    assert cli.main(["run", "ok", "-f", str(huge)]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"exactness: error: {huge} holds 3.1 MB; a parameter file may hold at most "
                                        "1 MB (for many seeds give seed_start and n_seeds instead of listing them)"]
    assert all(len(text) < 100 for text in parsed)  # the other studies' small sets only
    assert not (tiny_project / "outputs").exists()


def test_a_parameter_file_that_is_not_utf8_is_one_line_naming_the_file_and_the_byte(tiny_project, tmp_path, capsys):
    from exactness.workbook import cli

    latin = tmp_path / "latin1.yaml"
    latin.write_bytes("label: x\nnote: caf\u00e9\n".encode("latin-1"))
    assert cli.main(["run", "ok", "-f", str(latin)]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"exactness: error: {latin} is not UTF-8 text: byte 0xe9 on line 2 "
                                        "(byte 18); save it as UTF-8"]
    assert not (tiny_project / "outputs").exists()


def test_every_shipped_notebook_reads_as_papermill_reads_it():
    """Our reader of the parameters cell stays because papermill's `inspect_notebook` silently drops an assignment
    annotated PEP 604 style (`x: str | None = None`); on the shipped notebooks both must give the same names,
    defaults and help, so that what the workbook validates is what papermill injects."""
    import ast
    from pathlib import Path

    import papermill

    for notebook in sorted((Path(__file__).parents[2] / "notebooks").glob("*.ipynb")):
        ours = parameters.read_parameters(notebook)
        theirs = papermill.inspect_notebook(str(notebook))
        assert list(ours) == list(theirs), notebook.name
        for name, found in theirs.items():
            assert ours[name].default == ast.literal_eval(found["default"]), (notebook.name, name)
            assert ours[name].help == found["help"], (notebook.name, name)


def test_papermill_drops_a_pep_604_annotation_which_is_why_the_reader_is_ours(notebook):
    import papermill

    assert "scheduler" not in papermill.inspect_notebook(str(notebook))
    assert parameters.read_parameters(notebook)["scheduler"].types == (str, type(None))
