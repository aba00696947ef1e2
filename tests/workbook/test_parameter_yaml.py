"""Parameter values parse as YAML 1.2 core (`-p` values and `-f` files alike): decimal numbers, no octal,
no base 60, no yes/no booleans; duplicate keys and aliases are refused in one line."""

import re

import pytest

from exactness.workbook import parameters
from exactness.workbook.parameters import ParameterError, load_yaml, parse_override


@pytest.mark.parametrize("text, value", [
    ("010", 10), ("012345", 12345), ("-007", -7), ("0", 0), ("+3", 3),
    ("0x1F", 31), ("0o17", 15), ("1.5", 1.5), ("1e-4", 1e-4), (".5", 0.5), ("-.inf", float("-inf")),
    ("[007, 8]", [7, 8]),
])
def test_numbers_with_a_leading_zero_are_decimal_never_octal(text, value):
    assert parse_override(text) == value


@pytest.mark.parametrize("text", ["1:20", "190:20:30", "1_000", "yes", "off", "2026-01-01", "0b101"])
def test_yaml_1_1_forms_are_strings_then_refused_by_the_type_check(text):
    assert parse_override(text) == text


def test_a_base_60_count_is_refused_by_the_type_check(tiny_project):
    notebook = tiny_project / "notebooks" / "ok.ipynb"
    with pytest.raises(ParameterError, match=r"parameter 'n_values' \(from -p\): expected int, got str '1:20'"):
        parameters.resolve(notebook, [], [("n_values", "1:20")])
    assert parameters.resolve(notebook, [], [("n_values", "010")])["n_values"] == 10


def test_duplicate_keys_in_a_parameter_file_are_refused_naming_them(tmp_path):
    path = tmp_path / "set.yaml"
    path.write_text("n_seeds: 10\nthreshold: 1e-4\nn_seeds: 20\nmodels: [a]\nthreshold: 2e-4\n")
    with pytest.raises(ParameterError) as error:
        load_yaml(path)
    message = str(error.value)
    assert message == (f"{path}: duplicate keys 'n_seeds' (lines 1 and 3), 'threshold' (lines 2 and 5); "
                       "each parameter may be given once")
    nested = tmp_path / "nested.yaml"
    nested.write_text("options: {a: 1, a: 2}\n")
    with pytest.raises(ParameterError, match=r"duplicate keys 'a' \(lines 1 and 1\)"):
        load_yaml(nested)


def test_an_alias_bomb_is_refused_in_one_line_before_it_expands(tmp_path):
    levels = ["a: &a [x, x, x, x, x, x, x, x, x]"] + [
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]" for i in range(8)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(levels) + "\n")
    with pytest.raises(ParameterError) as error:
        load_yaml(path)
    message = str(error.value)
    assert "\n" not in message and len(message) < 300
    assert message == (f"{path}: YAML aliases are not accepted in parameters (*a at line 2, column 8); "
                       "write the value out")
    with pytest.raises(ParameterError, match=r"-p models: YAML aliases are not accepted"):
        parameters.parse_override("[&x 1, *x]", "-p models")


def test_invalid_yaml_in_a_file_is_one_line_with_its_position(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("models: [a, b\nn_seeds: 3\n")
    with pytest.raises(ParameterError) as error:
        load_yaml(path)
    assert "\n" not in str(error.value) and str(error.value).startswith(f"{path} is not valid YAML: ")
    assert "line " in str(error.value)


@pytest.mark.parametrize("text, message", [
    ("anything: !!binary Ij4=\n", "holds a bytes value b'\">'"),
    ("anything: !!set {a: null}\n", "holds a set value"),
    ("anything: [{? [1, 2] : x}]\n", "not valid YAML"),
])
def test_values_that_are_not_plain_data_never_reach_the_injected_cell(tmp_path, text, message):
    # papermill writes a value it does not know as `"{value}"`, unescaped: bytes holding a quote end the string
    from conftest import write_notebook

    notebook = write_notebook(tmp_path / "free.ipynb", "anything = None")
    path = tmp_path / "set.yaml"
    path.write_text(text)
    with pytest.raises(ParameterError, match=re.escape(message)):
        parameters.resolve(notebook, [path], [])
