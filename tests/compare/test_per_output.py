import numpy as np
import pytest
import torch

from exactness.compare.per_output import linear_quantiles, per_output_report, tensor_difference
from exactness.compare.ulp import ulp_distance


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


@pytest.mark.parametrize("shape", [(1,), (2,), (5,), (101,), (4000,), (999, 3)])
def test_quantiles_are_numpys_to_the_last_bit(shape):
    generator = np.random.default_rng(sum(shape))
    for values in (generator.integers(0, 40, shape), generator.integers(0, 5, shape) ** 9,
                   generator.geometric(0.3, shape), np.full(shape, 3), generator.random(shape)):
        qs = (0.5, 0.99, 0.0, 1.0, 0.25, 0.3333)
        assert linear_quantiles(values, qs) == np.quantile(values, qs).tolist()
        assert linear_quantiles(values, qs, cap=8) == np.quantile(values, qs).tolist()  # ranks above the cap


def test_a_float32_comparison_counts_what_torch_counts():
    generator = torch.Generator().manual_seed(1)
    expected = torch.randn(300, 7, generator=generator)
    actual = expected + torch.randn(300, 7, generator=generator) * 1e-3
    row = tensor_difference(actual, expected)
    diff = (actual.double() - expected.double()).abs()
    assert row["max_abs_diff"] == float(diff.max())
    assert row["n_mismatched"] == int((diff > 1e-3 + 1e-3 * expected.double().abs()).sum()) > 0
    assert row["max_ulp"] == int(ulp_distance(actual, expected).max())
