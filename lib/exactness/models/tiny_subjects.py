"""Any transformers class as its model tester builds it: a tiny config and seeded inputs, one entry each.

A seed means what it means everywhere in this workbook: inputs drawn from `random.Random(seed)` in the
tester's order (`ids_tensor`, `random_attention_mask`, `floats_tensor`, element by element, row-major),
weights from `torch.manual_seed(seed)` right before `model_class(config)`, eval mode, and the export test's
"less flaky" settings. The testers' values come from the transformers repository's
`tests/models/<name>/test_modeling_<name>.py` (the installed package has no tests); each entry names the
file and commit it was read from.

This module imports neither torch nor transformers: the command line checks a run's `models` against
`NAMES` before anything heavy loads. To add a class, add one `Subject` to `SUBJECTS` (see the README).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TESTS = "huggingface/transformers tests/models/{}@{}"


@dataclass(frozen=True)
class Nested:
    """A config inside a config (a detector's backbone), built from its class name and arguments."""

    config_class: str
    kwargs: dict


@dataclass(frozen=True)
class Draw:
    """One tensor the tester draws, in order. kind: "ids" (`ids_tensor(shape, vocab) + offset`), "mask"
    (`random_attention_mask(shape)`: ids below 2, last column 1), "floats" (`floats_tensor(shape, scale)`),
    "ones" (`torch.ones(shape)`, a pixel mask: nothing is drawn). `name` None: drawn (it moves the generator)
    but not passed to the model."""

    kind: str
    name: str | None
    shape: tuple[int, ...]
    vocab: int = 2
    scale: float = 1.0
    offset: int = 0
    stack: bool = False  # one of several draws of `name`, stacked along a new last axis (Tapas' token types)


@dataclass(frozen=True)
class Subject:
    model_class: str
    config_class: str = ""
    config: dict = field(default_factory=dict)
    draws: tuple[Draw, ...] = ()
    source: str = ""  # the tester file and commit the values were read from
    family: str = ""  # "wav2vec2": built by exactness.models.wav2vec2_family (the near-tie study's builders)
    skip_reason: str | None = None  # None: the export test's own reason (exactness.reference.skip_reason)
    after_config: dict = field(default_factory=dict)  # attributes the tester sets on the built config


def _bert_like_ids(batch: int, seq: int, vocab: int) -> tuple[Draw, ...]:
    return (Draw("ids", "input_ids", (batch, seq), vocab), Draw("mask", "attention_mask", (batch, seq)))


_XLM = dict(vocab_size=99, n_special=0, emb_dim=32, n_layers=2, n_heads=4, dropout=0.1, attention_dropout=0.1,
            gelu_activation=True, sinusoidal_embeddings=False, asm=False, causal=False, n_langs=2,
            max_position_embeddings=512, initializer_range=0.02, summary_type="last", use_proj=True, num_labels=2,
            bos_token_id=0)
# prepare_config_and_inputs draws input_ids, the mask (unused by the common inputs), lengths, then langs;
# prepare_config_and_inputs_for_common passes input_ids, token_type_ids and lengths.
_XLM_DRAWS = (Draw("ids", "input_ids", (13, 7), 99), Draw("mask", None, (13, 7)),
              Draw("ids", "lengths", (13,), 2, offset=7 - 2), Draw("ids", "token_type_ids", (13, 7), 2))
_RT_DETR = dict(
    backbone_config=Nested("RTDetrResNetConfig", dict(embeddings_size=10, hidden_sizes=[10, 20, 30, 40],
                                                      depths=[1, 1, 2, 1], out_features=["stage2", "stage3", "stage4"],
                                                      out_indices=[2, 3, 4])),
    encoder_hidden_dim=32, encoder_in_channels=[20, 30, 40], feat_strides=[8, 16, 32], encoder_layers=1,
    encoder_ffn_dim=64, encoder_attention_heads=2, dropout=0.0, activation_dropout=0.0, encode_proj_layers=[2],
    positional_encoding_temperature=10000, encoder_activation_function="gelu", activation_function="silu",
    eval_size=None, normalize_before=False, d_model=32, num_queries=30, decoder_in_channels=[32, 32, 32],
    decoder_ffn_dim=64, num_feature_levels=3, decoder_n_points=4, decoder_layers=2, decoder_attention_heads=2,
    decoder_activation_function="relu", attention_dropout=0.0, num_denoising=0, label_noise_ratio=0.5,
    box_noise_scale=1.0, learn_initial_query=False, anchor_image_size=None, image_size=64,
    disable_custom_kernels=True, with_box_refine=True, initializer_range=0.02, layer_norm_eps=1e-5,
    batch_norm_eps=1e-5)

# RT-DETRv2's tester: RT-DETR's values, the encoder fed by the backbone's last three hidden sizes, and the
# decoder's number of levels.
_RT_DETR_V2 = {**_RT_DETR, "decoder_n_levels": 3}
_D_FINE = dict(
    backbone_config=Nested("HGNetV2Config", dict(
        stage_in_channels=[16, 64, 128, 256], stage_mid_channels=[16, 32, 64, 128],
        stage_out_channels=[64, 128, 256, 512], stage_num_blocks=[1, 1, 2, 1],
        stage_downsample=[False, True, True, True], stage_light_block=[False, False, True, True],
        stage_kernel_size=[3, 3, 5, 5], stage_numb_of_layers=[3, 3, 3, 3], embeddings_size=10,
        hidden_sizes=[64, 128, 256, 512], depths=[1, 1, 2, 1], out_features=["stage2", "stage3", "stage4"],
        out_indices=[2, 3, 4], stem_channels=[3, 16, 16], use_lab=True)),
    encoder_hidden_dim=32, encoder_in_channels=[128, 256, 512], feat_strides=[8, 16, 32], encoder_layers=1,
    encoder_ffn_dim=64, encoder_attention_heads=2, dropout=0.0, activation_dropout=0.0, encode_proj_layers=[2],
    positional_encoding_temperature=10000, encoder_activation_function="gelu", activation_function="silu",
    eval_size=None, normalize_before=False, d_model=32, num_queries=30, decoder_in_channels=[32, 32, 32],
    decoder_ffn_dim=64, num_feature_levels=3, decoder_n_points=[3, 6, 3], decoder_n_levels=3, decoder_layers=2,
    decoder_attention_heads=2, decoder_activation_function="relu", decoder_offset_scale=0.5, eval_idx=-1,
    layer_scale=1, reg_max=32, reg_scale=4.0, depth_mult=0.34, attention_dropout=0.0, num_denoising=0,
    label_noise_ratio=0.5, box_noise_scale=1.0, learn_initial_query=False, anchor_image_size=None, image_size=64,
    disable_custom_kernels=True, with_box_refine=True)
_LW_DETR = dict(
    backbone_config=Nested("LwDetrViTConfig", dict(
        hidden_size=16, num_hidden_layers=4, num_attention_heads=2, window_block_indices=[0, 2], out_indices=[1, 3],
        num_windows=16, image_size=256, dropout_prob=0.0, attn_implementation="eager")),
    d_model=32, projector_scale_factors=[0.5, 2.0], decoder_ffn_dim=32, decoder_layers=2,
    decoder_self_attention_heads=2, decoder_cross_attention_heads=4, num_queries=10, group_detr=2, dropout=0.0,
    activation_dropout=0.0, attention_dropout=0.0, attn_implementation="eager")
# Flaubert's tester is XLM's with use_proj None, no bos id; its common inputs also pass the attention mask.
_FLAUBERT = {**{k: v for k, v in _XLM.items() if k != "bos_token_id"}, "use_proj": None}
_FLAUBERT_DRAWS = (Draw("ids", "input_ids", (13, 7), 99), Draw("mask", "attention_mask", (13, 7)),
                   Draw("ids", "lengths", (13,), 2, offset=7 - 2), Draw("ids", "token_type_ids", (13, 7), 2))
_TAPAS_TYPES = [3, 256, 256, 2, 256, 256, 10]
_TAPAS = dict(vocab_size=99, hidden_size=32, num_hidden_layers=5, num_attention_heads=4, intermediate_size=37,
              hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=512,
              type_vocab_sizes=_TAPAS_TYPES, initializer_range=0.02, positive_weight=10.0, num_aggregation_labels=4,
              num_labels=2, aggregation_loss_importance=0.8, use_answer_as_supervision=True,
              answer_loss_importance=0.001, use_normalized_answer_loss=False, huber_loss_delta=25.0, temperature=1.0,
              agg_temperature=1.0, use_gumbel_for_cells=False, use_gumbel_for_agg=False,
              average_approximation_function="ratio", cell_selection_preference=0.5, answer_loss_cutoff=100,
              max_num_rows=64, max_num_columns=32, average_logits_per_cell=True, select_one_column=True,
              allow_empty_column_selection=False, init_cell_selection_weights_to_zero=True,
              reset_position_index_per_cell=True, disable_per_token_loss=False)
# input ids, the mask, then one id tensor per token type (segment, column, row, ...), stacked on a last axis
_TAPAS_DRAWS = (Draw("ids", "input_ids", (13, 7), 99), Draw("mask", "attention_mask", (13, 7)),
                *(Draw("ids", "token_type_ids", (13, 7), size, stack=True) for size in _TAPAS_TYPES))
_BIT = dict(num_channels=3, embeddings_size=10, hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 2, 1], hidden_act="relu",
            num_labels=3, out_features=["stage2", "stage3", "stage4"], num_groups=1)

SUBJECTS: dict[str, Subject] = {s.model_class: s for s in (
    # The control: nothing discrete on its outputs (its mask comparisons read integer ids).
    Subject("BertModel", "BertConfig",
            dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                 hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                 max_position_embeddings=512, type_vocab_size=16, is_decoder=False, initializer_range=0.02),
            _bert_like_ids(13, 7, 99) + (Draw("ids", "token_type_ids", (13, 7), 16),),
            TESTS.format("bert/test_modeling_bert.py", "b45351d3f3159db0a941c5c5c98ef44e1abaea91")),
    *(Subject(name, family="wav2vec2", source="the near-tie study's builders (exactness.models.wav2vec2_family)")
      for name in ("Wav2Vec2ForPreTraining", "Wav2Vec2ConformerForPreTraining", "UniSpeechForPreTraining",
                   "UniSpeechSatForPreTraining")),
    Subject("XLMForQuestionAnswering", "XLMConfig", _XLM, _XLM_DRAWS,
            TESTS.format("xlm/test_modeling_xlm.py", "1d2fe0d87b712f479707c7518c7a31a0b9b62443")),
    Subject("RTDetrForObjectDetection", "RTDetrConfig", _RT_DETR,
            (Draw("floats", "pixel_values", (3, 3, 64, 64)),),
            TESTS.format("rt_detr/test_modeling_rt_detr.py", "47af5a475674de7fdc635ca94fc6c78773ed01a7"),
            after_config={"num_labels": 10}),
    Subject("FlaubertForQuestionAnswering", "FlaubertConfig", _FLAUBERT, _FLAUBERT_DRAWS,
            TESTS.format("flaubert/test_modeling_flaubert.py", "1d2fe0d87b712f479707c7518c7a31a0b9b62443")),
    Subject("RTDetrV2ForObjectDetection", "RTDetrV2Config", _RT_DETR_V2,
            (Draw("floats", "pixel_values", (3, 3, 64, 64)),),
            TESTS.format("rt_detr_v2/test_modeling_rt_detr_v2.py", "c8ce42389ca65de245e437b3a7b1d0878af7466e"),
            after_config={"num_labels": 10}),
    Subject("DFineForObjectDetection", "DFineConfig", _D_FINE, (Draw("floats", "pixel_values", (3, 3, 64, 64)),),
            TESTS.format("d_fine/test_modeling_d_fine.py", "231653db225a955184eea5a02710014fb5b79686"),
            after_config={"num_labels": 10}),
    Subject("LwDetrForObjectDetection", "LwDetrConfig", _LW_DETR,
            (Draw("floats", "pixel_values", (3, 3, 256, 256)), Draw("ones", "pixel_mask", (3, 256, 256))),
            TESTS.format("lw_detr/test_modeling_lw_detr.py", "ed6cf9fb8f84a7492e2ffe588bc29dc43097ca79"),
            after_config={"num_labels": 5}),
    Subject("TapasForQuestionAnswering", "TapasConfig", _TAPAS, _TAPAS_DRAWS,
            TESTS.format("tapas/test_modeling_tapas.py", "270755d62e31c34d8d4454b0c0646178ffee25cc")),
    # float noise only, by the skip list's reason
    Subject("BitModel", "BitConfig", _BIT, (Draw("floats", "pixel_values", (3, 3, 32, 32)),),
            TESTS.format("bit/test_modeling_bit.py", "bffa5defd606b3f2d3caef10444b5e570fc7189d")),
)}
NAMES = tuple(SUBJECTS)


class UnknownSubjectError(KeyError):
    def __str__(self) -> str:
        name = self.args[0]
        return (f"no tiny config registered for {name!r}; registered: {', '.join(NAMES)}. To add a class, add a "
                "Subject (config class and values, input draws, tester source) to SUBJECTS in "
                "lib/exactness/models/tiny_subjects.py, as the README's discrete-ops section shows")


def subject(name: str) -> Subject:
    if name not in SUBJECTS:
        raise UnknownSubjectError(name)
    return SUBJECTS[name]


def _value(value: Any, transformers) -> Any:
    if isinstance(value, Nested):
        return getattr(transformers, value.config_class)(**value.kwargs)
    return value


def tester_config(name: str):
    import transformers
    from transformers.testing_utils import set_config_for_less_flaky_test

    s = subject(name)
    if s.family == "wav2vec2":
        from exactness.models import wav2vec2_family

        return wav2vec2_family.tester_config(name)
    config = getattr(transformers, s.config_class)(**{k: _value(v, transformers) for k, v in s.config.items()})
    for key, value in s.after_config.items():
        setattr(config, key, value)
    if hasattr(config, "return_loss"):
        config.return_loss = False  # the export test turns the loss off
    set_config_for_less_flaky_test(config)
    return config


def build(name: str, seed: int, config=None):
    """`torch.manual_seed(seed)`, `model_class(config)`, eval, the less-flaky settings."""
    import torch
    import transformers
    from transformers.testing_utils import set_model_for_less_flaky_test

    s = subject(name)
    if s.family == "wav2vec2":
        from exactness.models import wav2vec2_family

        return wav2vec2_family.build_model(name, seed, config)
    config = config if config is not None else tester_config(name)
    torch.manual_seed(seed)
    model = getattr(transformers, s.model_class)(config).eval()
    set_model_for_less_flaky_test(model)
    return model


def inputs(name: str, seed: int) -> dict:
    """The tester's inputs for `seed`: every draw from one `random.Random(seed)`, in the tester's order."""
    import random

    import torch

    s = subject(name)
    if s.family == "wav2vec2":
        from exactness.models import wav2vec2_family

        return wav2vec2_family.tester_inputs(name, seed)
    rng = random.Random(seed)
    out, stacks = {}, {}
    for draw in s.draws:
        n = 1
        for size in draw.shape:
            n *= size
        if draw.kind == "ones":
            tensor = torch.ones(n, dtype=torch.float)
        elif draw.kind == "floats":
            tensor = torch.tensor([rng.random() * draw.scale for _ in range(n)], dtype=torch.float)
        elif draw.kind in ("ids", "mask"):
            vocab = 2 if draw.kind == "mask" else draw.vocab
            tensor = torch.tensor([rng.randint(0, vocab - 1) for _ in range(n)], dtype=torch.long) + draw.offset
        else:
            raise ValueError(f"{name}: unknown draw kind {draw.kind!r} (use ids, mask, floats or ones)")
        tensor = tensor.view(*draw.shape)
        if draw.kind == "mask":
            tensor[:, -1] = 1  # random_attention_mask: one attended position per row
        if draw.name is not None and draw.stack:
            stacks.setdefault(draw.name, []).append(tensor)
        elif draw.name is not None:
            out[draw.name] = tensor
    out.update({name: torch.stack(parts, dim=-1) for name, parts in stacks.items()})
    return out
