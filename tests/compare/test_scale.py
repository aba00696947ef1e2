"""Noise in units of a tensor's scale, and which elements carry the worst element-wise ulp counts."""

import math

import numpy as np
import torch

from exactness.compare.scale import rms_ulps, worst_elements


def test_the_same_absolute_noise_everywhere_puts_the_worst_counts_on_the_smallest_elements():
    expected = torch.linspace(-2.0, 2.0, 1001)  # includes values near zero
    actual = expected + 1e-6  # one absolute step for every element: element-wise ulps explode near zero
    found = worst_elements(actual, expected)
    rms = float(expected.double().pow(2).mean().sqrt())
    assert found["worst_of_rms"] < 0.01 and found["top_ulps_below_rms"] < 0.05
    assert math.isclose(found["worst_of_rms"], float(expected.abs().min()) / rms, rel_tol=1e-6)


def test_noise_proportional_to_each_element_leaves_the_worst_counts_on_large_elements():
    expected = torch.linspace(0.5, 2.0, 1001)
    actual = expected.clone()
    actual[-1] = torch.nextafter(torch.nextafter(expected[-1], torch.tensor(9.0)), torch.tensor(9.0))  # 2 ulps
    actual[:10] = torch.nextafter(expected[:10], torch.full((10,), 9.0))  # 1 ulp
    found = worst_elements(actual, expected)
    assert found["worst_of_rms"] > 1.0  # the largest element, above the RMS, carries the worst count


def test_identical_or_all_zero_tensors_have_no_worst_element():
    x = torch.ones(10)
    assert all(math.isnan(v) for v in worst_elements(x, x).values())
    assert all(math.isnan(v) for v in worst_elements(torch.ones(4), torch.zeros(4)).values())
    assert all(math.isnan(v) for v in worst_elements(torch.ones(3, dtype=torch.int64),
                                                     torch.zeros(3, dtype=torch.int64)).values())


def test_rms_ulps_is_the_difference_in_ulps_of_the_rms():
    assert rms_ulps([np.spacing(np.float32(1.0)) * 3], [np.spacing(np.float32(1.0)) * 3]).tolist() == [3.0]
