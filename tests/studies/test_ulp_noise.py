import numpy as np
import pandas as pd
import pytest
import torch

from exactness.runtimes.eager_capture import EagerRun
from exactness.runtimes.onnx_graph import ExportedGraph
from exactness.studies import ulp_noise


def test_mann_whitney_matches_known_values():
    # by hand: U = 3 for a = [1, 2, 3] against b = [4, 5, 0]; mean 4.5, sigma sqrt(9 * 7 / 12) = 2.291,
    # z = -0.655, two-sided p = erfc(0.655 / sqrt 2) = 0.5127 (normal approximation, no continuity correction)
    u, p = ulp_noise.mann_whitney([1, 2, 3], [4, 5, 0])
    assert u == 3 and p == pytest.approx(0.5127, abs=1e-3)
    u, p = ulp_noise.mann_whitney(np.arange(30), np.arange(30) + 100)
    assert u == 0 and p < 1e-6


def test_mann_whitney_of_identical_samples_is_not_significant():
    _, p = ulp_noise.mann_whitney([1.0] * 5, [1.0] * 7)
    assert p == 1.0


def test_seed_medians_put_the_seed_beside_ours():
    noise = pd.DataFrame({"label": ["logits", "logits", "conv_features", ""], "max_abs_diff": [1e-5, 3e-5, 2e-6, 1.0],
                          "median_ulp": [4, 6, 2, 0]})
    table = ulp_noise.seed_medians(noise).set_index("tensor")
    assert table.loc["logits", "ours_median_max_abs_diff"] == 2e-5
    assert table.loc["logits", "seed_000_median"] == 9.5e-6
    assert np.isnan(table.loc["extract_features", "ours_median_max_abs_diff"])


def test_depth_profile_reports_growth_between_neighbours():
    noise = pd.DataFrame({"depth": [0, 1, 0, 1], "tensor": ["a", "b", "a", "b"], "max_abs_diff": [1.0, 4.0, 1.0, 4.0],
                          "median_ulp": [1, 1, 1, 1], "p99_ulp": [1, 1, 1, 1], "rel_rms": [1, 1, 1, 1]})
    profile = ulp_noise.depth_profile(noise)
    assert profile.tensor.tolist() == ["a", "b"] and profile.growth.iloc[1] == 4.0


def test_noise_draws_are_the_same_with_one_or_two_workers():
    pool = ulp_noise.noise_pool("Wav2Vec2ConformerForPreTraining", "static")
    one = ulp_noise.noise_draws(pool, range(5), workers=1)
    two = ulp_noise.noise_draws(pool, range(5), workers=2)  # the pool now reuses its swap: no exports
    pd.testing.assert_frame_equal(one, two)
    assert pool.exports == 2 and sorted(one.seed.unique()) == [0, 1, 2, 3, 4]


def test_a_dac_encoder_is_compared_tensor_by_tensor():
    pool = ulp_noise.noise_pool("DacEncoder-tiny", "static")
    noise = ulp_noise.noise_draws(pool, range(3))
    assert set(noise[noise.label != ""].label) == {"conv1", "block0", "encoder_output"}
    assert noise.groupby("seed").tensor.count().min() > 20 and (noise.max_ulp >= 0).all()
    assert pool.swap_status.startswith("verified")


class _Runner:
    def __init__(self, values: dict[str, float]):
        self.graph = ExportedGraph(None, ["y"], {"encoder.conv1": "h"})
        self.values = values

    def run(self, inputs):
        return {name: np.full(4, value, dtype=np.float32) for name, value in self.values.items()}


def test_the_models_outputs_come_from_the_graph_as_exported_and_the_rest_from_the_exposing_run():
    eager = EagerRun({"y": torch.full((4,), 2.0)}, {"encoder.conv1": [torch.full((4,), 1.0)]})
    # exposing every value moved the output "y" (1.0 there, 2.0 in the graph as exported, as in eager)
    draw = ulp_noise._Draw(None, {}, eager, _Runner({"h": 1.5, "y": 1.0}), _Runner({"y": 2.0}))
    table = ulp_noise._table("DacEncoder-tiny", draw).set_index("tensor")
    assert table.loc["y", "max_abs_diff"] == 0.0  # read from the graph as exported
    assert table.loc["encoder.conv1", "max_abs_diff"] == 0.5 and table.loc["encoder.conv1", "label"] == "conv1"
    assert table.loc["y", "depth"] > table.loc["encoder.conv1", "depth"]  # the outputs come last
