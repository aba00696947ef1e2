"""Screen: for every seed, the smallest top-1/top-2 gap over all argmax rows, and where it is.

The gap is measured two ways. `min_gap` is the smallest gap in logit units (and `min_gap_ulps` that row's gap
in ulps of its top logit); `smallest_gap_ulps` is the smallest gap in ulps of each row's own top logit, over
all rows: the comparable axis across classes whose logits differ in scale (a 1.5e-5 gap is 126 ulps of a top
logit near 1.5 but 31 ulps of one near 6). The two minima can sit in different rows."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import pandas as pd
import torch

from exactness import sweep
from exactness.compare.near_tie import top_two
from exactness.compare.ulp import ulp
from exactness.models import wav2vec2_family as family
from exactness.models.quantizer_logits import FastLogits

_fast = functools.cache(FastLogits)  # one per model class and process


def screen_seeds(model: str, seeds: Sequence[int]) -> pd.DataFrame:
    fast = _fast(model)
    batch, frames, groups = family.argmax_rows(model)
    rows = []
    for seed in seeds:
        gaps = top_two(fast(seed))
        row = gaps.min_row
        frame_index, group = divmod(row, groups)
        b, f = divmod(frame_index, frames)
        gap, top = gaps.gap[row], gaps.top1[row]
        rows.append((model, int(seed), float(gap), float(gap / ulp(top)), b, f, group, float(top),
                     int(torch.count_nonzero(gaps.gap == 0)), float(gaps.gap_ulps.min())))
    return pd.DataFrame(rows, columns=["model", "seed", "min_gap", "min_gap_ulps", "batch", "frame", "group",
                                       "top_logit", "n_exact_ties", "smallest_gap_ulps"])


class _Chunk:
    """Picklable `chunk -> table` for worker processes."""

    def __init__(self, model: str):
        self.model = model

    def __call__(self, seeds: Sequence[int]) -> pd.DataFrame:
        return screen_seeds(self.model, seeds)


def screen(models: Sequence[str], seed_start: int, n_seeds: int, workers: int = 1, chunk_size: int = 250,
           progress_every: float = 10.0, scheduler: str = "", shards=None) -> pd.DataFrame:
    """`scheduler`: the address of an existing Dask cluster; empty runs on `workers` local processes.
    `shards`: a ShardStore that keeps finished chunks (and supplies them again on resume)."""
    seeds = range(seed_start, seed_start + n_seeds)
    parts = [sweep.map_chunks(_Chunk(model), seeds, workers, chunk_size, f"screen {model}", progress_every, scheduler,
                              shards) for model in models]
    return pd.concat(parts, ignore_index=True)


def rows_per_seed(models: Sequence[str]) -> dict[str, int]:
    """Argmax rows per seed (batch x frames x codevector groups): a seed's chances for a small gap."""
    out = {}
    for model in models:
        batch, frames, groups = family.argmax_rows(model)
        out[model] = batch * frames * groups
    return out


def screenable(models: Sequence[str]) -> tuple[list[str], list[str]]:
    """(models whose forward takes the argmax, models whose forward never calls the quantizer)."""
    called = {m: family.quantizer_is_called(m) for m in models}
    return [m for m in models if called[m]], [m for m in models if not called[m]]
