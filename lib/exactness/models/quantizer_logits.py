"""The quantizer's logits (the input of its argmax) for one seed, the plain way and the fast way.

The argmax sees only the conv feature extractor, the feature projection's layer norm and
`quantizer.weight_proj`. The fast path replays the constructor's random draws for just those tensors
(see rng_replay) and runs just those modules of one template model: the same module code on the same
shapes, so the logits are bit-identical to the full forward's (tests prove it on many seeds).
"""

from __future__ import annotations

import torch

from exactness.models import wav2vec2_family as family
from exactness.models.rng_replay import make_plan


def plain_logits(model: str, seed: int) -> torch.Tensor:
    """Build the whole model, run the whole forward, and catch `weight_proj`'s output: (rows, codes)."""
    built = family.build_model(model, seed)
    caught = {}
    handle = built.quantizer.weight_proj.register_forward_hook(lambda m, i, o: caught.setdefault("logits", o))
    with torch.no_grad():
        built(**family.tester_inputs(model, seed))
    handle.remove()
    if "logits" not in caught:
        raise RuntimeError(f"{model}'s forward never calls its quantizer: it has no argmax to screen")
    return caught["logits"].reshape(-1, built.config.num_codevectors_per_group)


class FastLogits:
    """Per-seed logits without building the model. One instance per model class (and per process)."""

    def __init__(self, model: str):
        self.model = model
        self.config = family.tester_config(model)
        self.template = family.build_model(model, 0, self.config)
        body = family.base_model(self.template)
        prefix = self.template.base_model_prefix
        self.modules = (body.feature_extractor, body.feature_projection.layer_norm, self.template.quantizer.weight_proj)
        needed = [f"{prefix}.feature_extractor.{n}" for n, _ in body.feature_extractor.named_parameters()]
        needed += [f"{prefix}.feature_projection.layer_norm.{n}" for n, _ in
                   body.feature_projection.layer_norm.named_parameters()]
        needed += [f"quantizer.weight_proj.{n}" for n, _ in self.template.quantizer.weight_proj.named_parameters()]
        self.plan = make_plan(lambda: family.construct(model, self.config), needed)
        self._targets = dict(self.template.named_parameters())

    @torch.no_grad()
    def __call__(self, seed: int) -> torch.Tensor:
        for name, value in self.plan.tensors(seed).items():
            self._targets[name].copy_(value)
        inputs = family.tester_input_values(self.model, seed)
        extractor, layer_norm, weight_proj = self.modules
        features = extractor(inputs).transpose(1, 2)
        logits = weight_proj(layer_norm(features))
        return logits.reshape(-1, self.config.num_codevectors_per_group)
