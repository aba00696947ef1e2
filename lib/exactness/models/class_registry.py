"""Any transformers class as its model tester builds it: a tiny config and seeded inputs, one entry each.

A seed means what it means everywhere in this workbook (`exactness.models.sources` builds a class from a
transformers checkout's own tester the same way): the testers' `global_rng` is `random.Random(seed)` and every
draw of `ids_tensor`, `random_attention_mask` and `floats_tensor` comes from it in the tester's order, element
by element, row-major; the draws a tester makes from torch's or numpy's global generators come from those
generators seeded with the seed (numpy: the seed mod 2**32) before the tester draws; weights come from
`torch.manual_seed(seed)` right before `model_class(config)`; then eval mode and the export test's "less flaky"
settings. The testers' values come from the transformers repository's
`tests/models/<name>/test_modeling_<name>.py` (the installed package has no tests); each entry names the
file and commit it was read from, and `tests/models/registry_check.py` compares an entry with that tester
wherever a checkout is given.

This module imports neither torch nor transformers: the command line checks a run's `models` against
`NAMES` before anything heavy loads. To add a class, add one `Subject` to `SUBJECTS`: its config class and
values, its draws in the tester's order, and the tester file and commit they were read from; then check it against
a checkout (`tests/models/registry_check.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from exactness.models import python_random

TESTS = "huggingface/transformers tests/models/{}@{}"


@dataclass(frozen=True)
class Nested:
    """A config inside a config (a detector's backbone), built from its class name and arguments."""

    config_class: str
    kwargs: dict


@dataclass(frozen=True)
class Draw:
    """One tensor the tester draws, in order. kind: "ids" (`ids_tensor(shape, vocab) + offset`; with
    `generator="torch"`, `torch.randint(high=vocab, size=shape)`), "mask" (`random_attention_mask(shape)`: ids
    below 2, first column 1, as transformers 5.23.0's `tests/test_modeling_common.py` sets it), "prefix_mask" (a
    "mask" draw, then each row overwritten with ones up to a start and zeros after: the CLIP-like text testers,
    which draw the starts with numpy's `np.random.randint(1, seq - 1, size=(batch,))`), "floats"
    (`floats_tensor(shape, scale)`), "ones" (`torch.ones(shape)`, a pixel mask: nothing is drawn), "row" (the
    fixed ids `row` in every batch row: nothing is drawn), "bernoulli" (`(torch.rand(shape) < scale).long()`:
    FLAVA's masked patches), "masked_copy" (the earlier draw `source` with columns `fill[0]:fill[1]` set to
    `fill[2]`: nothing is drawn), "kept_copy" (the earlier draw `source` with every column outside
    `fill[0]:fill[1]` set to `fill[2]`: FLAVA's MLM labels, nothing is drawn), "masked_ids" (`torch.randint(high=vocab,
    size=shape)` from torch's generator, then every position where the earlier draw `source` is not 1 set to
    `fill[-1]`: FLAVA's MIM labels), "ones_ids" (`torch.ones(shape).long()`: nothing is drawn). `name` None: drawn (it
    moves its generator) but not passed to the model."""

    kind: str
    name: str | None
    shape: tuple[int, ...]
    vocab: int = 2
    scale: float = 1.0
    offset: int = 0
    stack: bool = False  # one of several draws of `name`, stacked along a new last axis (Tapas' token types)
    row: tuple[int, ...] = ()  # kind "row": the fixed ids every batch row holds (nothing is drawn)
    source: str = ""  # kinds "masked_copy", "kept_copy", "masked_ids": the earlier draw it copies or is masked by
    # kinds "masked_copy", "kept_copy": (first column, end column, value) written into the copy; "masked_ids": (value,)
    fill: tuple[int, ...] = ()
    # "python": the testers' global_rng; "torch": torch's global generator (the tester calls torch.randint)
    generator: str = "python"


@dataclass(frozen=True)
class Subject:
    model_class: str
    config_class: str = ""
    config: dict = field(default_factory=dict)
    draws: tuple[Draw, ...] = ()
    source: str = ""  # the tester file and commit the values were read from
    family: str = ""  # "wav2vec2": built by exactness.models.wav2vec2_family (the near-tie study's builders)
    skip_reason: str | None = None  # None: the export test's own reason (exactness.published.skip_reason)
    # what that reason claims, (cause, op) as in exactness.published.Claim; None: published.skip_claim's
    skip_claim: tuple[str, str] | None = None
    # attributes the tester sets on the built config; a dotted key sets one of a nested config
    after_config: dict = field(default_factory=dict)


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
    disable_custom_kernels=True, with_box_refine=True)
# The RT-DETR testers take initializer_range 0.02 and both eps as arguments but never pass them to the config:
# the config's own defaults (initializer_range 0.01) build the model.

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
# PP-DocLayoutV2's tester passes its backbone and reading-order configs as plain dicts (as here); its encoder
# input channels are its `hidden_sizes[1:]`.
_PP_DOCLAYOUT_V2 = dict(
    backbone_config=dict(model_type="hgnet_v2", arch="L", return_idx=[1, 2, 3], freeze_stem_only=True, freeze_at=0,
                         freeze_norm=True, hidden_sizes=[32, 32, 32, 32], stem_channels=[3, 32, 32],
                         stage_in_channels=[32, 32, 32, 32], stage_mid_channels=[32, 32, 32, 32],
                         stage_out_channels=[32, 32, 32, 32], lr_mult_list=[0, 0.05, 0.05, 0.05, 0.05],
                         out_features=["stage2", "stage3", "stage4"]),
    reading_order_config=dict(
        hidden_size=16, num_attention_heads=8, attention_probs_dropout_prob=0.1, has_relative_attention_bias=False,
        has_spatial_attention_bias=True, layer_norm_eps=1e-5, hidden_dropout_prob=0.1, intermediate_size=16,
        hidden_act="gelu", num_hidden_layers=6, rel_pos_bins=32, max_rel_pos=128, rel_2d_pos_bins=64,
        max_rel_2d_pos=256, num_labels=510, max_position_embeddings=514, max_2d_position_embeddings=512,
        type_vocab_size=1, vocab_size=4, start_token_id=0, pad_token_id=1, end_token_id=2, pred_token_id=3,
        coordinate_size=171, shape_size=170, num_classes=20, relation_bias_embed_dim=16,
        relation_bias_temperature=10000, relation_bias_scale=100, relative_head_num=1, relative_head_size=64),
    encoder_hidden_dim=32, encoder_in_channels=[20, 30, 40], feat_strides=[8, 16, 32], encoder_layers=1,
    encoder_ffn_dim=8, encoder_attention_heads=2, dropout=0.0, activation_dropout=0.0, encode_proj_layers=[2],
    positional_encoding_temperature=10000, encoder_activation_function="gelu", activation_function="silu",
    eval_size=None, normalize_before=False, d_model=32, num_queries=30, decoder_in_channels=[32, 32, 32],
    decoder_ffn_dim=8, num_feature_levels=3, decoder_n_points=4, decoder_layers=2, decoder_attention_heads=2,
    decoder_activation_function="relu", attention_dropout=0.0, num_denoising=0, label_noise_ratio=0.5,
    box_noise_scale=1.0, learn_initial_query=False, anchor_image_size=None, image_size=128,
    disable_custom_kernels=True, num_labels=25,
    id2label=dict(enumerate(["abstract", "algorithm", "aside_text", "chart", "content", "formula", "doc_title",
                             "figure_title", "footer", "footer", "footnote", "formula_number", "header", "header",
                             "image", "formula", "number", "paragraph_title", "reference", "reference_content",
                             "seal", "table", "text", "text", "vision_footnote"])),
    class_thresholds=[0.5] * 5 + [0.4, 0.4] + [0.5] * 8 + [0.4, 0.5, 0.4, 0.5, 0.5, 0.45, 0.5, 0.4, 0.4, 0.5],
    class_order=[4, 2, 14, 1, 5, 7, 8, 6, 11, 11, 9, 13, 10, 10, 1, 2, 3, 0, 2, 2, 12, 1, 2, 15, 6])
_MM_GROUNDING_DINO = dict(
    d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
    encoder_ffn_dim=4, decoder_ffn_dim=4, dropout=0.1, attention_dropout=0.1, num_queries=2, num_labels=2,
    num_feature_levels=4, encoder_n_points=2, decoder_n_points=6, use_timm_backbone=False, max_text_len=7,
    backbone_config=Nested("SwinConfig", dict(window_size=7, embed_dim=8, depths=[1, 1, 1, 1], num_heads=[1, 1, 1, 1],
                                              image_size=98, out_features=["stage2", "stage3", "stage4"],
                                              out_indices=[2, 3, 4])),
    text_config=dict(hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=8,
                     max_position_embeddings=8, model_type="bert"))
# pixel values, an all-ones pixel mask, and the fixed prompt "{label}. {label}." every row holds
_MM_GROUNDING_DINO_DRAWS = (Draw("floats", "pixel_values", (4, 3, 98, 98)), Draw("ones", "pixel_mask", (4, 98, 98)),
                            Draw("row", "input_ids", (4, 7), row=(101, 3869, 1012, 11420, 3869, 1012, 102)))
_CLIP_TEXT = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                  dropout=0.1, attention_dropout=0.1, max_position_embeddings=512, initializer_range=0.02)
_CLIPSEG = dict(
    text_config=Nested("CLIPSegTextConfig", _CLIP_TEXT),
    vision_config=Nested("CLIPSegVisionConfig", dict(image_size=30, patch_size=2, num_channels=3, hidden_size=32,
                                                     num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                                                     dropout=0.1, attention_dropout=0.1, initializer_range=0.02)),
    projection_dim=64, reduce_dim=32, extract_layers=[1])
_CLAP = dict(
    text_config=Nested("ClapTextConfig", {**_CLIP_TEXT, "projection_dim": 32, "num_hidden_layers": 5,
                                          "projection_hidden_act": "relu"}),
    audio_config=Nested("ClapAudioConfig", dict(
        image_size=60, patch_size=2, num_mel_bins=16, window_size=4, num_channels=3, hidden_size=256, patch_stride=2,
        projection_dim=32, num_hidden_layers=4, num_attention_heads=[2, 2, 2, 2], intermediate_size=37, dropout=0.1,
        attention_dropout=0.1, initializer_range=0.02, spec_size=64, freq_ratio=2, patch_embeds_hidden_size=32)),
    projection_dim=64)
_DEPTH_PRO = dict(
    patch_size=16, fusion_hidden_size=16, intermediate_hook_ids=[1, 0], intermediate_feature_dims=[10, 8],
    scaled_images_ratios=[0.5, 1.0], scaled_images_overlap_ratios=[0.0, 0.2], scaled_images_feature_dims=[12, 12],
    initializer_range=0.02, use_fov_model=False,
    image_model_config=dict(model_type="dinov2", num_hidden_layers=2, hidden_size=16, num_attention_heads=1,
                            patch_size=4),
    patch_model_config=dict(model_type="vit", num_hidden_layers=2, hidden_size=24, num_attention_heads=2, patch_size=6),
    fov_model_config=dict(model_type="vit", num_hidden_layers=2, hidden_size=32, num_attention_heads=4, patch_size=8))
# OneFormer's tester builds its config, then sets these on it (and on its default Swin backbone)
_ONEFORMER = dict(text_encoder_vocab_size=99, hidden_size=64, num_queries=10, num_labels=4, encoder_feedforward_dim=32,
                  dim_feedforward=64, encoder_layers=2, decoder_layers=2)
_ONEFORMER_AFTER = {"backbone_config.embed_dim": 16, "backbone_config.depths": [1, 1, 1, 1],
                    "backbone_config.hidden_size": 16, "backbone_config.num_channels": 3,
                    "backbone_config.num_heads": [1, 1, 2, 2], "backbone": None, "hidden_dim": 64, "mask_dim": 64,
                    "conv_dim": 64, "text_encoder_width": 64, "task_seq_len": 77, "max_seq_len": 77,
                    "text_encoder_context_length": 77, "text_encoder_n_ctx": 4}
# pixel values, then the task's and the text's ids drawn with torch.randint. Its common inputs pass the text ids
# under `pixel_mask` (an unpacking slip, kept: the model ignores `pixel_mask`, and the test feeds what its
# tester returns).
_ONEFORMER_DRAWS = (Draw("floats", "pixel_values", (2, 3, 256, 256)),
                    Draw("ids", "task_inputs", (2, 77), 99, generator="torch"),
                    Draw("ids", "pixel_mask", (2, 6, 77), 99, generator="torch"))
_FLAVA_LAYERS = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                     hidden_act="gelu", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                     initializer_range=0.02, layer_norm_eps=1e-12, qkv_bias=True)
_FLAVA = dict(
    image_config=dict(**_FLAVA_LAYERS, image_size=30, patch_size=2, num_channels=3, mask_token=True, vocab_size=99),
    text_config=dict(**_FLAVA_LAYERS, vocab_size=102, type_vocab_size=2, max_position_embeddings=512,
                     position_embedding_type="absolute", pad_token_id=0),
    multimodal_config=dict(**_FLAVA_LAYERS, use_cls_token=True, ce_ignore_index=-100),
    image_codebook_config=dict(hidden_size=32, num_groups=2, vocab_size=99),
    hidden_size=32, projection_dim=32, initializer_range=0.02, layer_norm_eps=1e-12)
# The image tester's draws, then the text tester's, then FlavaForPreTrainingTester's: the masked copy of the ids and
# the three labels. The export test keeps the labels (its cleaning drops only `labels`, `future_values` and
# `return_loss`), and with the loss off they still pick which positions' MLM and MIM logits come back.
_FLAVA_DRAWS = (Draw("floats", "pixel_values", (12, 3, 30, 30)),
                Draw("bernoulli", "bool_masked_pos", (12, 15, 15), scale=0.9, generator="torch"),
                Draw("ids", "input_ids", (12, 7), 102), Draw("prefix_mask", "attention_mask", (12, 7)),
                Draw("ids", "token_type_ids", (12, 7), 2),
                Draw("masked_copy", "input_ids_masked", (12, 7), source="input_ids", fill=(1, 3, 100)),
                Draw("kept_copy", "mlm_labels", (12, 7), source="input_ids", fill=(1, 3, -100)),
                Draw("masked_ids", "mim_labels", (12, 15, 15), 99, source="bool_masked_pos", fill=(-100,),
                     generator="torch"),
                Draw("ones_ids", "itm_labels", (12,)))
# text ids and mask (12 x 7), then the other modality
_CLIP_TEXT_DRAWS = (Draw("ids", "input_ids", (12, 7), 99), Draw("prefix_mask", "attention_mask", (12, 7)))


def _wav2vec2_family(name: str, tester: str, commit: str) -> Subject:
    """A class the near-tie study's builders (`exactness.models.wav2vec2_family`) build, and the tester cited."""
    return Subject(name, family="wav2vec2",
                   source=TESTS.format(tester, commit) + " (built by exactness.models.wav2vec2_family)")


# Every entry cites the tester it was checked against under transformers 5.23.0 (the tester at the commit named,
# placed in 5.23.0's source distribution in transformers' layout; seeds 0-2, config, inputs and weights compared by
# `tests/models/registry_check.py`); each entry's comment says what that check found, and
# `registry_check.CHECKED` records it with what a stored tester needed to import and what an entry had to change.
SUBJECTS: dict[str, Subject] = {s.model_class: s for s in (
    # The control: nothing discrete on its outputs (its mask comparisons read integer ids).
    # checked: equal (its tester imports once an unused pretrained-list import is dropped)
    Subject("BertModel", "BertConfig",
            dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                 hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                 max_position_embeddings=512, type_vocab_size=16, is_decoder=False, initializer_range=0.02),
            _bert_like_ids(13, 7, 99) + (Draw("ids", "token_type_ids", (13, 7), 16),),
            TESTS.format("bert/test_modeling_bert.py", "b45351d3f3159db0a941c5c5c98ef44e1abaea91")),
    # checked: equal (its tester imports once the Flax, FX and Wav2Vec2ForMaskedLM names 5.23.0 lacks are dropped)
    _wav2vec2_family("Wav2Vec2ForPreTraining", "wav2vec2/test_modeling_wav2vec2.py",
                     "c5dac3ddcd3c71eed9e0e9269102611ee054e8c3"),
    # checked: equal
    _wav2vec2_family("Wav2Vec2ConformerForPreTraining", "wav2vec2_conformer/test_modeling_wav2vec2_conformer.py",
                     "2b6c089d5a0b18d59a08c36b91404ece60915cf3"),
    # checked: equal once do_stable_layer_norm was corrected to False (its tester's get_config() never forwards the
    # True its test case passes)
    _wav2vec2_family("UniSpeechForPreTraining", "unispeech/test_modeling_unispeech.py",
                     "040e1a7e4bb4f48ff62dfbbb1f6f8eff23e894ac"),
    # checked: equal
    _wav2vec2_family("UniSpeechSatForPreTraining", "unispeech_sat/test_modeling_unispeech_sat.py",
                     "488ecb9bfae86dd51ce484cd992241c910c559c5"),
    # checked: equal
    Subject("XLMForQuestionAnswering", "XLMConfig", _XLM, _XLM_DRAWS,
            TESTS.format("xlm/test_modeling_xlm.py", "1d2fe0d87b712f479707c7518c7a31a0b9b62443")),
    # checked: equal
    Subject("RTDetrForObjectDetection", "RTDetrConfig", _RT_DETR,
            (Draw("floats", "pixel_values", (3, 3, 64, 64)),),
            TESTS.format("rt_detr/test_modeling_rt_detr.py", "080c858c90241a5049212969a9aacf310a002a0c"),
            after_config={"num_labels": 10}),
    # checked: equal
    Subject("FlaubertForQuestionAnswering", "FlaubertConfig", _FLAUBERT, _FLAUBERT_DRAWS,
            TESTS.format("flaubert/test_modeling_flaubert.py", "1d2fe0d87b712f479707c7518c7a31a0b9b62443")),
    # checked: equal (its tester imports and builds once cached_property and the config classmethod 5.23.0 lacks
    # are replaced)
    Subject("RTDetrV2ForObjectDetection", "RTDetrV2Config", _RT_DETR_V2,
            (Draw("floats", "pixel_values", (3, 3, 64, 64)),),
            TESTS.format("rt_detr_v2/test_modeling_rt_detr_v2.py", "c8ce42389ca65de245e437b3a7b1d0878af7466e"),
            after_config={"num_labels": 10}),
    # checked: equal (adapted as RT-DETRv2's tester)
    Subject("DFineForObjectDetection", "DFineConfig", _D_FINE, (Draw("floats", "pixel_values", (3, 3, 64, 64)),),
            TESTS.format("d_fine/test_modeling_d_fine.py", "231653db225a955184eea5a02710014fb5b79686"),
            after_config={"num_labels": 10}),
    # checked: equal
    Subject("LwDetrForObjectDetection", "LwDetrConfig", _LW_DETR,
            (Draw("floats", "pixel_values", (3, 3, 256, 256)), Draw("ones", "pixel_mask", (3, 256, 256))),
            TESTS.format("lw_detr/test_modeling_lw_detr.py", "ed6cf9fb8f84a7492e2ffe588bc29dc43097ca79"),
            after_config={"num_labels": 5}),
    # checked: equal (its tester imports once the require_scatter, require_tensorflow_probability and
    # cached_property 5.23.0 lacks are dropped)
    Subject("TapasForQuestionAnswering", "TapasConfig", _TAPAS, _TAPAS_DRAWS,
            TESTS.format("tapas/test_modeling_tapas.py", "270755d62e31c34d8d4454b0c0646178ffee25cc")),
    # Deimv2's tester is D-FINE's (its `hidden_expansion` is not passed to the config); its pixel mask and labels
    # are not in the common inputs
    # checked: equal (its tester needs the repository's utils/fetch_hub_objects_for_ci.py in the checkout)
    Subject("Deimv2ForObjectDetection", "Deimv2Config", _D_FINE, (Draw("floats", "pixel_values", (3, 3, 64, 64)),),
            TESTS.format("deimv2/test_modeling_deimv2.py", "0035bc830562d529c6ffe88260b9d76ce07d9560"),
            after_config={"num_labels": 10}),
    # checked: equal (as Deimv2's, its tester needs the repository's utils/fetch_hub_objects_for_ci.py)
    Subject("PPDocLayoutV2ForObjectDetection", "PPDocLayoutV2Config", _PP_DOCLAYOUT_V2,
            (Draw("floats", "pixel_values", (3, 3, 128, 128)),),
            TESTS.format("pp_doclayout_v2/test_modeling_pp_doclayout_v2.py",
                         "0b1d8f3c1fad970c1a9d2dc7a753aa1dc382fc1f")),
    # checked: equal
    Subject("MMGroundingDinoForObjectDetection", "MMGroundingDinoConfig", _MM_GROUNDING_DINO, _MM_GROUNDING_DINO_DRAWS,
            TESTS.format("mm_grounding_dino/test_modeling_mm_grounding_dino.py",
                         "0572371cbdf8babc2828123baadb3cf7bd3022fd")),
    # float noise only, by the skip list's reason
    # checked: equal (its tester imports once cached_property comes from functools)
    Subject("BitModel", "BitConfig", _BIT, (Draw("floats", "pixel_values", (3, 3, 32, 32)),),
            TESTS.format("bit/test_modeling_bit.py", "0e97420c9957149b80ff57632148e8ce80203b48")),
    # checked: equal (its tester imports and builds once the Flax names and the config classmethod 5.23.0 lacks are
    # replaced)
    Subject("CLIPSegForImageSegmentation", "CLIPSegConfig", _CLIPSEG,
            _CLIP_TEXT_DRAWS + (Draw("floats", "pixel_values", (12, 3, 30, 30)),),
            TESTS.format("clipseg/test_modeling_clipseg.py", "0ef39c917eb5bcb48ec8f761ed7554c74578fdd3")),
    # checked: equal (its tester imports and builds once the pretrained list and the config classmethod 5.23.0 lacks
    # are replaced)
    Subject("ClapModel", "ClapConfig", _CLAP, _CLIP_TEXT_DRAWS + (Draw("floats", "input_features", (12, 1, 256, 16)),),
            TESTS.format("clap/test_modeling_clap.py", "0338784947f97f62a188b0e5c148b7615beb1cbc")),
    # checked: equal once its three labels were added (the tester passes them; see _FLAVA_DRAWS), its tester building
    # once the config classmethod 5.23.0 lacks is replaced
    Subject("FlavaForPreTraining", "FlavaConfig", _FLAVA, _FLAVA_DRAWS,
            TESTS.format("flava/test_modeling_flava.py", "1d2fe0d87b712f479707c7518c7a31a0b9b62443")),
    # checked: equal (its tester imports once cached_property comes from functools)
    Subject("OneFormerForUniversalSegmentation", "OneFormerConfig", _ONEFORMER, _ONEFORMER_DRAWS,
            TESTS.format("oneformer/test_modeling_oneformer.py", "01080c629600d4ff3121446bb4f4a2e240c2cf41"),
            after_config=_ONEFORMER_AFTER),
    # checked: equal
    Subject("DepthProForDepthEstimation", "DepthProConfig", _DEPTH_PRO,
            (Draw("floats", "pixel_values", (8, 3, 64, 64)),),
            TESTS.format("depth_pro/test_modeling_depth_pro.py", "01247f8e29e83be11a5d7e92aa37673a205ae1fe")),
)}
NAMES = tuple(SUBJECTS)


class UnknownSubjectError(KeyError):
    def __str__(self) -> str:
        name = self.args[0]
        return (f"no tiny config registered for {name!r}; registered: {', '.join(NAMES)}. To add a class, add a "
                "Subject (config class and values, input draws, tester source) to SUBJECTS in "
                "lib/exactness/models/class_registry.py (its module docstring says how)")


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
    for key, value in s.after_config.items():  # "backbone_config.depths": an attribute of a nested config
        *path, name = key.split(".")
        target = config
        for part in path:
            target = getattr(target, part)
        setattr(target, name, value)
    config.return_loss = False  # the export test sets it on every config (`_clean_inputs_for_export`)
    set_config_for_less_flaky_test(config)
    return config


def construct(name: str, config=None):
    """`model_class(config)`, eval, the less-flaky settings, from whatever state torch's generator is in."""
    import transformers
    from transformers.testing_utils import set_model_for_less_flaky_test

    s = subject(name)
    config = config if config is not None else tester_config(name)
    if s.family == "wav2vec2":
        from exactness.models import wav2vec2_family

        return wav2vec2_family.construct(name, config)
    model = getattr(transformers, s.model_class)(config).eval()
    set_model_for_less_flaky_test(model)
    return model


def build(name: str, seed: int, config=None):
    """`torch.manual_seed(seed)`, `model_class(config)`, eval, the less-flaky settings."""
    import torch

    if subject(name).family == "wav2vec2":
        from exactness.models import wav2vec2_family

        return wav2vec2_family.build_model(name, seed, config)
    torch.manual_seed(seed)
    return construct(name, config)


NUMPY_SEEDS = 2**32  # numpy's global generator takes 32-bit seeds: a seed is taken modulo this


class _Generators:
    """The three generators a tester draws from, each seeded with the seed and made on first use."""

    def __init__(self, seed: int):
        import random

        self.seed, self.python = seed, random.Random(seed)
        self._torch = self._numpy = None

    @property
    def torch(self):
        import torch

        if self._torch is None:
            self._torch = torch.Generator().manual_seed(self.seed)
        return self._torch

    @property
    def numpy(self):
        import numpy as np

        if self._numpy is None:
            self._numpy = np.random.RandomState(self.seed % NUMPY_SEEDS)
        return self._numpy


def _drawn(name: str, draw: Draw, n: int, out: dict, generators: _Generators):
    import torch

    rng = generators.python
    allowed = {"ids": ("python", "torch"), "bernoulli": ("torch",), "masked_ids": ("torch",)}.get(draw.kind,
                                                                                                 ("python",))
    if draw.generator not in allowed:
        raise ValueError(f"{name}: a {draw.kind!r} draw cannot come from generator {draw.generator!r} "
                         f"(it takes {' or '.join(allowed)})")
    if draw.kind == "ones":
        return torch.ones(n, dtype=torch.float)
    if draw.kind == "row":
        return torch.tensor(list(draw.row) * (n // len(draw.row)), dtype=torch.long)
    if draw.kind == "ones_ids":
        return torch.ones(n, dtype=torch.long)
    if draw.kind in ("masked_copy", "kept_copy"):
        return out[draw.source].clone().reshape(-1)
    if draw.kind == "bernoulli":
        return (torch.rand(draw.shape, generator=generators.torch) < draw.scale).long().reshape(-1)
    if draw.kind == "floats":  # python_random: the loop's values and state, drawn at once
        return torch.from_numpy(python_random.randoms(rng, n) * draw.scale).to(torch.float)
    if draw.kind in ("ids", "masked_ids") and draw.generator == "torch":
        return torch.randint(high=draw.vocab, size=draw.shape, generator=generators.torch).reshape(-1) + draw.offset
    if draw.kind in ("ids", "mask", "prefix_mask"):
        vocab = draw.vocab if draw.kind == "ids" else 2
        return torch.from_numpy(python_random.randints_below(rng, n, vocab)) + draw.offset
    raise ValueError(f"{name}: unknown draw kind {draw.kind!r} "
                     "(use ids, mask, prefix_mask, floats, ones, ones_ids, row, bernoulli, masked_copy, kept_copy or "
                     "masked_ids)")


def inputs(name: str, seed: int) -> dict:
    """The tester's inputs for `seed`: every draw in the tester's order, each from the generator the tester
    draws it from, seeded with the seed (see the module's docstring)."""
    import torch

    s = subject(name)
    if s.family == "wav2vec2":
        from exactness.models import wav2vec2_family

        return wav2vec2_family.tester_inputs(name, seed)
    generators = _Generators(seed)
    out, stacks = {}, {}
    for draw in s.draws:
        n = 1
        for size in draw.shape:
            n *= size
        tensor = _drawn(name, draw, n, out, generators).view(*draw.shape)
        if draw.kind in ("mask", "prefix_mask"):
            tensor[:, 0] = 1  # random_attention_mask: one attended position per row, the first
        if draw.kind == "masked_copy":
            tensor[..., draw.fill[0]:draw.fill[1]] = draw.fill[2]
        if draw.kind == "kept_copy":
            tensor[..., :draw.fill[0]] = draw.fill[2]
            tensor[..., draw.fill[1]:] = draw.fill[2]
        if draw.kind == "masked_ids":
            tensor[out[draw.source] != 1] = draw.fill[-1]
        if draw.kind == "prefix_mask":
            starts = generators.numpy.randint(1, draw.shape[-1] - 1, size=(draw.shape[0],))
            for row, start in enumerate(starts):
                tensor[row, :start], tensor[row, start:] = 1, 0
        if draw.name is not None and draw.stack:
            stacks.setdefault(draw.name, []).append(tensor)
        elif draw.name is not None:
            out[draw.name] = tensor
    out.update({name: torch.stack(parts, dim=-1) for name, parts in stacks.items()})
    return out
