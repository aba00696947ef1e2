"""Module outputs compared between eager (hooks) and ORT (graph outputs added by module scope)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from exactness.compare.one_tensor import tensor_difference


def intermediate_table(eager_modules: dict[str, list[torch.Tensor]], produced: dict[str, np.ndarray],
                       intermediates: dict[str, str], named: dict[str, str] | None = None,
                       all_tensors: bool = True, labels: dict | None = None,
                       extra: Callable[[torch.Tensor, torch.Tensor], dict] | None = None) -> pd.DataFrame:
    """One row per module output present on both sides, in graph order (`depth`). A module that returns
    several tensors is matched with the one of the same shape as the graph value. `named` labels tensors of
    interest; with `all_tensors=False` only those are compared. `labels`: columns of the same value on
    every row, last. `extra(ort, eager)`: more columns per row (a study's own measures), after the difference."""
    named = named or {}
    rows = []
    for depth, (path, value_name) in enumerate(intermediates.items()):
        if path not in eager_modules or not (all_tensors or path in named):
            continue
        ort_value = torch.from_numpy(np.array(produced[value_name]))
        candidates = [t for t in eager_modules[path] if tuple(t.shape) == tuple(ort_value.shape)]
        if not candidates:
            continue
        difference = tensor_difference(ort_value.to(candidates[0].dtype), candidates[0])
        more = extra(ort_value.to(candidates[0].dtype), candidates[0]) if extra else {}
        rows.append({"tensor": path, "label": named.get(path, ""), "depth": depth, **difference, **more,
                     **(labels or {})})
    return pd.DataFrame(rows)
