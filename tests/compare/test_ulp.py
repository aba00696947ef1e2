import re

import numpy as np
import pytest
import torch

from exactness.compare.ulp import check_ulp_close, ulp, ulp_distance

FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", FLOATS)
def test_neighbours_are_one_ulp_apart_and_zeros_are_zero_apart(dtype):
    x = torch.tensor([1.0, -1.0, 3.5, 1e-3], dtype=dtype)
    up = torch.nextafter(x, torch.full_like(x, float("inf")))
    assert ulp_distance(x, up).tolist() == [1, 1, 1, 1]
    assert ulp_distance(torch.tensor([0.0], dtype=dtype), torch.tensor([-0.0], dtype=dtype)).item() == 0


@pytest.mark.parametrize("dtype", FLOATS)
def test_distance_across_zero_counts_both_sides(dtype):
    tiny = torch.nextafter(torch.tensor(0.0, dtype=dtype), torch.tensor(1.0, dtype=dtype))  # smallest subnormal
    assert ulp_distance(tiny, -tiny).item() == 2
    assert ulp_distance(tiny * 3, tiny).item() == 2  # subnormals are evenly spaced


def test_float32_counts_match_the_bit_patterns_exactly():
    a = torch.tensor([1.0, 1e30, -2.0], dtype=torch.float32)
    b = torch.tensor([2.0, 1e31, -4.0], dtype=torch.float32)
    expected = [abs(int(np.float32(y).view(np.int32)) - int(np.float32(x).view(np.int32))) for x, y in
                zip(a.tolist(), b.tolist(), strict=True)]
    assert ulp_distance(a, b).tolist() == expected


def test_largest_finite_values_and_infinities():
    big = torch.tensor([torch.finfo(torch.float32).max])
    assert ulp_distance(big, torch.tensor([float("inf")])).item() == -1  # infinity is never counted
    assert ulp_distance(torch.tensor([float("inf")]), torch.tensor([float("inf")])).item() == 0
    assert ulp_distance(torch.tensor([float("-inf")]), torch.tensor([float("inf")])).item() == -1
    assert ulp_distance(-big, big).item() == 2 * int(np.float32(big.item()).view(np.int32))


def test_nan_is_reported_not_counted():
    nan = torch.tensor([float("nan")])
    assert ulp_distance(nan, torch.tensor([1.0])).item() == -1
    assert ulp_distance(nan, nan).item() == 0


def test_float64_extremes_saturate_instead_of_overflowing():
    big = torch.tensor([torch.finfo(torch.float64).max], dtype=torch.float64)
    assert ulp_distance(-big, big).item() > 2**62


@pytest.mark.parametrize("dtype,np_dtype", [(torch.float32, np.float32), (torch.float64, np.float64)])
def test_ulp_agrees_with_numpy_spacing(dtype, np_dtype):
    values = [1e-30, 1e-3, 0.1, 1.0, 10.0, 12345.678, 3e30]
    assert ulp(torch.tensor(values, dtype=dtype)).tolist() == [float(np.spacing(np_dtype(v))) for v in values]


def test_mixed_dtypes_are_refused():
    with pytest.raises(TypeError, match="one float dtype"):
        ulp_distance(torch.tensor([1.0]), torch.tensor([1.0], dtype=torch.float64))


def test_check_says_which_elements_failed_where_and_by_how_much():
    expected = torch.tensor([[1.0, 2.0], [3.0, 0.0]])
    actual = expected.clone()
    actual[1, 0] = torch.nextafter(torch.nextafter(actual[1, 0], torch.tensor(9.0)), torch.tensor(9.0)).item() + 1e-5
    actual[1, 1] = 1e-9  # near zero: many ulps, but inside the absolute floor
    result = check_ulp_close(actual, expected, max_ulp=4, atol=1e-6, name="logits")
    assert not result and result.n_failed == 1
    assert "logits: 1 of 4 elements" in result.message and "at [1, 0]" in result.message
    assert check_ulp_close(expected, expected, max_ulp=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_the_numpy_path_counts_exactly_what_the_torch_path_counts(dtype):
    from exactness.compare.ulp import _distance_torch

    generator = torch.Generator().manual_seed(0)
    info = torch.finfo(dtype)
    a = (torch.randn(4000, generator=generator, dtype=torch.float64) * 10.0).to(dtype)
    nearby = a + torch.randn(4000, generator=generator).to(dtype)
    b = torch.where(torch.rand(4000, generator=generator) < 0.5, -a, nearby)
    specials = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), info.max, -info.max, info.tiny],
                            dtype=dtype)
    a = torch.cat([a, specials, specials, specials.flip(0)])
    b = torch.cat([b, specials, specials.roll(1), specials])
    fast = ulp_distance(a, b)
    assert fast.dtype == torch.int64 and (fast == -1).any() and (fast > 1000).any()
    assert torch.equal(fast, _distance_torch(a, b))
    assert torch.equal(ulp_distance(a[0], b[0]), _distance_torch(a[0], b[0]))  # 0-d stays 0-d


@pytest.mark.parametrize("actual_shape,expected_shape", [
    ((3,), (2, 3)),     # broadcasts: was an IndexError when an element failed, "all 3 elements" when none did
    ((3, 1), (1, 3)),   # broadcasts both ways: 9 pairs compared, reported as 3
    ((2, 3), (3,)),
    ((6,), (2, 3)),     # same size, different shape
    ((3,), (2,)),       # not even broadcastable
])
def test_check_refuses_tensors_of_different_shapes_and_names_both(actual_shape, expected_shape):
    actual, expected = torch.zeros(actual_shape), torch.zeros(expected_shape)
    message = f"logits: actual has shape {list(actual_shape)}, expected has shape {list(expected_shape)}"
    with pytest.raises(ValueError, match=re.escape(message)):
        check_ulp_close(actual, expected, max_ulp=0, name="logits")


def test_a_failing_check_after_the_shape_check_still_reports_where():
    expected = torch.zeros(2, 3)
    actual = expected.clone()
    actual[1, 2] = 1.0
    result = check_ulp_close(actual, expected, max_ulp=0)
    assert result.n_failed == 1 and "1 of 6 elements" in result.message and "at [1, 2]" in result.message


def test_distance_broadcasts_to_one_count_per_compared_pair():
    row = torch.tensor([1.0, 2.0, 4.0])
    column = torch.nextafter(row, torch.tensor(9.0)).reshape(3, 1)
    distance = ulp_distance(row, column)
    assert distance.shape == (3, 3)
    assert distance.diagonal().tolist() == [1, 1, 1]
    assert torch.equal(distance, ulp_distance(row.expand(3, 3), column.expand(3, 3)))


def test_distance_names_both_shapes_when_they_do_not_broadcast():
    with pytest.raises(ValueError, match=r"shapes \[3\] and \[2\] do not broadcast"):
        ulp_distance(torch.zeros(3), torch.zeros(2))


@pytest.mark.parametrize("max_ulp,atol", [(0, 0.0), (4, 0.0), (4, 1e-6), (2**40, 0.0)])
def test_check_counts_the_same_failures_as_the_plain_element_wise_rule(max_ulp, atol):
    # the check looks at the absolute difference only where the ulp count fails: same verdict as the rule
    # applied to every element
    generator = torch.Generator().manual_seed(1)
    expected = torch.randn(5000, generator=generator) * torch.logspace(-9, 3, 5000)
    step = torch.randint(0, 8, (5000,), generator=generator).to(torch.float32)
    actual = expected + step * torch.finfo(torch.float32).eps * expected.abs()
    specials = torch.tensor([float("nan"), float("inf"), float("-inf"), 0.0, float("nan"), float("inf")])
    actual = torch.cat([actual, specials])
    expected = torch.cat([expected, specials.roll(1)])
    distance = ulp_distance(actual, expected)
    absolute = (actual.double() - expected.double()).abs()
    bad = (distance < 0) | ((distance > max_ulp) & ~(absolute <= atol))
    result = check_ulp_close(actual, expected, max_ulp=max_ulp, atol=atol)
    assert result.n_failed == int(bad.sum()) and result.max_ulp == int(distance.max())
    assert bool(result) == (not bool(bad.any()))
    if not result:
        first = bad.nonzero()[0].item()
        assert f"at [{first}]:" in result.message


def test_check_ulp_close_refuses_negative_bounds_and_names_a_numpy_array():
    import numpy as np
    import pytest

    from exactness.compare.ulp import check_ulp_close

    x = torch.ones(3)
    with pytest.raises(ValueError, match="max_ulp and atol must be zero or more, got max_ulp=-1"):
        check_ulp_close(x, x, max_ulp=-1)
    with pytest.raises(TypeError, match="actual is a numpy.ndarray, not a torch.Tensor"):
        check_ulp_close(np.ones(3, dtype=np.float32), x, max_ulp=1)


@pytest.mark.parametrize("bound", [float("nan"), float("inf"), 2.5])
def test_a_bound_that_is_not_a_whole_number_of_ulps_is_refused(bound):
    x = torch.ones(2)
    with pytest.raises(ValueError, match=rf"logits: max_ulp must be a whole number of ulps, 0 or more, got {bound}"):
        check_ulp_close(x, x, max_ulp=bound, name="logits")


def test_a_huge_bound_still_reports_a_nan_mismatch_instead_of_overflowing():
    actual, expected = torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 2.0])
    result = check_ulp_close(actual, expected, max_ulp=10**30)
    assert not result and result.n_failed == 1 and result.n_not_comparable == 1
    assert "at [1]: actual nan, expected 2.0, not comparable" in result.message


def test_nan_and_infinity_mismatches_are_reported_as_such_not_as_a_count_of_ulps():
    actual = torch.tensor([1.0, float("nan"), float("inf")])
    expected = torch.tensor([1.0, 1.0, 1.0])
    result = check_ulp_close(actual, expected, max_ulp=0, name="logits")
    assert not result and result.n_failed == 2 and result.n_not_comparable == 2
    assert result.message.splitlines()[0] == (
        "logits: 2 of 3 elements are not comparable (NaN or infinity against a different value)")
    assert result.max_ulp == 0  # the comparable pair; the mismatches are counted apart, never as -1
    only = check_ulp_close(torch.tensor([float("nan")]), torch.tensor([1.0]), max_ulp=0)
    assert only.max_ulp is None and only.n_not_comparable == 1
    both = check_ulp_close(torch.tensor([1.0, float("nan")]), torch.tensor([1.5, 1.0]), max_ulp=0)
    assert both.message.splitlines()[0] == (
        "tensor: 2 of 2 elements fail: 1 differ by more than 0 ulps (and more than atol=0), "
        "1 not comparable (NaN or infinity against a different value)")
