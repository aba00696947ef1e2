import pandas as pd
import pytest

from exactness.workbook import presentation


def test_cells_read_as_people_write_numbers():
    assert [presentation.cell(v) for v in (3, 40000, 0.123456, 1.5e-7, 0.0, True, float("nan"), [1, 2])] == [
        "3", "40,000", "0.123", "1.50e-07", "0", "yes", "", "1, 2"]


def test_a_missing_value_of_any_kind_is_an_empty_cell_never_a_marker():
    frame = pd.DataFrame({"model": ["a", "b", None], "changed": pd.array([3, pd.NA, 1], dtype="Int64"),
                          "when": pd.to_datetime(["2026-01-01", None, "2026-01-02"]), "x": [1.0, float("nan"), 2.0]})
    page = presentation.table_html(frame)
    cells = [c.split(">", 1)[1] for c in page.split("<td")[1:]]
    assert not any(marker in page for marker in ("&lt;NA&gt;", "<NA>", "NaT", ">nan<", ">None<"))
    assert sum(c.startswith("</td>") for c in cells) == 4  # one empty cell per missing value
    facts = presentation.facts_table({"threads": None, "cores": 2})
    assert list(facts.value) == ["", "2"]


def test_a_seed_is_printed_as_its_name_a_count_of_seeds_with_separators():
    frame = pd.DataFrame({"seed": [1371433937], "seeds": [40000], "example_seed": [1234567.0]})
    page = presentation.table_html(frame, {"seed": "seed", "seeds": "seeds screened", "example_seed": "its seed"})
    assert ">1371433937<" in page and ">40,000<" in page and ">1234567<" in page
    assert presentation.cell(1371433937, plain=True) == "1371433937"


def test_counts_in_captions_take_the_singular_for_one():
    one = presentation.table_html(pd.DataFrame({"x": [1]}), full="t")
    assert "(1 row, 1 column)" in one
    folded = presentation.table_html(pd.DataFrame({"x": range(13)}), max_rows=12)
    assert "<summary>1 more row</summary>" in folded
    assert presentation.plural(2, "class", "classes") == "2 classes"


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


def test_quoted_markdown_is_rendered_in_the_columns_named_and_escaped_everywhere():
    frame = pd.DataFrame({"class": ["A"], "skip_reason": ["the `topk` over *tied* scores, 2 * 3 <b>"]})
    page = presentation.table_html(frame, markdown=["skip_reason"])
    assert "<code>topk</code> over <em>tied</em> scores, 2 * 3 &lt;b&gt;" in page and "`" not in page
    plain = presentation.table_html(frame)
    assert "`topk`" in plain  # only where asked: a column of names is never read as Markdown


def test_a_folded_class_table_shows_every_class_before_the_fold():
    frame = pd.DataFrame({"model": ["A"] * 20 + ["B"] * 2, "seed": range(22)})
    html_text = presentation.table_html(frame, {"model": "class", "seed": "seed"}, max_rows=12)
    shown, folded = html_text.split("<details>")
    assert ">B<" in shown and shown.count("<tr>") == 1 + 12  # the header, then 12 rows: A's first ten and B's two
    assert "10 more rows" in folded and ">B<" not in folded
    plain = presentation.table_html(frame.rename(columns={"model": "name"}), max_rows=12)
    assert ">B<" not in plain.split("<details>")[0]  # without a class column, the first rows as they come


def test_a_long_proof_shows_its_first_sentence_and_folds_the_rest():
    from exactness.workbook.answers import PROOF_SHOWN, proof_html

    first = "Seed 1: the output errs 0.0014 from float64 against eager's 1.2e-07 (e.g. 1.1e+04 times eager's)."
    rest = " Starts at embedder.pad: " + "the graph's basic optimizations make it; " * 8 + "bisected."
    assert len(first + rest) > PROOF_SHOWN
    folded = proof_html(first + rest)
    assert folded.startswith("<details><summary>Seed 1: the output errs 0.0014") and folded.endswith("</details>")
    summary = folded.split("</summary>")[0]
    assert "1.2e-07 (e.g. 1.1e+04 times eager&#x27;s).</summary" in summary + "</summary"  # not split at 1.2 or e.g.
    assert proof_html(first) == first.replace("'", "&#x27;")  # short: whole, no fold


@pytest.mark.parametrize("text, first", [
    ("Seed 1 flipped. Then more.", "Seed 1 flipped."),
    ("It reads 1.2e-07. Starts at x.", "It reads 1.2e-07."),  # a sentence may end in a number
    ("As `a. B` says, e.g. ORT fuses (at TopK. ArgMax) \"Flaky. The\" here. Next.",
     "As `a. B` says, e.g. ORT fuses (at TopK. ArgMax) \"Flaky. The\" here."),  # code, abbreviation, brackets, quote
    ("one sentence only; Then no period", None),
])
def test_a_proof_ends_its_first_sentence_outside_code_quotes_brackets_and_abbreviations(text, first):
    from exactness.workbook.answers import first_sentence_end

    end = first_sentence_end(text)
    assert (text[:end] if end is not None else None) == first
