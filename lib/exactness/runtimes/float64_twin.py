"""`copy.deepcopy(model).double()` for every checked seed, at the cost of copying its tensors.

The float64 reference runs a float64 copy of the seed's model. Deep-copying a tiny detector costs more than its
float64 forward (a third of a check). So each process keeps one float64 twin per model structure and writes the
seed's parameters and buffers into it (float32 to float64 is exact).

Fast path (`exactness.runtimes.speedup_paths`, switched off by `fast_paths: false`):
- replaces: `copy.deepcopy(model).double()` per seed;
- exact because: a model of the same class and the same named tensors differs from another seed's only in
  those tensors' values, each written into the twin as `.double()` writes it;
- verified by: the first reuse of a twin in each process, against a deep copy of the same seed (every
  parameter and buffer, and the forward's outputs, bit for bit; else deep copies from then on),
  tests/runtimes/test_float64_twin.py.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable

import torch

from exactness.compare.bits import bit_identical


def _tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return dict(model.named_parameters()) | dict(model.named_buffers())


def _structure(model: torch.nn.Module) -> tuple:
    """What must be equal for a twin to serve another model: its class, config and named tensors' layout."""
    config = getattr(model, "config", None)
    return (type(model), config.to_json_string(use_diff=False) if hasattr(config, "to_json_string") else "",
            tuple((name, tuple(t.shape), t.dtype) for name, t in _tensors(model).items()))


class Float64Twins:
    """`wide(model, run)`: `run(float64 copy of model)`, the copy a kept twin where one is verified."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self._lock = threading.Lock()
        self._twin: tuple[tuple, torch.nn.Module] | None = None
        self.verified: set[tuple] = set()
        self.refused: set[tuple] = set()

    def wide(self, model: torch.nn.Module, run: Callable[[torch.nn.Module], object]):
        with self._lock:  # one twin per process: one seed at a time (a Dask worker may run threads)
            return self._wide(model, run)

    def _wide(self, model: torch.nn.Module, run: Callable[[torch.nn.Module], object]):
        key = _structure(model)
        if not self.enabled or key in self.refused:
            return run(copy.deepcopy(model).double())
        if self._twin is None or self._twin[0] != key:
            self._twin = (key, copy.deepcopy(model).double())  # one twin at a time: a sweep runs one class
            return run(self._twin[1])
        twin = self._twin[1]
        with torch.no_grad():
            mine = _tensors(model)
            for name, tensor in _tensors(twin).items():
                tensor.copy_(mine[name])
        got = run(twin)
        if key in self.verified:
            return got
        plain = copy.deepcopy(model).double()
        expected = run(plain)
        if bit_identical(_tensors(twin), _tensors(plain)) and bit_identical(got, expected):
            self.verified.add(key)
            return got
        self.refused.add(key)
        self._twin = None
        return expected

