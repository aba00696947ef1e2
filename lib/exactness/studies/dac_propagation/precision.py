"""Does a precision explain the DAC fix's growth? The investigation's comparison (weights folded in float64 against
weight norm recomputed) layer by layer through the encoder, run as one side computes (`runtimes.sides.Side`):
float32 on this CPU, TF32 emulated on it, and on CUDA for real where the GPU command runs it.

The two runs' weights differ by about one float32 ulp. In float32 that difference stays at rounding size through
the encoder. In TF32 a convolution rounds its weights to 10 mantissa bits; a one-ulp difference moves a weight
across a TF32 rounding boundary now and then, and that layer's difference jumps to TF32's rounding size. A
precision reproduces the investigation's pattern when its first convolution stays at float32 size while the first
block jumps to the investigation's size: each compared with its figure within `AGREE_FACTOR`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from exactness import published
from exactness.models import dac, dac_chunks
from exactness.runtimes.sides import Device, Side

RUNS = ("folded_fp64", "weight_norm")  # the investigation's conversion against the original's recomputed norm
AGREE_FACTOR = 10.0  # "the same size": within a factor of ten of the investigation's figure
FIRST, JUMP = "encoder.Conv1", "encoder.Block0"


def encoder_chain(plain, audio: torch.Tensor, side: Side) -> pd.DataFrame:
    """Per encoder step, the largest and mean |difference| between the two runs, both computed as `side`
    computes (its device, its precision), and its growth over the step before."""
    models = [dac.build_variant(plain, run) for run in RUNS]
    x = [audio, audio]
    if side.device is Device.CUDA:
        models, x = [m.cuda() for m in models], [a.cuda() for a in x]
    rows, before = [], None
    with torch.no_grad(), side.applied():
        for step in dac_chunks.encoder_steps(models[0]):
            x = [step.advance(m, value) for m, value in zip(models, x, strict=True)]
            if step.role != "main":
                continue
            difference = (x[0].double() - x[1].double()).abs()
            largest = float(difference.max())
            rows.append({"side": side.label, "precision": side.precision.value, "layer": step.label,
                         "max_abs_diff": largest, "mean_abs_diff": float(difference.mean()),
                         "growth": largest / before if before else float("nan")})
            before = largest
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Pattern:
    """One side's first convolution and first block beside the investigation's, and whether both agree."""

    side: str
    first: float
    jump: float
    first_ref: float
    jump_ref: float

    @staticmethod
    def _agrees(ours: float, theirs: float) -> bool:
        return ours > 0 and 1 / AGREE_FACTOR <= ours / theirs <= AGREE_FACTOR

    @property
    def reproduces(self) -> bool:
        return self._agrees(self.first, self.first_ref) and self._agrees(self.jump, self.jump_ref)


def patterns(chain: pd.DataFrame) -> list[Pattern]:
    found = []
    for side, group in chain.groupby("side", sort=False):
        by_layer = group.set_index("layer").max_abs_diff
        found.append(Pattern(side, float(by_layer.get(FIRST, float("nan"))), float(by_layer.get(JUMP, float("nan"))),
                             published.value(FIRST), published.value(JUMP)))
    return found


def _encoder_order(layer: str) -> tuple[int, int]:
    """Conv1, Block0, Block1, ..., Snake1, Conv2: the encoder's order whatever order the rows came in."""
    name = layer.rsplit(".", 1)[-1]
    if name.startswith("Block"):
        return 1, int(name[len("Block"):])
    return {"Conv1": (0, 0), "Snake1": (2, 0), "Conv2": (3, 0)}.get(name, (4, 0))


def beside_investigation(chain: pd.DataFrame) -> pd.DataFrame:
    """Each side's largest difference per main encoder layer, in columns, beside the investigation's figure."""
    wide = chain.pivot_table(index="layer", columns="side", values="max_abs_diff", sort=False)
    wide = wide.loc[sorted(wide.index, key=_encoder_order)]
    theirs = published.table(published.DAC_PR).set_index("key").value
    wide["investigation"] = [float(theirs.get(layer, float("nan"))) for layer in wide.index]
    return wide.reset_index()


def chains(plain_by_init: dict, audio: torch.Tensor, precisions: list[str]) -> pd.DataFrame:
    """The chain in float32 on this CPU and in each precision, emulated on it, per init."""
    sides = [Side.parse("eager:cpu:fp32")] + [Side.parse(f"eager:cpu:{p}") for p in precisions]
    return pd.concat([encoder_chain(plain, audio, side).assign(init=init)
                      for init, plain in plain_by_init.items() for side in sides], ignore_index=True)


def with_gpu_rows(chain: pd.DataFrame, gpu_chain: pd.DataFrame) -> pd.DataFrame:
    """This run's chains with a GPU run's CUDA rows beside them, marked "(GPU run)" (its CPU rows ran on another
    CPU, so they are left out): the table the section shows and the answers read."""
    cuda = gpu_chain[gpu_chain.side.str.contains("CUDA")] if len(gpu_chain) else gpu_chain
    if not len(cuda):
        return chain
    return pd.concat([chain, cuda.assign(side=cuda.side + " (GPU run)")], ignore_index=True)


def read_gpu_chain(path: str) -> tuple[dict, pd.DataFrame]:
    """(the GPU machine's facts, its chain table) from a folder `python -m exactness.gpu` wrote: data only."""
    from pathlib import Path

    from exactness.runtimes.gpu_folder import GpuFolderError, machine_facts
    from exactness.workbook.project import find_root

    folder = Path(path) if Path(path).is_absolute() else find_root() / path
    facts = machine_facts(folder, ("dac_chain.csv",), path)
    try:
        table = pd.read_csv(folder / "dac_chain.csv")
    except (UnicodeDecodeError, ValueError) as error:
        raise GpuFolderError(f"{folder / 'dac_chain.csv'} unreadable ({type(error).__name__})") from None
    needed = {"side", "layer", "max_abs_diff", "init"}
    if not needed <= set(table.columns):
        raise GpuFolderError(f"{folder / 'dac_chain.csv'} lacks the columns {', '.join(sorted(needed - set(table)))}")
    return facts, table


