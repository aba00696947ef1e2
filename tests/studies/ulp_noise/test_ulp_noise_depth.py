"""Growth and reset of the noise per layer kind, absolute and relative, and where the worst counts sit."""

import pandas as pd
import pytest

from exactness.studies.ulp_noise import depth
from exactness.studies.ulp_noise import sentences as ulp_noise_sentences


def _scaled(rows):
    """(tensor, max_abs_diff, rel_rms) in graph order, as `scale_profile` gives them."""
    return pd.DataFrame([{"depth": i, "tensor": t, "max_abs_diff": a, "rel_rms": r, "model_output": o}
                         for i, (t, a, r, *rest) in enumerate(rows) for o in [bool(rest and rest[0])]])


def test_layer_kinds_come_from_the_module_name():
    assert depth.layer_kind("m.encoder.layers.0.ffn1_layer_norm") == "layer norm"
    assert depth.layer_kind("m.encoder.layers.0.self_attn.linear_q") == "linear"
    assert depth.layer_kind("m.encoder.layers.0.self_attn.linear_out") == "attention"
    assert depth.layer_kind("m.feature_extractor.conv_layers.0.conv") == "convolution"
    assert depth.layer_kind("encoder.block.0.res_unit1.snake1") == "activation"
    assert depth.layer_kind("m.encoder.layers.0.conv_module.batch_norm") == "batch norm"


def test_a_layer_norm_that_only_rescales_keeps_relative_noise_flat_while_absolute_noise_jumps():
    scaled = _scaled([("m.a.dense", 1e-9, 4e-6), ("m.a.layer_norm", 2e-7, 4e-6), ("m.a.out_dense", 2e-8, 4.4e-6),
                      ("m.a", 2e-8, 4.4e-6)])  # the container repeats its last child: left out
    table = depth.growth(scaled)
    assert table.tensor.tolist() == ["m.a.layer_norm", "m.a.out_dense"]
    norm = table.set_index("tensor").loc["m.a.layer_norm"]
    assert norm.absolute_factor == pytest.approx(200) and norm.relative_factor == pytest.approx(1.0)
    kinds = depth.growth_by_kind(table).set_index("kind")
    assert depth.role(kinds.loc["layer norm"]).startswith("rescales")
    sentence = ulp_noise_sentences.growth_sentence(depth.growth_by_kind(table), table)
    assert kinds.loc["layer norm"].role.startswith("rescales")  # the factors per kind are the table's
    assert "x1.0 relative" not in sentence and sentence.count(". ") <= 2  # two sentences, no list of factors
    assert sentence.startswith("No layer kind grows the relative noise")
    assert "Absolute noise is raised without relative growth at layer norm (x200)" in sentence


def test_a_layer_that_grows_the_relative_noise_is_named_so():
    scaled = _scaled([("m.conv", 1e-6, 1e-6), ("m.act", 5e-6, 5e-6)])
    kinds = depth.growth_by_kind(depth.growth(scaled))
    assert depth.role(kinds.iloc[0]) == "grows the relative noise"
    sentence = ulp_noise_sentences.growth_sentence(kinds, depth.growth(scaled))
    assert sentence.startswith("The relative noise grows at activation (x5.0)")


def test_parallel_projections_take_the_input_of_the_first_and_outputs_and_exact_branches_are_skipped():
    scaled = _scaled([("m.norm", 1e-6, 1e-6), ("m.att.linear_q", 1e-7, 2e-6), ("m.att.linear_pos", 0.0, 0.0),
                      ("m.att.linear_k", 1e-7, 3e-6), ("m.att.linear_v", 1e-7, 1e-6),
                      ("projected", 9e-6, 9e-6, True)])
    table = depth.growth(scaled).set_index("tensor")
    assert table.loc["m.att.linear_k", "input"] == "m.norm" and table.loc["m.att.linear_v", "input"] == "m.norm"
    assert "m.att.linear_pos" not in table.index and "projected" not in table.index


def test_worst_elements_sentence_turns_when_the_worst_elements_are_large():
    small = pd.DataFrame({"worst_of_rms": [1e-4, 3e-4], "top_ulps_below_rms": [0.02, 0.05]})
    assert ulp_noise_sentences.worst_elements_sentence(small).startswith(
        "The worst element-wise counts come from small elements")
    large = small.assign(worst_of_rms=[1.2, 0.9])
    assert "not confined to small elements" in ulp_noise_sentences.worst_elements_sentence(large)


def test_a_module_reading_a_sum_no_module_returns_has_no_measured_input():
    scaled = pd.DataFrame({"depth": [0, 1, 2, 3], "tensor": ["a.dense", "a.norm", "b.dense", "b.act"],
                           "max_abs_diff": [1e-6, 1e-4, 2e-4, 2e-4], "rel_rms": [1e-3, 1e-3, 1e-3, 1e-3],
                           "input_module": ["", "", "a.norm", "b.dense"]})
    table = depth.growth(scaled).set_index("tensor")
    assert "a.norm" not in table.index  # it read a residual sum, not a.dense's output: no factor
    assert table.loc["b.dense", "input"] == "a.norm" and table.loc["b.dense", "absolute_factor"] == 2.0


def test_eager_capture_names_the_module_a_module_read_and_none_for_a_residual_sum():
    import torch

    from exactness.runtimes import eager_capture

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.dense, self.norm, self.out = torch.nn.Linear(4, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.out(self.norm(x + self.dense(x)))

    run = eager_capture.run(Block().eval(), {"x": torch.randn(2, 4)})
    assert run.input_of == {"dense": "", "norm": "", "out": "norm"}
