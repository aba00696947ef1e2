"""What each of the four `*ForPreTraining` classes is, as its transformers tester configures it, and how a
model is built from a seed: config, construction in eval mode with the less-flaky settings, the named
tensors the seed compares, and the shape of the quantizer's argmax rows."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import transformers
from transformers.testing_utils import set_config_for_less_flaky_test, set_model_for_less_flaky_test

# Shared by the four testers (tests/models/<name>/test_modeling_<name>.py in transformers).
_COMMON = dict(
    hidden_size=16, feat_extract_norm="group", feat_extract_dropout=0.0, feat_extract_activation="gelu",
    conv_dim=(32, 32, 32), conv_stride=(4, 4, 4), conv_kernel=(8, 8, 8), conv_bias=False,
    num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, num_hidden_layers=2, num_attention_heads=2,
    hidden_dropout_prob=0.1, intermediate_size=20, layer_norm_eps=1e-5, hidden_act="gelu",
    initializer_range=0.02, vocab_size=32, do_stable_layer_norm=False,
)
_MASKING = dict(mask_time_prob=0.5, mask_time_length=2)
_TDNN = dict(tdnn_dim=(32, 32), xvector_output_dim=32)


@dataclass(frozen=True)
class TesterSpec:
    """One model class as its transformers tester configures it."""

    model_class: str
    config_class: str
    config: dict
    input_scale: float  # floats_tensor(..., scale): input values are uniform in [0, scale)
    batch_size: int = 13
    seq_length: int = 1024
    notes: list[str] = field(default_factory=list)


SPECS = {
    "Wav2Vec2ForPreTraining": TesterSpec(
        "Wav2Vec2ForPreTraining", "Wav2Vec2Config",
        {**_COMMON, **_MASKING, **_TDNN, "num_adapter_layers": 1, "adapter_stride": 2,
         "tdnn_kernel": (5, 3), "tdnn_dilation": (1, 2)},
        input_scale=1.0),
    "Wav2Vec2ConformerForPreTraining": TesterSpec(
        "Wav2Vec2ConformerForPreTraining", "Wav2Vec2ConformerConfig",
        {**_COMMON, **_MASKING, **_TDNN, "num_adapter_layers": 1, "adapter_stride": 2,
         "tdnn_kernel": (5, 3), "tdnn_dilation": (1, 2), "position_embeddings_type": "relative"},
        input_scale=32.0),  # the conformer tester passes vocab_size as the scale
    "UniSpeechForPreTraining": TesterSpec(
        "UniSpeechForPreTraining", "UniSpeechConfig",
        # UniSpeechRobustModelTest's setUp passes conv_stride, feat_extract_norm and do_stable_layer_norm=True to
        # its tester, whose get_config() never forwards do_stable_layer_norm: the config keeps False (checked
        # against tests/models/unispeech/test_modeling_unispeech.py as SOURCES names it)
        {**_COMMON, "conv_stride": (3, 3, 3), "feat_extract_norm": "layer"},
        input_scale=1.0),
    "UniSpeechSatForPreTraining": TesterSpec(
        "UniSpeechSatForPreTraining", "UniSpeechSatConfig",
        # its tester builds four hidden layers where the other three build two
        {**_COMMON, **_MASKING, **_TDNN, "num_hidden_layers": 4, "tdnn_kernel": (3, 3), "tdnn_dilation": (1, 1)},
        input_scale=1.0),
}
MODELS = tuple(SPECS)


class UnknownModelError(KeyError):
    def __str__(self) -> str:
        return f"unknown model {self.args[0]!r}; known models: {', '.join(MODELS)}"


def spec(model: str) -> TesterSpec:
    if model not in SPECS:
        raise UnknownModelError(model)
    return SPECS[model]


def tester_config(model: str):
    s = spec(model)
    config = getattr(transformers, s.config_class)(**s.config)
    config.return_loss = False  # the export test turns the loss off
    set_config_for_less_flaky_test(config)
    return config


def construct(model: str, config=None):
    """`model_class(config)` in eval mode with the less-flaky settings, drawing from the current RNG state."""
    config = config if config is not None else tester_config(model)
    built = getattr(transformers, spec(model).model_class)(config).eval()
    set_model_for_less_flaky_test(built)
    return built


def build_model(model: str, seed: int, config=None):
    torch.manual_seed(seed)
    return construct(model, config)


def base_model(model: torch.nn.Module) -> torch.nn.Module:
    """The encoder body (`wav2vec2`, `wav2vec2_conformer`, `unispeech`, ...) of a `*ForPreTraining` model."""
    return getattr(model, model.base_model_prefix)


# The three tensors seed 000 (section 3) names, by module path ({base}: the encoder body's attribute).
# The outputs the quantizer's argmax reaches: the codevectors chosen feed project_q, and the perplexity counts the
# chosen codes. projected_states never reads a code. (The discrete-ops scan of an exported graph finds the same:
# tests/models/test_wav2vec2_family_reach.py.)
CODE_OUTPUTS = ("projected_quantized_states", "codevector_perplexity")

NAMED_TENSORS = {"conv_features": "{base}.feature_extractor",
                 "extract_features": "{base}.feature_projection.layer_norm",
                 "logits": "quantizer.weight_proj"}


def named_tensors(model: torch.nn.Module) -> dict[str, str]:
    """module path -> label of the seed's three named tensors, for a built model."""
    return {path.format(base=model.base_model_prefix): label for label, path in NAMED_TENSORS.items()}


def argmax_inputs(model: str) -> list[str]:
    """The module paths of the seed's three named tensors, in forward order: all the argmax depends on
    (the feature extractor, the feature projection's layer norm, `quantizer.weight_proj`)."""
    prefix = getattr(transformers, spec(model).model_class).base_model_prefix
    return [path.format(base=prefix) for path in NAMED_TENSORS.values()]


def check_exposed(model: str) -> frozenset[str]:
    """The intermediates a near-tie check reads from ORT: the seed's three named tensors (the logits among
    them) and the argmax's choices."""
    return frozenset([*argmax_inputs(model), "quantizer.argmax"])


def argmax_rows(model: str) -> tuple[int, int, int]:
    """(batch, frames, groups): the shape of the quantizer's argmax rows for the tester's inputs."""
    s, config = spec(model), tester_config(model)
    length = s.seq_length
    for kernel, stride in zip(config.conv_kernel, config.conv_stride, strict=True):
        length = (length - kernel) // stride + 1
    return s.batch_size, length, config.num_codevector_groups
