"""Screen: for every seed, the smallest top-1/top-2 gap over all argmax rows, and where it is.

The gap is measured two ways. `min_gap` is the smallest gap in logit units (and `min_gap_ulps` that row's gap
in ulps of its top logit); `smallest_gap_ulps` is the smallest gap in ulps of each row's own top logit, over
all rows: the comparable axis across classes whose logits differ in scale (a 1.5e-5 gap is 126 ulps of a top
logit near 1.5 but 31 ulps of one near 6). The two minima can sit in different rows."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import pandas as pd
import torch

from exactness.compare.tie_aware import top_two
from exactness.compare.ulp import ulp
from exactness.models import wav2vec2_family as family
from exactness.models.quantizer_logits import FastLogits, plain_logits
from exactness.runtimes import worker_state
from exactness.runtimes.speedup_paths import ScreenPath
from exactness.workbook import sweep


def _fast(model: str) -> FastLogits:
    return worker_state.current().made_by(FastLogits, model)  # one per model class and process

SCREEN_COLUMNS = ["model", "seed", "min_gap", "min_gap_ulps", "batch", "frame", "group", "top_logit", "n_exact_ties",
                  "smallest_gap_ulps", "screen_path"]


def logits_source(model: str, fast_paths: bool = True) -> tuple[Callable[[int], torch.Tensor], ScreenPath]:
    """seed -> the quantizer's logits: replayed (fast) or from a plain build and forward, and which it is."""
    if fast_paths:
        return _fast(model), ScreenPath.REPLAY
    return functools.partial(plain_logits, model), ScreenPath.FORWARD


def screen_seeds(model: str, seeds: Sequence[int], fast_paths: bool = True) -> pd.DataFrame:
    logits, path = logits_source(model, fast_paths)
    batch, frames, groups = family.argmax_rows(model)
    rows = []
    for seed in seeds:
        gaps = top_two(logits(int(seed)))
        row = gaps.min_row
        frame_index, group = divmod(row, groups)
        b, f = divmod(frame_index, frames)
        gap, top = gaps.gap[row], gaps.top1[row]
        rows.append((model, int(seed), float(gap), float(gap / ulp(top)), b, f, group, float(top),
                     int(torch.count_nonzero(gaps.gap == 0)), float(gaps.gap_ulps.min()), path.value))
    return pd.DataFrame(rows, columns=SCREEN_COLUMNS)


class _Chunk:
    """Picklable `chunk -> table` for worker processes."""

    def __init__(self, model: str, fast_paths: bool = True):
        self.model, self.fast_paths = model, fast_paths

    def __call__(self, seeds: Sequence[int]) -> pd.DataFrame:
        return screen_seeds(self.model, seeds, self.fast_paths)


def screen(models: Sequence[str], seed_start: int, n_seeds: int, *, workers: int = 1, chunk_size: int = 250,
           progress_every: float = 10.0, scheduler: str = "", shards=None, fast_paths: bool = True) -> pd.DataFrame:
    """`scheduler`: the address of an existing Dask cluster; empty runs on `workers` local processes.
    `shards`: a ShardStore that keeps finished chunks (and supplies them again on resume). `fast_paths=False`:
    each seed's model built and run whole instead of replaying the draws the argmax depends on."""
    seeds = range(seed_start, seed_start + n_seeds)
    parts = [sweep.map_chunks(_Chunk(model, fast_paths), seeds, workers, chunk_size, f"screen {model}",
                              progress_every, scheduler, shards) for model in models]
    return pd.concat(parts, ignore_index=True)


def replay_proof(models: Sequence[str], seeds: Sequence[int]) -> pd.DataFrame:
    """Per (model, seed): whether the replayed logits the fast screen reads equal a plain build's forward
    bit for bit. Raises, naming the pairs that differ, before a screen is trusted."""
    proof = pd.DataFrame([{"model": m, "seed": int(s), "bit_identical": bool((_fast(m)(int(s)) ==
                                                                               plain_logits(m, int(s))).all())}
                          for m in models for s in seeds], columns=["model", "seed", "bit_identical"])
    wrong = proof[~proof.bit_identical.astype(bool)]
    if len(wrong):
        raise AssertionError("the replayed logits differ from a plain build's forward for (model, seed) "
                             + ", ".join(f"({r.model}, {r.seed})" for r in wrong.itertuples()))
    return proof


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
