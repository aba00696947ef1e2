"""The four `*ForPreTraining` classes that share the Gumbel quantizer's argmax, built exactly as the
transformers export test builds them.

A seed means one thing everywhere: inputs from `random.Random(seed)` drawn as the model tester draws them
(`floats_tensor` then `random_attention_mask`, row-major), weights from `torch.manual_seed(seed)` right
before `model_class(config)`, then eval mode and the "less flaky" settings (every norm eps 1.0). The plain
recipe, which any user can run with transformers alone:

    config = family.tester_config("Wav2Vec2ConformerForPreTraining")
    inputs = family.tester_inputs("Wav2Vec2ConformerForPreTraining", seed)
    torch.manual_seed(seed)
    model = family.build_model("Wav2Vec2ConformerForPreTraining", seed)   # == the three lines above + eval
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field

import numpy as np
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
        # UniSpeechRobustModelTest builds its tester with these three overrides.
        {**_COMMON, "conv_stride": (3, 3, 3), "feat_extract_norm": "layer", "do_stable_layer_norm": True},
        input_scale=1.0),
    "UniSpeechSatForPreTraining": TesterSpec(
        "UniSpeechSatForPreTraining", "UniSpeechSatConfig",
        {**_COMMON, **_MASKING, **_TDNN, "tdnn_kernel": (3, 3), "tdnn_dilation": (1, 1)},
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


def plain_recipe(model: str) -> str:
    """Self-contained transformers code that rebuilds `model` and its inputs for `seed`: what a user runs
    without this workbook (the notebook shows it and executes it)."""
    s = spec(model)
    kwargs = ", ".join(f"{k}={v!r}" for k, v in s.config.items())
    return f"""import random, torch, transformers
from transformers.testing_utils import set_config_for_less_flaky_test, set_model_for_less_flaky_test
rng = random.Random(seed)
values = [rng.random() * {s.input_scale!r} for _ in range({s.batch_size} * {s.seq_length})]
mask = [rng.randint(0, 1) for _ in range({s.batch_size} * {s.seq_length})]
input_values = torch.tensor(values, dtype=torch.float).view({s.batch_size}, {s.seq_length})
attention_mask = torch.tensor(mask).view({s.batch_size}, {s.seq_length}); attention_mask[:, -1] = 1
config = transformers.{s.config_class}({kwargs})
config.return_loss = False; set_config_for_less_flaky_test(config)
torch.manual_seed(seed)
model = transformers.{s.model_class}(config).eval(); set_model_for_less_flaky_test(model)
"""


def plain_recipe_matches(model: str, seed: int) -> dict[str, bool]:
    """Run `plain_recipe` as a user would paste it and compare with this workbook's builders."""
    plain = {"seed": seed}
    exec(plain_recipe(model), plain)
    rebuilt = build_model(model, seed)
    return {"weights": all(a.equal(b) for a, b in zip(plain["model"].state_dict().values(),
                                                      rebuilt.state_dict().values(), strict=True)),
            "inputs": plain["input_values"].equal(tester_inputs(model, seed)["input_values"])}


def tester_inputs_plain(model: str, seed: int) -> dict[str, torch.Tensor]:
    """`floats_tensor([batch, seq], scale)` then `random_attention_mask([batch, seq])`, from one
    `random.Random(seed)`, in the tester's order: the tester's own loops."""
    s = spec(model)
    rng = random.Random(seed)
    n = s.batch_size * s.seq_length
    values = [rng.random() * s.input_scale for _ in range(n)]
    mask = [rng.randint(0, 1) for _ in range(n)]
    return _as_inputs(s, torch.tensor(values, dtype=torch.float), torch.tensor(mask, dtype=torch.long))


def tester_inputs(model: str, seed: int) -> dict[str, torch.Tensor]:
    """The same tensors as `tester_inputs_plain`, drawn with numpy from a copy of the generator's state.

    CPython's `random()` takes two 32-bit Mersenne Twister words (a >> 5, b >> 6) and returns
    (a * 2**26 + b) / 2**53, which is how numpy's legacy `random_sample` makes its doubles; `randint(0, 1)`
    takes one word per try, keeps its top two bits and retries when they are 2 or 3. numpy's MT19937
    produces the same words from the same state.
    """
    s = spec(model)
    n = s.batch_size * s.seq_length
    twister = _numpy_twister(random.Random(seed))
    values = _input_values(s, twister)
    # Rejection sampling keeps about half the words. Nothing is drawn after the mask, so words drawn past
    # the n-th kept one need not be given back.
    mask = np.empty(0, dtype=np.int64)
    while mask.size < n:
        tries = twister.bit_generator.random_raw(2 * (n - mask.size) + 64) >> np.uint64(30)
        mask = np.concatenate([mask, tries[tries < 2].astype(np.int64)[: n - mask.size]])
    return _as_inputs(s, values, torch.from_numpy(mask))


def tester_input_values(model: str, seed: int) -> torch.Tensor:
    """`tester_inputs(model, seed)["input_values"]` without drawing the attention mask (drawn after it)."""
    s = spec(model)
    return _input_values(s, _numpy_twister(random.Random(seed))).view(s.batch_size, s.seq_length)


def _input_values(s: TesterSpec, twister: _Twister) -> torch.Tensor:
    values = twister.doubles.random_sample(s.batch_size * s.seq_length)
    return torch.from_numpy((values * s.input_scale).astype(np.float32))


@dataclass(frozen=True)
class _Twister:
    bit_generator: np.random.MT19937
    doubles: np.random.RandomState  # legacy doubles from `bit_generator`: CPython's `random()` formula


@functools.cache
def _reusable_twister() -> _Twister:
    """One per process: building one (seeding) costs more than the draws it serves."""
    bit_generator = np.random.MT19937(0)
    return _Twister(bit_generator, np.random.RandomState(bit_generator))


def _numpy_twister(rng: random.Random) -> _Twister:
    """numpy's Mersenne Twister put in `rng`'s exact state (used at once: the instance is reused). Through
    numpy's public `state` setter: writing the C struct directly saved 2.6% of a screened seed, too little
    for a trick that depends on numpy's memory layout."""
    internal = rng.getstate()[1]
    twister = _reusable_twister()
    twister.bit_generator.state = {"bit_generator": "MT19937", "state": {
        "key": np.array(internal[:-1], dtype=np.uint32), "pos": internal[-1]}}
    return twister


def _as_inputs(s: TesterSpec, values: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    attention_mask = mask.view(s.batch_size, s.seq_length).clone()
    attention_mask[:, -1] = 1  # the tester makes sure one position per row is attended
    return {"input_values": values.view(s.batch_size, s.seq_length), "attention_mask": attention_mask}


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


def quantizer_is_called(model: str) -> bool:
    """Whether the class's forward runs its quantizer at all (UniSpeechSat's, in transformers 5.23.0, does
    not: it returns no quantized states and no perplexity, so it has no argmax to flip)."""
    built = build_model(model, 0)
    calls = []
    handle = built.quantizer.weight_proj.register_forward_hook(lambda *a: calls.append(1))
    with torch.no_grad():
        built(**tester_inputs(model, 0))
    handle.remove()
    return bool(calls)


def argmax_rows(model: str) -> tuple[int, int, int]:
    """(batch, frames, groups): the shape of the quantizer's argmax rows for the tester's inputs."""
    s, config = spec(model), tester_config(model)
    length = s.seq_length
    for kernel, stride in zip(config.conv_kernel, config.conv_stride, strict=True):
        length = (length - kernel) // stride + 1
    return s.batch_size, length, config.num_codevector_groups
