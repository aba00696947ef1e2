"""The DAC encoder and decoder as chains of the layers the studies look at, run over a clip in windows.

A clip of at most `CHUNK_FRAMES` latent frames runs whole: the same modules, in the same order, on the same
tensors as `DacModel.encode` / `decode`, so every value is the library's bit for bit. A longer clip runs in
windows: each keeps `CHUNK_FRAMES` frames (the last keeps the rest) and reads, on each side, the context its
kept values depend on, from the layers' kernels, dilations, paddings and strides (`encoder_reach`,
`decoder_reach`). Every kept value is then the same function of the input as in a whole-clip run; only its
float32 rounding may differ, because the convolution kernels choose their algorithm by the tensor's length:
PyTorch runs a batch-1 1-D convolution of at most 20,480 input values as im2col + BLAS sgemm and a larger one
in oneDNN, and a kernel splits the length into vector-wide blocks and per thread, computing a remainder apart,
so which outputs round alike depends on the window's length, the instruction set the kernel picked and the
thread count. Measured on the tiny model's 200-frame decode in 3 windows (`tests/models/test_dac_chunks.py`):
every value the whole run's on an AMD EPYC (AVX2); on an Intel Xeon with AVX-512, 3 of 1,600 samples differ
(at most 11 ulp): MKL's AVX-512 sgemm computes the last `length % 16` outputs of the last convolution apart,
and its windows are 1,000 and 232 samples long where the whole clip is 1,600; with MKL held to AVX2 there
(MKL_ENABLE_INSTRUCTIONS=AVX2) every convolution departs, 206 samples by up to 2.7e-5. So a windowed run is
as close to the float64 run as the whole run is, not equal to it; a clip that runs whole is equal on any CPU.
Memory follows the window, not the clip; the context costs (window / kept) - 1 extra work.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import torch
from transformers import DacModel

CHUNK_FRAMES = 96  # latent frames kept per window: 1.1 s at 44.1 kHz (so 1 s runs whole), 1.9 s at 16 kHz


@dataclass(frozen=True)
class Step:
    """One compared layer: its label (the seed's naming), module path, role ('main' path or 'inner' residual
    unit), how a model advances the state through it, and its positions per input unit (per sample in the
    encoder, per latent frame in the decoder). `same_as_previous`: the layer's output is the previous step's
    (a decoder block ends with its third residual unit)."""

    label: str
    path: str
    role: str
    advance: Callable[[DacModel, torch.Tensor], torch.Tensor]
    per_unit: Fraction
    same_as_previous: bool = False


def encoder_steps(model: DacModel) -> list[Step]:
    steps = [Step("encoder.Conv1", "encoder.conv1", "main", lambda m, x: m.encoder.conv1(x), Fraction(1))]
    jump = 1
    for i, stride in enumerate(model.config.downsampling_ratios):
        for j in (1, 2, 3):
            steps.append(Step(f"encoder.Block{i}.res_unit{j}", f"encoder.block.{i}.res_unit{j}", "inner",
                              lambda m, x, i=i, j=j: getattr(m.encoder.block[i], f"res_unit{j}")(x),
                              Fraction(1, jump)))
        jump *= stride
        # DacEncoderBlock.forward: snake1 after the third residual unit, then the strided convolution
        steps.append(Step(f"encoder.Block{i}", f"encoder.block.{i}", "main",
                          lambda m, x, i=i: m.encoder.block[i].conv1(m.encoder.block[i].snake1(x)),
                          Fraction(1, jump)))
    steps += [Step("encoder.Snake1", "encoder.snake1", "main", lambda m, x: m.encoder.snake1(x), Fraction(1, jump)),
              Step("encoder.Conv2", "encoder.conv2", "main", lambda m, x: m.encoder.conv2(x), Fraction(1, jump))]
    return steps


def decoder_steps(model: DacModel) -> list[Step]:
    """The decoder from the quantized representation to the last convolution (tanh follows, in `run`)."""
    steps = [Step("decoder.Conv1", "decoder.conv1", "main", lambda m, x: m.decoder.conv1(x), Fraction(1))]
    per_frame = 1
    for i, stride in enumerate(model.config.upsampling_ratios):
        per_frame *= stride
        for j in (1, 2, 3):
            def advance(m, x, i=i, j=j):
                block = m.decoder.block[i]
                if j == 1:  # DacDecoderBlock.forward: snake1, the transposed convolution, then the residual units
                    x = block.conv_t1(block.snake1(x))
                return getattr(block, f"res_unit{j}")(x)

            steps.append(Step(f"decoder.Block{i}.res_unit{j}", f"decoder.block.{i}.res_unit{j}", "inner", advance,
                              Fraction(per_frame)))
        steps.append(Step(f"decoder.Block{i}", f"decoder.block.{i}", "main", lambda m, x: x, Fraction(per_frame),
                          same_as_previous=True))
    steps += [Step("decoder.Snake1", "decoder.snake1", "main", lambda m, x: m.decoder.snake1(x), Fraction(per_frame)),
              Step("decoder.Conv2", "decoder.conv2", "main", lambda m, x: m.decoder.conv2(x), Fraction(per_frame))]
    return steps


def _convs(model: DacModel, part: str) -> list[torch.nn.Module]:
    """The encoder's or decoder's convolutions in the order the signal meets them."""
    coder = getattr(model, part)
    convs = [coder.conv1]
    for block in coder.block:
        units = [getattr(block, f"res_unit{j}") for j in (1, 2, 3)]
        inner = [c for u in units for c in (u.conv1, u.conv2)]
        convs += inner + [block.conv1] if part == "encoder" else [block.conv_t1] + inner
    return convs + [coder.conv2]


def encoder_reach(model: DacModel) -> tuple[int, int]:
    """Input samples a latent frame's value depends on, left and right of its first sample (frame f starts
    at sample f * hop): output position o of a convolution reads input positions o*s - p to o*s - p + d(k-1)."""
    left = right = 0
    jump = 1
    for conv in _convs(model, "encoder"):
        k, d, p, s = conv.kernel_size[0], conv.dilation[0], conv.padding[0], conv.stride[0]
        left += p * jump
        right += (d * (k - 1) - p) * jump
        jump *= s
    return left, right


def decoder_reach(model: DacModel) -> tuple[Fraction, Fraction]:
    """Latent frames an output sample depends on, left and right of its own frame: a transposed convolution's
    output o reads inputs (o + p - d(k-1)) / s to (o + p) / s."""
    left = right = Fraction(0)
    per_frame = 1
    for conv in _convs(model, "decoder"):
        k, d, p, s = conv.kernel_size[0], conv.dilation[0], conv.padding[0], conv.stride[0]
        if isinstance(conv, torch.nn.ConvTranspose1d):
            per_frame *= s
            left += Fraction(d * (k - 1) - p, per_frame)
            right += Fraction(p, per_frame)
        else:
            left += Fraction(p, per_frame)
            right += Fraction(d * (k - 1) - p, per_frame)
    return left, right


def encoded_frames(model: DacModel, samples: int) -> int:
    """Latent frames `DacModel.encode` returns for a clip of `samples` samples."""
    length = samples
    for conv in _convs(model, "encoder"):
        k, d, p, s = conv.kernel_size[0], conv.dilation[0], conv.padding[0], conv.stride[0]
        length = (length + 2 * p - d * (k - 1) - 1) // s + 1
    return length


@dataclass(frozen=True)
class Window:
    """Input units [start, stop) are read; [keep_start, keep_stop) are kept (keep_stop None: to the end)."""

    start: int
    stop: int
    keep_start: int
    keep_stop: int | None

    def kept(self, per_unit: Fraction) -> slice:
        """The kept positions of a layer with `per_unit` positions per input unit, in this window's tensor."""
        begin = int((self.keep_start - self.start) * per_unit)
        return slice(begin, None if self.keep_stop is None else int((self.keep_stop - self.start) * per_unit))


def windows(units: int, frames: int, unit_per_frame: int, context: tuple[int, int],
            chunk_frames: int = CHUNK_FRAMES) -> list[Window]:
    """Windows over `units` input units (samples for the encoder, frames for the decoder) of a clip of `frames`
    latent frames, each keeping `chunk_frames` frames and reading `context` units (left, right) beyond them."""
    if chunk_frames < 1:
        raise ValueError(f"chunk_frames must be at least 1, got {chunk_frames}")
    count = max(1, math.ceil(frames / chunk_frames))
    if count == 1:
        return [Window(0, units, 0, None)]
    result = []
    for c in range(count):
        keep_start = c * chunk_frames * unit_per_frame
        keep_stop = None if c == count - 1 else (c + 1) * chunk_frames * unit_per_frame
        stop = units if keep_stop is None else min(units, keep_stop + context[1])
        result.append(Window(max(0, keep_start - context[0]), stop, keep_start, keep_stop))
    return result


def encoder_windows(model: DacModel, samples: int, chunk_frames: int = CHUNK_FRAMES) -> list[Window]:
    hop = model.config.hop_length
    left, right = encoder_reach(model)
    # whole frames of context, so every window starts on a frame: each layer's positions then line up
    context = (math.ceil(left / hop) * hop, math.ceil(right / hop) * hop)
    return windows(samples, encoded_frames(model, samples), hop, context, chunk_frames)


def decoder_windows(model: DacModel, frames: int, chunk_frames: int = CHUNK_FRAMES) -> list[Window]:
    left, right = decoder_reach(model)
    # one frame more each side: an output sample's own frame is fractional inside the transposed convolutions
    return windows(frames, frames, 1, (math.ceil(left) + 1, math.ceil(right) + 1), chunk_frames)


@functools.cache
def hand_back_large_blocks(threshold: int = 1 << 20) -> bool:
    """Make glibc serve blocks of `threshold` bytes and more with mmap, and unmap them when freed. By default
    glibc raises that threshold as large blocks are freed, then serves them from its heap and keeps them:
    measured on the 44.1 kHz propagation at 1 s, 200 to 350 MB more resident at the peak, and still held
    after the run. Where memory lives never changes the arithmetic; page faults cost time, which huge pages
    cut (a DAC study's kernel starts with PyTorch's THP_MEM_ALLOC_ENABLE: `exactness.studies.dac_propagation.rules`).
    Process-wide and lasting (a kernel running a DAC study keeps it); True when glibc accepted it, False
    elsewhere."""
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold))


_M_MMAP_THRESHOLD = -3


def lockstep(models: dict, inputs: dict, steps: list[Step], plan: list[Window],
             on_step: Callable[[Step, dict], None] | None = None) -> dict[str, torch.Tensor]:
    """Every model through each window one step at a time, all of them before the next step, so `on_step`
    sees the kept part of every model's output of the same layer at once and nothing more is kept. Returns
    each model's last output, the windows' kept parts joined."""
    hand_back_large_blocks()
    kept: dict[str, list[torch.Tensor]] = {name: [] for name in models}
    with torch.no_grad():
        for window in plan:
            states = {name: inputs[name][..., window.start:window.stop] for name in models}
            for step in steps:
                for name in models:  # one at a time: each run's input is freed as its output arrives
                    states[name] = step.advance(models[name], states[name])
                if on_step is not None:
                    cut = window.kept(step.per_unit)
                    on_step(step, {name: state[..., cut] for name, state in states.items()})
            cut = window.kept(steps[-1].per_unit)
            for name, state in states.items():
                kept[name].append(state[..., cut])
            del states
    return {name: parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1) for name, parts in kept.items()}


def encode_latent(model: DacModel, audio: torch.Tensor, chunk_frames: int = CHUNK_FRAMES) -> torch.Tensor:
    """`model.encoder(audio)`, in windows."""
    plan = encoder_windows(model, audio.shape[-1], chunk_frames)
    return lockstep({"model": model}, {"model": audio}, encoder_steps(model), plan)["model"]


def decode(model: DacModel, quantized: torch.Tensor, chunk_frames: int = CHUNK_FRAMES) -> torch.Tensor:
    """`model.decode(quantized).audio_values`, in windows."""
    plan = decoder_windows(model, quantized.shape[-1], chunk_frames)
    out = lockstep({"model": model}, {"model": quantized}, decoder_steps(model), plan)["model"]
    with torch.no_grad():
        return model.decoder.tanh(out).squeeze(1)


def describe(model: DacModel, samples: int, chunk_frames: int = CHUNK_FRAMES) -> str:
    """One sentence for a report: whether a clip of `samples` samples ran whole or in windows, and how."""
    frames = encoded_frames(model, samples)
    plan = encoder_windows(model, samples, chunk_frames)
    if len(plan) == 1:
        return (f"The clip ({samples:,} samples, {frames:,} latent frames, at most {chunk_frames:,}) ran whole: "
                "every value is the library's own.")
    left, right = encoder_reach(model)
    before, after = decoder_reach(model)
    context, ahead = plan[1].keep_start - plan[1].start, plan[0].stop - plan[0].keep_stop
    return (f"The clip ({samples:,} samples, {frames:,} latent frames) ran in {len(plan):,} windows of "
            f"{chunk_frames:,} frames, each reading the context its values depend on: {context:,} samples before "
            f"and up to {ahead:,} after in the encoder (its receptive field: {left:,} and {right:,}), "
            f"{math.ceil(before) + 1} and {math.ceil(after) + 1} frames in the decoder (reach {float(before):.1f} and "
            f"{float(after):.1f}). Every kept value is the same function of the input as in a whole-clip run; only its "
            "float32 rounding may differ (the convolution kernels choose their algorithm by length).")
