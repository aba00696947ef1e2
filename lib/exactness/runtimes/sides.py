"""A side of a comparison: which runtime computes, on which device, in which precision. One typed value.

Written as `runtime:device:precision`, e.g. `eager:cpu:fp32`, `ort:cpu:fp32`, `eager:cpu:tf32-conv`,
`eager:cuda:tf32-conv`; a pair as `A vs B`. Reduced precision on a CPU is emulated
(`runtimes.emulated_precision`) and every label says so; on CUDA it is real, with torch's flags set explicitly
for the side and recorded (`Side.cuda_flags`). ONNX Runtime here has the CPU provider only (onnxruntime-gpu,
whose CUDA provider has its own `use_tf32`, is not installed), so an `ort` side is `ort:cpu:fp32`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch loads only when a side runs: parameter rules parse sides in a fraction of a second
    import torch

    from exactness.runtimes.emulated_precision import EmulatedPrecision


class Runtime(StrEnum):
    EAGER = "eager"
    ORT = "ort"


class Device(StrEnum):
    CPU = "cpu"
    CUDA = "cuda"


class Precision(StrEnum):
    FP32 = "fp32"
    TF32_CONV = "tf32-conv"  # torch's CUDA default: cuDNN convolutions in TF32, matrix products in float32
    TF32 = "tf32"  # convolutions and matrix products in TF32
    FP16 = "fp16"  # CUDA autocast to float16
    BF16 = "bf16"  # CUDA autocast to bfloat16

    @property
    def words(self) -> str:
        return {"fp32": "fp32", "tf32-conv": "TF32 convolutions", "tf32": "TF32", "fp16": "fp16 autocast",
                "bf16": "bf16 autocast"}[self.value]

    @property
    def tf32_ops(self) -> frozenset[str]:
        from exactness.runtimes.emulated_precision import CONVOLUTIONS, MATRIX_PRODUCTS

        return {"tf32-conv": CONVOLUTIONS, "tf32": CONVOLUTIONS | MATRIX_PRODUCTS}.get(self.value, frozenset())

    @property
    def low_dtype(self) -> torch.dtype | None:
        import torch

        return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(self.value)

    @property
    def unit_roundoff(self) -> float:
        """Half an ulp at 1 of the precision's significand: the relative rounding of one value."""
        return {"fp32": 2.0 ** -24, "tf32-conv": 2.0 ** -11, "tf32": 2.0 ** -11, "fp16": 2.0 ** -11,
                "bf16": 2.0 ** -8}[self.value]


class SideError(ValueError):
    """A side or pair that cannot be parsed or run here: one line naming it and what would do."""


EMULATION_LEAVES_OUT = ("the GPU kernel's accumulation order and split-K, its algorithm choice (which convolutions "
                        "cuDNN runs in TF32), the hardware's own operand conversion, and fused kernels")


def emulation_note(sides) -> str:
    """One sentence for a report: which sides are emulated here and what the emulation leaves out ("" if none)."""
    emulated = sorted({side.label for side in sides if side.emulated})
    if not emulated:
        return ""
    return (f"Emulated on this CPU: {', '.join(emulated)}. The emulation rounds the multiplied operands of every "
            "convolution (for TF32 not those with one input channel per group, which cuDNN keeps in float32) and, "
            "for `tf32` and autocast, of every matrix product, as the precision does, and accumulates in float32; "
            "it leaves out "
            f"{EMULATION_LEAVES_OUT}. Its rate can match a GPU's while the seeds that fail differ.")


@dataclass(frozen=True)
class Side:
    runtime: Runtime = Runtime.EAGER
    device: Device = Device.CPU
    precision: Precision = Precision.FP32

    @classmethod
    def parse(cls, text: str) -> Side:
        parts = str(text).strip().split(":")
        if len(parts) != 3:
            raise SideError(f"side {text!r}: write runtime:device:precision, e.g. eager:cpu:fp32 or "
                            "eager:cpu:tf32-conv")
        choices = (Runtime, Device, Precision)
        values = []
        for part, kind in zip(parts, choices, strict=True):
            try:
                values.append(kind(part.strip().lower()))
            except ValueError:
                known = ", ".join(k.value for k in kind)
                raise SideError(f"side {text!r}: {part!r} is not a {kind.__name__.lower()} ({known})") from None
        side = cls(*values)
        if side.runtime is Runtime.ORT and (side.device, side.precision) != (Device.CPU, Precision.FP32):
            raise SideError(f"side {text!r}: ONNX Runtime runs here with its CPU provider in fp32 only "
                            "(onnxruntime-gpu, whose CUDA provider has use_tf32, is not installed)")
        return side

    @property
    def spec(self) -> str:
        return f"{self.runtime}:{self.device}:{self.precision}"

    @property
    def emulated(self) -> bool:
        return self.device is Device.CPU and self.precision is not Precision.FP32

    @property
    def label(self) -> str:
        runtime = "eager" if self.runtime is Runtime.EAGER else "ORT"
        tail = " (emulated)" if self.emulated else ""
        return f"{runtime} {self.device.value.upper()} {self.precision.words}{tail}"

    @property
    def cuda_flags(self) -> dict[str, bool]:
        """torch's TF32 flags as this side sets them on CUDA (both explicit, whatever the defaults)."""
        return {"cudnn.allow_tf32": self.precision in (Precision.TF32_CONV, Precision.TF32),
                "cuda.matmul.allow_tf32": self.precision is Precision.TF32}

    @contextlib.contextmanager
    def applied(self) -> Iterator[EmulatedPrecision | None]:
        """Run eager code as this side: the CPU emulation's dispatch mode (yielded, with its op counts), or on
        CUDA torch's TF32 flags and autocast, restored afterwards."""
        import torch

        from exactness.runtimes.emulated_precision import AutocastFunctions, EmulatedPrecision

        if self.runtime is not Runtime.EAGER:
            raise SideError(f"{self.spec}: only an eager side runs Python code")
        if self.device is Device.CPU:
            if not self.emulated:
                yield None
                return
            low = self.precision.low_dtype
            mode = EmulatedPrecision(tf32_ops=self.precision.tf32_ops, low_dtype=low)
            with AutocastFunctions(low) if low is not None else contextlib.nullcontext(), mode:
                yield mode
            return
        saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
        flags = self.cuda_flags
        torch.backends.cudnn.allow_tf32 = flags["cudnn.allow_tf32"]
        torch.backends.cuda.matmul.allow_tf32 = flags["cuda.matmul.allow_tf32"]
        try:
            low = self.precision.low_dtype
            with torch.autocast("cuda", dtype=low) if low is not None else contextlib.nullcontext():
                yield None
        finally:
            torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


@dataclass(frozen=True)
class Pair:
    """Two sides compared: `reference` is the one the export test calls expected (eager, as it runs in CI)."""

    reference: Side
    other: Side

    @classmethod
    def parse(cls, text: str) -> Pair:
        parts = str(text).split(" vs ")
        if len(parts) != 2:
            raise SideError(f"pair {text!r}: write 'SIDE vs SIDE', e.g. 'eager:cpu:fp32 vs eager:cpu:tf32-conv'")
        pair = cls(Side.parse(parts[0]), Side.parse(parts[1]))
        if pair.reference == pair.other:
            raise SideError(f"pair {text!r}: both sides are {pair.reference.spec}; a side compared with itself "
                            "cannot disagree")
        return pair

    @property
    def spec(self) -> str:
        return f"{self.reference.spec} vs {self.other.spec}"

    @property
    def label(self) -> str:
        return f"{self.reference.label} vs {self.other.label}"

    @property
    def emulated(self) -> bool:
        return self.reference.emulated or self.other.emulated

    @property
    def needs_cuda(self) -> bool:
        return Device.CUDA in (self.reference.device, self.other.device)


DEFAULT_PAIR = Pair(Side(Runtime.EAGER), Side(Runtime.ORT))  # the export test on a CPU runner
