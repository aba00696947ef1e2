import torch

from exactness.compare.one_tensor import tensor_difference
from exactness.compare.ulp import ulp_distance


def test_a_scalar_gets_no_allowance_and_a_quarter_wrong_fails_alone():
    assert tensor_difference(torch.tensor(2.0), torch.tensor(1.0))["passes_alone"] is False
    same = tensor_difference(torch.ones(100), torch.ones(100))
    assert same["max_abs_diff"] == 0 and same["max_ulp"] == 0 and same["passes_alone"]
    quarter = tensor_difference(torch.arange(4.0) + torch.tensor([0, 0, 0, 1.0]), torch.arange(4.0))
    assert quarter["n_mismatched"] == 1 and quarter["passes_alone"] is False


def test_ulps_and_relative_error_are_reported():
    expected = torch.tensor([1.0, 2.0])
    row = tensor_difference(torch.nextafter(expected, torch.tensor([9.0, 9.0])), expected)
    assert row["max_ulp"] == 1 and row["n_mismatched"] == 0 and 0 < row["max_rel_diff"] < 2e-7


def test_a_float32_comparison_counts_what_torch_counts():
    generator = torch.Generator().manual_seed(1)
    expected = torch.randn(300, 7, generator=generator)
    actual = expected + torch.randn(300, 7, generator=generator) * 1e-3
    row = tensor_difference(actual, expected)
    diff = (actual.double() - expected.double()).abs()
    assert row["max_abs_diff"] == float(diff.max())
    assert row["n_mismatched"] == int((diff > 1e-3 + 1e-3 * expected.double().abs()).sum()) > 0
    assert row["max_ulp"] == int(ulp_distance(actual, expected).max())


def test_a_nan_is_never_close_and_an_equal_infinity_is_as_torch_counts():
    expected = torch.tensor([1.0, float("inf"), float("nan"), 2.0, float("-inf")])
    actual = torch.tensor([1.0, float("inf"), float("nan"), float("nan"), 5.0])
    row = tensor_difference(actual, expected)
    not_close = int((~torch.isclose(actual, expected, rtol=1e-3, atol=1e-3, equal_nan=False)).sum())
    assert row["n_mismatched"] == not_close == 3
