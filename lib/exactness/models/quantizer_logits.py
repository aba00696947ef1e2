"""The quantizer's logits (the input of its argmax) for one seed, the plain way and the fast way.

The argmax sees only the conv feature extractor, the feature projection's layer norm and
`quantizer.weight_proj`. The fast path replays the constructor's random draws for just those tensors
(see rng_replay) and runs just those modules of one template model: the same module code on the same
shapes, so the logits are bit-identical to the full forward's (tests prove it on many seeds).

Fast path (`exactness.runtimes.speedup_paths`, switched off by `fast_paths: false`):
- replaces: `plain_logits`, a whole model built and run for each screened seed;
- exact because: the same weights (replayed draws) go through the same module code on the same shapes;
- verified by: tests/models/test_quantizer_logits.py on many seeds, `near_tie_screen.replay_proof` in every run,
  and tests/studies/near_tie/test_near_tie_paths.py (the screen both ways, equal).
"""

from __future__ import annotations

import contextlib
import copy

import torch

from exactness.models import wav2vec2_family as family
from exactness.models.seed_rebuild import Rebuilder
from exactness.runtimes.sides import Device, Side


def _as_side(side: Side | None):
    return side.applied() if side is not None else contextlib.nullcontext()


def plain_logits(model: str, seed: int, side: Side | None = None, double: bool = False) -> torch.Tensor:
    """Build the whole model, run the whole forward (as `side` computes: its device and precision; eager CPU
    fp32 when None; in float64 with `double`), and catch `weight_proj`'s output: (rows, codes), on the CPU."""
    built = family.build_model(model, seed)
    inputs = family.tester_inputs(model, seed)
    if double:
        built, inputs = built.double(), {k: v.double() if v.is_floating_point() else v for k, v in inputs.items()}
    if side is not None and side.device is Device.CUDA:
        built, inputs = built.cuda(), {k: v.cuda() for k, v in inputs.items()}
    caught = {}
    handle = built.quantizer.weight_proj.register_forward_hook(lambda m, i, o: caught.setdefault("logits", o))
    with torch.no_grad(), _as_side(side):
        built(**inputs)
    handle.remove()
    if "logits" not in caught:
        raise RuntimeError(f"{model}'s forward never calls its quantizer: it has no argmax to screen")
    return caught["logits"].reshape(-1, built.config.num_codevectors_per_group).cpu()


class FastLogits:
    """Per-seed logits without building the model. One instance per model class (and per process)."""

    def __init__(self, model: str):
        self.model = model
        modules = family.argmax_inputs(model)  # feature extractor, its layer norm, weight_proj
        self.rebuild = Rebuilder(model, modules)
        self.template, self.plan = self.rebuild.template, self.rebuild.plan
        found = dict(self.template.named_modules())
        self.modules = tuple(found[path] for path in modules)
        self.codes_per_row = self.template.config.num_codevectors_per_group
        self._cuda: tuple[torch.nn.Module, ...] | None = None

    @torch.no_grad()
    def __call__(self, seed: int, side: Side | None = None) -> torch.Tensor:
        """The seed's logits as `side` computes them (eager CPU fp32 when None), on the CPU."""
        self.rebuild(seed)
        inputs = family.tester_input_values(self.model, seed)
        modules = self.modules
        if side is not None and side.device is Device.CUDA:
            modules, inputs = self._on_cuda(), inputs.cuda()
        extractor, layer_norm, weight_proj = modules
        with _as_side(side):
            features = extractor(inputs).transpose(1, 2)
            logits = weight_proj(layer_norm(features))
        return logits.reshape(-1, self.codes_per_row).cpu()

    def _on_cuda(self) -> tuple[torch.nn.Module, ...]:
        """CUDA copies of the three modules, given the seed's weights just rebuilt on the CPU."""
        if self._cuda is None:
            self._cuda = tuple(copy.deepcopy(m).cuda() for m in self.modules)
        for cpu, cuda in zip(self.modules, self._cuda, strict=True):
            for name, value in cpu.state_dict().items():
                cuda.state_dict()[name].copy_(value)
        return self._cuda
