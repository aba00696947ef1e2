"""Reduced precision on a CPU, emulated at the aten level: what a CUDA run's TF32 or autocast does to the values.

TF32 (NVIDIA's tensor-float-32): a convolution's or matrix product's inputs keep float32's 8-bit exponent and
only 10 of its 23 mantissa bits; products are accumulated in float32. The emulation rounds the two operands of
every such op (never the bias, which the kernels add in float32) to nearest, ties to even (`round_tf32`), and
runs the op in float32. Which ops: `aten.convolution` for cuDNN's flag (`torch.backends.cudnn.allow_tf32`,
True by default) and the matrix products for cuBLAS's (`torch.backends.cuda.matmul.allow_tf32`, False by
default); `linear` and `matmul` reach the dispatcher as `addmm`, `mm`, `bmm`, so they are covered there.

fp16 and bf16: CUDA autocast's op policy (torch's `aten/src/ATen/autocast_mode.cpp`, listed in
https://pytorch.org/docs/stable/amp.html "CUDA Ops that can autocast to float16" and "... to float32"): the
lower-precision ops take their floating arguments rounded to the low dtype, compute in float32 (as the tensor
cores accumulate) and return the low dtype; the float32 ops take low-precision operands back to float32; every
other op runs on what it is given, so the low dtype flows on as it does on CUDA. The lists below are those ops as
the dispatcher sees them (`layer_norm` arrives as `native_layer_norm`, `softmax` as `_softmax`).

One assumption about cuDNN's algorithm choice: a convolution with one input channel per group (a raw-audio first
layer, a depthwise one) stays in float32 (`ONE_CHANNEL_IN_FP32`). The GPU command probes it on CUDA (an H200 with
cuDNN 9.19: both kinds unchanged by the TF32 flag, a 32-channel convolution and a linear layer changed exactly as
the emulation changes them), and its conformer run found the emulated and the real TF32 side failing the export test
on 3,930 and 3,913 of 19,885 seeds, with the same outcome on 19,736 of them.

What emulation leaves out, and every report says so: the GPU kernel's accumulation order and split-K, its
algorithm choice (cuDNN may run a convolution, e.g. a one-channel first layer, outside TF32), the hardware's own
operand conversion (truncation in places), and fused kernels. Flips depend on those bits: an emulated rate can
match a GPU's while the seeds that flip differ.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from exactness import compat

tree_map = compat.tree_map()

ONE_CHANNEL_IN_FP32 = True
_DROPPED_BITS = 13  # float32's 23 mantissa bits less TF32's 10
_LOW_BITS = (1 << _DROPPED_BITS) - 1

CONVOLUTIONS = frozenset({"convolution", "_convolution", "conv_tbc"})
MATRIX_PRODUCTS = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "addr"})

# CUDA autocast's lower-precision list, as aten ops reach the dispatcher
AUTOCAST_LOW = CONVOLUTIONS | MATRIX_PRODUCTS | frozenset({"_prelu_kernel", "prelu",
                                                           "_scaled_dot_product_flash_attention",
                                                           "_scaled_dot_product_flash_attention_for_cpu",
                                                           "_scaled_dot_product_efficient_attention"})
# CUDA autocast's float32 list (and its "float32 unless a dtype is given" list), likewise
AUTOCAST_FP32 = frozenset({
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
    "sinh", "tan", "pow", "softplus", "native_layer_norm", "native_group_norm", "norm", "linalg_vector_norm",
    "cosine_similarity", "cdist", "dist", "renorm", "logsumexp", "_softmax", "_log_softmax", "cumsum", "cumprod",
    "sum", "prod", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "nll_loss_forward",
    "binary_cross_entropy_with_logits", "kl_div", "upsample_nearest1d", "upsample_nearest2d",
    "upsample_linear1d", "upsample_bilinear2d",
})


def round_tf32(values: torch.Tensor) -> torch.Tensor:
    """float32 -> float32 holding only TF32's 10 mantissa bits, rounded to nearest with ties to even, in integer
    arithmetic on the bit pattern: subnormals round within their own spacing, a carry moves into the exponent
    (the largest finite values round to infinity, as any round-to-nearest does), inf and NaN stay as they are."""
    if values.dtype != torch.float32:
        raise TypeError(f"round_tf32 takes float32, not {values.dtype}")
    bits = values.contiguous().view(torch.int32)
    # the kept part's lowest bit decides a tie: adding 0xFFF + it rounds half up on odd, half down on even
    kept_lsb = (bits >> _DROPPED_BITS) & 1
    rounded = ((bits + (_LOW_BITS >> 1) + kept_lsb) & ~_LOW_BITS).view(torch.float32)
    return torch.where(torch.isfinite(values), rounded, values).view(values.shape)


def round_to(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float32 values rounded to `dtype` (nearest, ties to even: torch's own conversion), kept as float32."""
    return values.to(dtype).to(torch.float32)


def _one_channel(name: str, args: tuple) -> bool:
    """A convolution with one input channel per group. aten.convolution's weight is (out, in/groups, ...), but a
    transposed one's is (in, out/groups, ...): its input channels per group are in/groups."""
    weight = args[1]
    transposed = name != "conv_tbc" and len(args) > 6 and bool(args[6])
    groups = int(args[8]) if transposed and len(args) > 8 else 1
    return (weight.shape[0] // groups if transposed else weight.shape[1]) == 1


def _operands(name: str) -> tuple[int, ...]:
    """The positions of an op's multiplied operands: its bias or added term keeps float32."""
    if name in ("addmm", "baddbmm", "addbmm", "addmv", "addr"):
        return (1, 2)
    return (0, 1)


class EmulatedPrecision(compat.torch_dispatch_mode()):
    """Within this mode, the listed ops compute as the precision would on CUDA (module docstring).
    `tf32_ops`: the op names whose operands go to TF32 (convolutions, matrix products, or both);
    `low_dtype`: float16 or bfloat16 for autocast's policy. `calls` counts the ops it changed, by name."""

    def __init__(self, *, tf32_ops: frozenset[str] = frozenset(), low_dtype: torch.dtype | None = None):
        super().__init__()
        if low_dtype not in (None, torch.float16, torch.bfloat16):
            raise ValueError(f"low_dtype must be float16 or bfloat16, not {low_dtype}")
        self.tf32_ops, self.low_dtype = tf32_ops, low_dtype
        self.calls: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name in self.tf32_ops and not (ONE_CHANNEL_IN_FP32 and name in CONVOLUTIONS and _one_channel(name, args)):
            args = self._round_operands(name, args, round_tf32)
        elif self.low_dtype is not None and name in AUTOCAST_LOW:
            # autocast casts every floating argument (a bias too) to the low dtype; the kernel accumulates in float32
            low = self.low_dtype
            self.calls[name] = self.calls.get(name, 0) + 1
            args, kwargs = tree_map(lambda t: _rounded(t, low), (args, kwargs))
            return tree_map(lambda t: t.to(low) if _is_float32(t) else t, func(*args, **kwargs))
        elif self.low_dtype is not None and name in AUTOCAST_FP32:
            self.calls[name] = self.calls.get(name, 0) + 1
            args, kwargs = tree_map(_to_float32, args), tree_map(_to_float32, kwargs)
        return func(*args, **kwargs)

    def _round_operands(self, name: str, args: tuple, rounding) -> tuple:
        self.calls[name] = self.calls.get(name, 0) + 1
        keep = _operands(name)
        return tuple(rounding(a) if i in keep and _is_float32(a) else a for i, a in enumerate(args))


class AutocastFunctions(TorchFunctionMode):
    """The lower-precision ops that check their arguments' dtypes before the dispatcher sees them (attention
    demands one dtype for query, key and value): their floating arguments cast as autocast casts them."""

    FUNCTIONS = frozenset({torch.nn.functional.scaled_dot_product_attention})

    def __init__(self, low_dtype: torch.dtype):
        super().__init__()
        self.low_dtype = low_dtype

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.FUNCTIONS:
            args, kwargs = tree_map(lambda t: t.to(self.low_dtype) if isinstance(t, torch.Tensor)
                                    and t.is_floating_point() else t, (args, kwargs))
        return func(*args, **kwargs)


def _rounded(value, low: torch.dtype):
    value = _to_float32(value)
    return round_to(value, low) if _is_float32(value) else value


def _is_float32(value) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype == torch.float32


def _to_float32(value):
    if isinstance(value, torch.Tensor) and value.dtype in (torch.float16, torch.bfloat16):
        return value.to(torch.float32)
    return value
