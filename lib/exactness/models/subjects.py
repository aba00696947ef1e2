"""What a per-tensor study can compare: any wav2vec2-family class of the near-tie study, or a DAC encoder
(`DacEncoder-44khz`, `DacEncoder-tiny`, ...), each rebuilt from a seed with its inputs."""

from __future__ import annotations

import torch

from exactness.models import dac
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
    return list(family.MODELS) + [DAC_PREFIX + v for v in dac.VARIANT_CONFIGS]


def check(name: str) -> None:
    if name.startswith(DAC_PREFIX):
        dac.config(name[len(DAC_PREFIX):])
    else:
        family.spec(name)


def build(name: str, seed: int) -> torch.nn.Module:
    if name.startswith(DAC_PREFIX):
        plain = dac.template(name[len(DAC_PREFIX):], seed, DAC_INIT)
        return DacEncoder(dac.build_variant(plain, "folded_fp32")).eval()
    return family.build_model(name, seed)


def inputs(name: str, seed: int) -> dict[str, torch.Tensor]:
    if name.startswith(DAC_PREFIX):
        return {"input_values": dac.audio(name[len(DAC_PREFIX):], DAC_SECONDS, seed)}
    return family.tester_inputs(name, seed)


def named_tensors(name: str, built: torch.nn.Module) -> dict[str, str]:
    """module path -> label of the tensors a study names: the seed's three for the wav2vec2 family, the
    first and last convolution and the first block for a DAC encoder."""
    if name.startswith(DAC_PREFIX):
        return {"encoder.conv1": "conv1", "encoder.block.0": "block0", "encoder.conv2": "encoder_output"}
    return family.named_tensors(built)
