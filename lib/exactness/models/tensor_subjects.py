"""What a per-tensor study can compare: any wav2vec2-family class of the near-tie study, a DAC encoder
(`DacEncoder-44khz`, `DacEncoder-tiny`, ...), or any model `exactness.models.sources` names (a registered class,
a class of a transformers checkout's testers, your own `module:function` builder), each rebuilt from a seed with
its inputs."""

from __future__ import annotations

import torch

from exactness.models import dac, sources
from exactness.models import wav2vec2_family as family

DAC_PREFIX = "DacEncoder-"
DAC_SECONDS = 0.25  # of audio per draw: the encoder's cost grows with it, its noise does not
DAC_INIT = "variance_preserving"  # the default init barely moves activations (see the propagation study)


class DacEncoder(torch.nn.Module):
    """The encoder of a DAC model (weight norm folded in float32, as transformers runs it) as its own module,
    so it exports and is hooked like any model."""

    base_model_prefix = "encoder"

    def __init__(self, model):
        super().__init__()
        self.encoder = model.encoder

    def forward(self, input_values):
        return self.encoder(input_values)


def names() -> list[str]:
    """The study's own subjects (any name `sources` resolves is accepted besides)."""
    return list(family.MODELS) + [DAC_PREFIX + v for v in dac.VARIANT_CONFIGS]


def _own(name: str) -> bool:
    return name.startswith(DAC_PREFIX) or name in family.MODELS


def check(name: str, transformers_tests: str = "") -> None:
    if name.startswith(DAC_PREFIX):
        dac.config(name[len(DAC_PREFIX):])
    elif name not in family.MODELS:
        sources.resolve(name, transformers_tests)


def make(name: str, seed: int, transformers_tests: str = "") -> sources.Made:
    """The seed's model (eval mode) and its inputs."""
    if not _own(name):
        return sources.make(name, seed, transformers_tests)
    return sources.Made(build(name, seed), inputs(name, seed))


def build(name: str, seed: int, transformers_tests: str = "") -> torch.nn.Module:
    if name.startswith(DAC_PREFIX):
        plain = dac.template(name[len(DAC_PREFIX):], seed, DAC_INIT)
        return DacEncoder(dac.build_variant(plain, "folded_fp32")).eval()
    if name in family.MODELS:
        return family.build_model(name, seed)
    return sources.make(name, seed, transformers_tests).model


def inputs(name: str, seed: int, transformers_tests: str = "") -> dict[str, torch.Tensor]:
    if name.startswith(DAC_PREFIX):
        return {"input_values": dac.audio(name[len(DAC_PREFIX):], DAC_SECONDS, seed)}
    if name in family.MODELS:
        return family.tester_inputs(name, seed)
    return sources.make(name, seed, transformers_tests).inputs


def named_tensors(name: str, built: torch.nn.Module) -> dict[str, str]:
    """module path -> label of the tensors a study names: the seed's three for the wav2vec2 family, the
    first and last convolution and the first block for a DAC encoder; none for another model (every module's
    output is still compared)."""
    if name.startswith(DAC_PREFIX):
        return {"encoder.conv1": "conv1", "encoder.block.0": "block0", "encoder.conv2": "encoder_output"}
    if name in family.MODELS:
        return family.named_tensors(built)
    return {}
