"""The registry checked against the real testers: each entry built both ways, from the registry and from a
transformers checkout's own tester (`exactness.models.sources`), and its config, inputs and weights compared.

Where they differ, the tester is right and the registry entry is corrected. A checkout is needed (none exists in
this project's CI): `tests/models/test_registry_check.py` runs every entry on the checkout named by
`EXACTNESS_TRANSFORMERS_TESTS`, and the mechanism on a small tester of its own in transformers' layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import torch

from exactness.models import sources


@dataclass(frozen=True)
class Checked:
    """One registry entry checked against a tester that imports under the pinned transformers: the tester file
    and commit (as the entry cites it), what had to be adapted for it to import, and what was compared."""

    model: str
    tester: str  # class_registry.TESTS form: "huggingface/transformers tests/models/<file>@<commit>"
    adapted: str = ""  # "" when the file imports as stored
    seeds: tuple[int, ...] = (0, 1, 2)
    transformers: str = "5.23.0"


# The checks this registry was corrected by (the testers placed in a 5.23.0 source distribution's tests/; config,
# inputs and weights equal on every seed listed, after UniSpeech's do_stable_layer_norm was corrected to False).
CHECKED = (
    Checked("UniSpeechForPreTraining",
            "huggingface/transformers tests/models/unispeech/test_modeling_unispeech.py@"
            "040e1a7e4bb4f48ff62dfbbb1f6f8eff23e894ac"),
    Checked("RTDetrForObjectDetection",
            "huggingface/transformers tests/models/rt_detr/test_modeling_rt_detr.py@"
            "080c858c90241a5049212969a9aacf310a002a0c"),
    Checked("BitModel", "huggingface/transformers tests/models/bit/test_modeling_bit.py@"
                        "0e97420c9957149b80ff57632148e8ce80203b48",
            adapted="cached_property imported from functools (5.23.0's transformers.utils has none)"),
)

# Config keys that say how and where a config was made, not what it builds.
PROVENANCE = frozenset({"transformers_version", "_name_or_path", "_commit_hash"})


class Part(Enum):
    CONFIG = "config"
    INPUTS = "inputs"
    WEIGHTS = "weights"


@dataclass(frozen=True)
class Difference:
    model: str
    seed: int
    part: Part
    key: str  # a config key (dotted into nested configs), an input's name, or a parameter's
    detail: str  # registry against tester, in words

    def __str__(self) -> str:
        return f"{self.model} seed {self.seed}: {self.part.value} {self.key}: {self.detail}"


def _flat(value, prefix: str = "") -> dict:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key not in PROVENANCE:
                out |= _flat(item, f"{prefix}{key}.")
        return out
    return {prefix[:-1]: value}


def _config_differences(name: str, seed: int, ours, theirs) -> list[Difference]:
    mine, real = _flat(ours.to_dict()), _flat(theirs.to_dict())
    return [Difference(name, seed, Part.CONFIG, key, f"registry {mine.get(key, 'absent')!r}, tester "
                                                     f"{real.get(key, 'absent')!r}")
            for key in sorted(set(mine) | set(real)) if mine.get(key, "absent") != real.get(key, "absent")]


def _tensor_differences(name: str, seed: int, part: Part, ours: dict, theirs: dict) -> list[Difference]:
    found = []
    for key in sorted(set(ours) | set(theirs)):
        if key not in theirs or key not in ours:
            found.append(Difference(name, seed, part, key, "registry only" if key in ours else "tester only"))
            continue
        a, b = ours[key].detach(), theirs[key].detach()
        if a.shape != b.shape or a.dtype != b.dtype:
            found.append(Difference(name, seed, part, key, f"registry {a.dtype} {tuple(a.shape)}, tester {b.dtype} "
                                                           f"{tuple(b.shape)}"))
        elif not torch.equal(a, b):
            differ = int((a != b).sum()) if a.dtype != torch.bool else int((a ^ b).sum())
            found.append(Difference(name, seed, part, key, f"{differ:,} of {a.numel():,} elements differ"))
    return found


def compare(name: str, transformers_tests: str, seeds=(0, 1, 2)) -> list[Difference]:
    """Every difference between the registry's build of `name` and its checkout tester's, on each seed."""
    ours, theirs = sources.from_registry(name), sources.from_checkout(name, transformers_tests)
    found = []
    for seed in seeds:
        a, b = ours.make(seed), theirs.make(seed)
        found += _config_differences(name, seed, a.model.config, b.model.config)
        found += _tensor_differences(name, seed, Part.INPUTS, a.inputs, b.inputs)
        found += _tensor_differences(name, seed, Part.WEIGHTS, dict(a.model.state_dict()), dict(b.model.state_dict()))
    return found
