"""The depth plot names the network's blocks as bands under the axes: every module output in one band, the
bands in graph order without overlap, no label drawn over the lines or the title."""

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402

from exactness.studies.ulp_noise import figures  # noqa: E402

LAYER = ["ffn1_layer_norm", "ffn1.intermediate_dense", "ffn1", "self_attn_layer_norm", "self_attn.linear_q",
         "self_attn", "conv_module.glu", "conv_module", "final_layer_norm"]
TENSORS = (["m.feature_extractor.conv_layers.0.conv", "m.feature_extractor.conv_layers.0",
            "m.feature_extractor.conv_layers.1.conv", "m.feature_extractor", "m.feature_projection.layer_norm",
            "m.feature_projection"]
           + [f"m.encoder.layers.{n}.{part}" for n in (0, 1) for part in LAYER]
           + ["m.encoder.layer_norm", "quantizer.weight_proj", "quantizer", "project_q"])


def test_blocks_cover_every_output_in_order_and_name_the_repeated_layers():
    bands = figures.blocks(TENSORS, list(range(len(TENSORS))))
    covered = [d for _, first, last in bands for d in range(first, last + 1)]
    assert covered == list(range(len(TENSORS)))  # each output in exactly one band, in order
    labels = [label for label, _, _ in bands if label]
    assert "encoder layer 0" in labels and "encoder layer 1" in labels
    assert labels[0].startswith("feature_extractor")  # its conv layers merged into one band


def test_the_figure_draws_no_label_over_its_panels():
    profile = pd.DataFrame({"depth": range(len(TENSORS)), "tensor": TENSORS, "max_abs_diff": 1e-6})
    scaled = profile.assign(rms_ulps=20.0, p99_ulp=300.0, median_ulp=5.0)
    fig = figures.noise_against_depth(profile, scaled)
    assert all(not ax.texts for ax in fig.axes)
    ticks = [t.get_text().strip() for t in fig.axes[-1].get_xticklabels()]
    assert "encoder layer 0" in ticks and all(t for t in ticks)


def test_the_settings_figure_draws_what_differs_and_says_what_it_left_out():
    """A bit-identical tensor (0) and a NaN one have no place on a log axis; all of them at 0 is a linear axis."""
    rows = [{"setting": "ort_threads", "value": str(n), "label": label, "max_abs_diff": diff}
            for n in (1, 2) for label, diff in (("h", 1e-7), ("z", 0.0), ("n", float("nan")))]
    fig = figures.settings_comparison(pd.DataFrame(rows))
    assert fig.axes[0].get_xscale() == "log" and "4 at 0 or non-finite not drawn" in fig.axes[0].get_xlabel()
    nothing = pd.DataFrame([{**r, "max_abs_diff": 0.0} for r in rows])
    assert figures.settings_comparison(nothing).axes[0].get_xscale() == "linear"
