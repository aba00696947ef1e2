"""`build_model(model, seed)` for many seeds at the cost of replaying the constructor's random draws: the
wav2vec2 family's (`FAMILY`) and the registry's classes (`REGISTRY`, `rebuilder`).

Constructing a tiny transformers model is mostly Python (16-33 ms for the wav2vec2 family, 20-160 ms for a
detector or a multimodal model); its draws take a millisecond or a few. A `Rebuilder` builds one template model,
records the constructor's draws once (see rng_replay), and for each seed writes the replayed values into every
parameter and buffer of the template. Weight norm's magnitude is not drawn: it is computed from the drawn
direction when the parametrization is registered, so the plan recomputes it the same way.
tests/models/test_seed_rebuild.py proves the state and the forward bit-identical to a plain build.

Fast path (`exactness.runtimes.speedup_paths`, switched off by `fast_paths: false`; a check row's `build_path`):
- replaces: `build_model(model, seed)` for every checked seed after a pool's first two;
- exact because: every parameter and buffer gets the value the constructor would draw (`rng_replay`);
- verified by: tests/models/test_seed_rebuild.py (state and forward bit for bit), test_near_tie_paths.py; a
  registry class by `rebuilder` itself, against plain builds of two seeds before it is used (a class whose
  constructor the replay cannot follow, or whose rebuilt state differs, builds plainly, and says why).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn.utils import parametrize

from exactness import compat
from exactness.models import class_registry
from exactness.models import wav2vec2_family as family
from exactness.models.rng_replay import ReplayError, make_plan


def weight_norm_magnitudes(model: torch.nn.Module) -> dict[str, tuple[str, Callable]]:
    """name of each weight norm's magnitude -> (its direction's name, the function registration applied)."""
    out = {}
    for path, module in model.named_modules():
        if not parametrize.is_parametrized(module):
            continue
        for name, chain in module.parametrizations.items():
            for parametrization in chain:
                if isinstance(parametrization, compat.weight_norm_parametrization()):
                    base = f"{path}.parametrizations.{name}"
                    out[f"{base}.original0"] = (f"{base}.original1", functools.partial(
                        torch.norm_except_dim, pow=2, dim=parametrization.dim))
    return out


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return dict(model.named_parameters()) | dict(model.named_buffers())


@dataclass(frozen=True)
class Builders:
    """Where a class's tester config, its seeded build and its bare constructor come from."""

    config: Callable[[str], Any]
    build: Callable[..., torch.nn.Module]  # (name, seed, config) -> the seed's model, as a plain build makes it
    construct: Callable[[str, Any], torch.nn.Module]  # (name, config) -> a model, drawing from the global RNG


FAMILY = Builders(family.tester_config, family.build_model, family.construct)
REGISTRY = Builders(class_registry.tester_config, class_registry.build, class_registry.construct)


class Rebuilder:
    """Returns the same template module for every seed, holding that seed's weights: use it before the
    next call, and never keep it as a seed's own model. `modules`: only the parameters and buffers under
    these module paths get the seed's values (the rest keep the template's); None: all of them."""

    def __init__(self, model: str, modules: list[str] | None = None, builders: Builders = FAMILY):
        self.model, self.builders = model, builders
        config = builders.config(model)
        self.template = builders.build(model, 0, config)
        state = _state(self.template)
        self._targets = {name: tensor for name, tensor in state.items()
                         if modules is None or any(name.startswith(f"{m}.") for m in modules)}
        self.plan = make_plan(lambda: builders.construct(model, config), list(self._targets),
                              derived=weight_norm_magnitudes(self.template))

    @torch.no_grad()
    def __call__(self, seed: int) -> torch.nn.Module:
        for name, value in self.plan.tensors(seed).items():
            self._targets[name].copy_(value)
        return self.template

    def differs(self, seeds: tuple[int, ...] = (1, 2)) -> str:
        """"" when the rebuilt state equals a plain build's on `seeds`, else the first difference."""
        for seed in seeds:
            plain = _state(self.builders.build(self.model, seed, self.builders.config(self.model)))
            rebuilt = _state(self(seed))
            for key, value in plain.items():
                if not torch.equal(value, rebuilt[key]):
                    return f"{key} differs from a plain build on seed {seed}"
        return ""


def rebuilder(name: str, builders: Builders = REGISTRY) -> tuple[Rebuilder | None, str]:
    """A rebuilder for `name` verified against plain builds (`Rebuilder.differs`), or (None, why the class builds
    plainly: a constructor whose draws the replay cannot follow, or a rebuilt state that differs)."""
    try:
        built = Rebuilder(name, builders=builders)
    except ReplayError as error:
        return None, f"the constructor's draws cannot be replayed: {error}"
    difference = built.differs()
    return (None, difference) if difference else (built, "")
