import torch

from exactness.compare.per_output import per_output_report


def test_every_output_is_reported_even_after_a_failing_one():
    expected = {"a": torch.tensor(1.0), "b": torch.ones(100), "c": torch.arange(4.0)}
    actual = {"a": torch.tensor(2.0), "b": torch.ones(100), "c": torch.arange(4.0) + torch.tensor([0, 0, 0, 1.0])}
    report = per_output_report(actual, expected).set_index("output")
    assert list(report.index) == ["a", "b", "c"]
    assert report.loc["a", "passes_alone"] == False  # noqa: E712 (a scalar gets no allowance)
    assert report.loc["b", "max_abs_diff"] == 0 and report.loc["b", "max_ulp"] == 0
    assert report.loc["c", "n_mismatched"] == 1 and report.loc["c", "passes_alone"] == False  # noqa: E712 (25%)


def test_ulps_and_relative_error_are_reported():
    expected = {"x": torch.tensor([1.0, 2.0])}
    actual = {"x": torch.nextafter(expected["x"], torch.tensor([9.0, 9.0]))}
    row = per_output_report(actual, expected).iloc[0]
    assert row.max_ulp == 1 and row.n_mismatched == 0 and 0 < row.max_rel_diff < 2e-7
