import pandas as pd
import pytest

from exactness.workbook import presentation


def test_cells_read_as_people_write_numbers():
    assert [presentation.cell(v) for v in (3, 40000, 0.123456, 1.5e-7, 0.0, True, float("nan"), [1, 2])] == [
        "3", "40,000", "0.123", "1.50e-07", "0", "yes", "–", "1, 2"]


def test_a_table_shows_named_columns_without_index_and_links_the_full_table():
    frame = pd.DataFrame({"model": ["a", "b"], "gap": [1.23456e-6, 2.0], "n": [1, 2000]})
    page = presentation.table_html(frame, {"model": "class", "gap": "gap (abs)"}, full="screen")
    assert "<th class=\"text\">class</th>" in page and "gap (abs)" in page and "2,000" not in page
    assert 'href="tables/screen.csv"' in page and "1.23e-06" in page and "dtype" not in page


def test_long_tables_fold_their_rest_and_wide_ones_are_refused():
    frame = pd.DataFrame({"x": range(30)})
    page = presentation.table_html(frame, max_rows=5)
    assert "<details><summary>25 more rows</summary>" in page
    with pytest.raises(ValueError, match="at most 8 columns"):
        presentation.table_html(pd.DataFrame({str(i): [i] for i in range(9)}))
    with pytest.raises(KeyError, match="not in the table"):
        presentation.table_html(frame, ["y"])


def test_a_figure_without_caption_or_alt_text_is_refused():
    with pytest.raises(ValueError, match="alt text and a caption"):
        presentation.figure_html(b"png", alt="", caption="c")
    page = presentation.figure_html(b"png", alt='a "b"', caption="what and why")
    assert 'alt="a &quot;b&quot;"' in page and "<figcaption" in page


def test_empty_panels_names_axes_without_data_or_a_note_and_ignores_reference_lines():
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt

    fig, (data, reference_only, noted, untitled) = plt.subplots(1, 4)
    data.plot([1, 2], [3, 4])
    data.set_title("data")
    reference_only.axvline(1.0)
    reference_only.set_title("threshold only")
    noted.text(0.5, 0.5, "no flips in these seeds")
    assert presentation.empty_panels(fig) == ["threshold only", "panel 4"]
    plt.close(fig)


def test_a_figure_records_its_empty_panels_for_the_report_tests():
    page = presentation.figure_html(b"png", alt="a", caption="c", empty=["threshold only"])
    assert 'data-empty-panels="threshold only"' in page
