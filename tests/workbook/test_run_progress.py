import io

from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from exactness.workbook.run_progress import RunProgress, heading, sections


def test_heading_is_the_last_heading_of_a_markdown_cell_without_markup():
    assert heading("# Study\nsome text\n## Screen: how close is `argmax`? ##") == "Screen: how close is argmax?"
    assert heading("plain text, no heading") is None


def test_a_section_starts_at_the_first_code_cell_under_each_new_heading():
    cells = [new_markdown_cell("# Title"), new_code_cell("a = 1"), new_code_cell("b = 2"),
             new_markdown_cell("no heading here"), new_code_cell("c = 3"),
             new_markdown_cell("## Screen"), new_code_cell("d = 4"), new_markdown_cell("## Empty section"),
             new_markdown_cell("## Check"), new_code_cell("e = 5")]
    assert sections(cells) == {1: ("Title", 1), 6: ("Screen", 4), 9: ("Check", 5)}


def _progress_on(cells):
    out = io.StringIO()
    progress = RunProgress(stream=out, indent="")
    notebook = new_notebook(cells=cells)
    progress.on_notebook_start(notebook=notebook)
    return progress, notebook, out


def test_each_section_is_announced_once_with_its_cell_number_of_all_code_cells():
    progress, notebook, out = _progress_on([new_markdown_cell("# Screen"), new_code_cell("x"), new_code_cell("y")])
    for index, cell in enumerate(notebook.cells):
        progress.on_cell_start(cell=cell, cell_index=index)
    assert out.getvalue() == "Screen (cell 1 of 2)\n"


def test_only_whole_sweep_progress_lines_of_the_cells_stderr_reach_the_terminal():
    progress, _, out = _progress_on([])
    progress.write("FutureWarning: something noisy\nscreen Wav2Vec2ForPreTraining: 250/2,")
    assert out.getvalue() == ""  # the progress line is not finished yet
    progress.write("000 seeds (23 seeds/s, 75 s left)\nexports: 1/2 classes (one every 40 s, 40 s left)\n")
    assert out.getvalue().splitlines() == ["  screen Wav2Vec2ForPreTraining: 250/2,000 seeds (23 seeds/s, 75 s left)",
                                           "  exports: 1/2 classes (one every 40 s, 40 s left)"]
