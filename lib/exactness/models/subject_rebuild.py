"""`class_registry.build(name, seed)` for many seeds at the cost of replaying the constructor's random draws.

Constructing a tiny detector or multimodal model is 20-160 ms of Python; its draws take a few. As the near-tie
study's `seed_rebuild.Rebuilder` does for the wav2vec2 family, a `SubjectRebuilder` builds one template, plans
the replay of the constructor's draws once (`rng_replay`), and for each seed writes the replayed values into
every parameter and buffer of the template.

- replaces: `class_registry.build(name, seed)` for every seed a sweep builds after the first;
- exact because: every parameter and buffer gets the value the constructor draws for that seed;
- verified by: `SubjectRebuilder.verified`, which compares the rebuilt state with plain builds of two seeds bit
  for bit before the rebuilder is used; a class whose constructor the replay cannot follow (a tensor that is
  not one draw, nor seed-independent) or whose rebuilt state differs builds plainly, and says why.
"""

from __future__ import annotations

import torch

from exactness.models import class_registry
from exactness.models.rng_replay import ReplayError, make_plan
from exactness.models.seed_rebuild import weight_norm_magnitudes


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return dict(model.named_parameters()) | dict(model.named_buffers())


class SubjectRebuilder:
    """Returns the same template module for every seed, holding that seed's weights: use it before the next
    call, and never keep it as a seed's own model."""

    def __init__(self, name: str, check_seeds: tuple[int, int] = (1, 2)):
        self.name = name
        config = class_registry.tester_config(name)
        self.template = class_registry.build(name, 0, config)
        self._targets = _state(self.template)
        self.plan = make_plan(lambda: class_registry.construct(name, config), list(self._targets),
                              derived=weight_norm_magnitudes(self.template))
        self.check_seeds = check_seeds

    @torch.no_grad()
    def __call__(self, seed: int) -> torch.nn.Module:
        for name, value in self.plan.tensors(seed).items():
            self._targets[name].copy_(value)
        return self.template

    def differs(self) -> str:
        """"" when the rebuilt state equals a plain build's on the check seeds, else the first difference."""
        for seed in self.check_seeds:
            plain = _state(class_registry.build(self.name, seed))
            rebuilt = _state(self(seed))
            for key, value in plain.items():
                if not torch.equal(value, rebuilt[key]):
                    return f"{key} differs from a plain build on seed {seed}"
        return ""


def rebuilder(name: str) -> tuple[SubjectRebuilder | None, str]:
    """A verified rebuilder for `name`, or (None, why the class builds plainly)."""
    try:
        built = SubjectRebuilder(name)
    except ReplayError as error:
        return None, f"the constructor's draws cannot be replayed: {error}"
    difference = built.differs()
    return (None, difference) if difference else (built, "")
