"""The CPU emulation of TF32 and autocast: the rounding bit for bit, and which operands each op rounds."""

from __future__ import annotations

import struct

import pytest
import torch

from exactness.runtimes.emulated_precision import EmulatedPrecision, round_tf32, round_to
from exactness.runtimes.sides import Precision


def _bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _float(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


def _tf32_by_hand(x: float) -> float:
    """Round to 10 mantissa bits, nearest with ties to even, on the integer bit pattern (sign kept apart)."""
    bits = _bits(x)
    sign, magnitude = bits & 0x80000000, bits & 0x7FFFFFFF
    low = magnitude & 0x1FFF
    kept = magnitude >> 13
    if low > 0x1000 or (low == 0x1000 and kept & 1):
        kept += 1
    return _float(sign | (kept << 13))


EDGES = [
    1.0, -1.0, 0.0, -0.0,
    _float(0x3F801000),  # 1 + half a TF32 ulp: a tie, kept part even -> down
    _float(0x3F803000),  # a tie with the kept part odd -> up
    _float(0x3F801001),  # just above the tie -> up
    _float(0x3F800FFF),  # just below -> down
    _float(0x00000001), _float(0x00001000), _float(0x00003000), _float(0x007FFFFF),  # subnormals
    _float(0x7F7FFFFF), -_float(0x7F7FFFFF),  # the largest finite: rounds to infinity
    _float(0x7F7FE000),  # the largest TF32 value: unchanged
    3.14159265, -2.718281828, 1e-38, 6.1e-5,
]


@pytest.mark.parametrize("x", EDGES)
def test_round_tf32_matches_the_integer_rounding_on_edge_cases(x):
    got = round_tf32(torch.tensor([x], dtype=torch.float32)).item()
    assert struct.pack("<f", got) == struct.pack("<f", _tf32_by_hand(x))


def test_round_tf32_keeps_inf_and_nan_and_rounds_ties_to_even():
    values = torch.tensor([float("inf"), -float("inf"), float("nan"), _float(0x3F801000), _float(0x3F803000)])
    out = round_tf32(values)
    assert out[0] == float("inf") and out[1] == -float("inf") and torch.isnan(out[2])
    assert out[3].item() == 1.0 and out[4].item() == _float(0x3F804000)
    assert round_tf32(torch.tensor([_float(0x7F7FFFFF)])).item() == float("inf")


def test_round_tf32_leaves_only_ten_mantissa_bits_on_random_values():
    x = torch.randn(10_000, generator=torch.Generator().manual_seed(0)) * 1e3
    bits = round_tf32(x).view(torch.int32)
    assert int((bits & 0x1FFF).abs().sum()) == 0
    assert float(((round_tf32(x) - x).abs() / x.abs()).max()) <= 2.0 ** -11


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_round_to_low_precision_is_torchs_own_conversion(dtype):
    x = torch.randn(10_000, generator=torch.Generator().manual_seed(1)) * 100
    assert torch.equal(round_to(x, dtype), x.to(dtype).float())


def test_tf32_mode_rounds_a_convolutions_operands_and_not_its_bias():
    torch.manual_seed(0)
    conv = torch.nn.Conv1d(8, 4, 3)
    x = torch.randn(2, 8, 32)
    with torch.no_grad():
        expected = torch.nn.functional.conv1d(round_tf32(x), round_tf32(conv.weight), conv.bias)
        with EmulatedPrecision(tf32_ops=Precision.TF32_CONV.tf32_ops) as mode:
            got = conv(x)
        assert torch.equal(got, expected)
        assert not torch.equal(got, conv(x))  # the rounding changed something
        assert mode.calls == {"convolution": 1}


def test_tf32_mode_keeps_one_input_channel_per_group_in_float32():
    """cuDNN keeps these out of TF32 (probed on an H200 by the GPU command): a first layer and a depthwise one."""
    torch.manual_seed(0)
    first, depthwise = torch.nn.Conv1d(1, 8, 7), torch.nn.Conv1d(8, 8, 7, groups=8)
    x = torch.randn(1, 1, 64)
    with torch.no_grad():
        plain = depthwise(first(x))
        with EmulatedPrecision(tf32_ops=Precision.TF32.tf32_ops):
            assert torch.equal(depthwise(first(x)), plain)


def test_tf32_conv_only_leaves_matrix_products_in_float32_and_tf32_rounds_them():
    torch.manual_seed(0)
    linear = torch.nn.Linear(16, 8)
    x = torch.randn(4, 16)
    with torch.no_grad():
        plain = linear(x)
        with EmulatedPrecision(tf32_ops=Precision.TF32_CONV.tf32_ops):
            assert torch.equal(linear(x), plain)
        with EmulatedPrecision(tf32_ops=Precision.TF32.tf32_ops):
            rounded = linear(x)
        assert torch.equal(rounded, torch.addmm(linear.bias, round_tf32(x), round_tf32(linear.weight).t()))


def test_autocast_emulation_runs_products_low_and_norms_in_float32():
    torch.manual_seed(0)
    linear, norm = torch.nn.Linear(16, 8), torch.nn.LayerNorm(8)
    x = torch.randn(4, 16)
    with torch.no_grad(), EmulatedPrecision(low_dtype=torch.bfloat16) as mode:
        product = linear(x)
        normed = norm(product)
    assert product.dtype == torch.bfloat16 and normed.dtype == torch.float32
    # every floating argument (the bias too) rounded, float32 accumulation, the result rounded
    expected = torch.addmm(round_to(linear.bias, torch.bfloat16), round_to(x, torch.bfloat16),
                           round_to(linear.weight, torch.bfloat16).t()).to(torch.bfloat16)
    assert torch.equal(product, expected)
    assert mode.calls["addmm"] == 1 and mode.calls["native_layer_norm"] == 1


def test_low_dtype_must_be_half_or_bfloat16():
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        EmulatedPrecision(low_dtype=torch.float64)


def test_a_transposed_convolutions_input_channels_are_read_from_its_own_weight_layout():
    """A transposed weight is (in, out/groups, k): one input channel stays float32, one output channel does not."""
    torch.manual_seed(0)
    one_in, one_out = torch.nn.ConvTranspose1d(1, 8, 4), torch.nn.ConvTranspose1d(8, 1, 4)
    with torch.no_grad():
        x1, x8 = torch.randn(1, 1, 32), torch.randn(1, 8, 32)
        plain_in, plain_out = one_in(x1), one_out(x8)
        with EmulatedPrecision(tf32_ops=Precision.TF32_CONV.tf32_ops):
            assert torch.equal(one_in(x1), plain_in)
            assert not torch.equal(one_out(x8), plain_out)
