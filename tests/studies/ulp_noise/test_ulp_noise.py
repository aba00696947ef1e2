import numpy as np
import pandas as pd
import pytest
import torch

from exactness.runtimes.eager_capture import EagerRun
from exactness.runtimes.onnx_graph import ExportedGraph
from exactness.studies.ulp_noise import depth as ulp_noise_depth
from exactness.studies.ulp_noise import findings as noise_findings
from exactness.studies.ulp_noise import study as ulp_noise


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


@pytest.mark.slow
def test_noise_draws_are_the_same_with_one_or_two_workers():
    pool = ulp_noise.noise_pool("Wav2Vec2ConformerForPreTraining", "static")
    one = ulp_noise.noise_draws(pool, range(5), workers=1)
    two = ulp_noise.noise_draws(pool, range(5), workers=2)  # the pool now reuses its swap: no exports
    pd.testing.assert_frame_equal(one, two)
    assert pool.exports == 2 and sorted(one.seed.unique()) == [0, 1, 2, 3, 4]


@pytest.mark.slow
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


# ---------------------------------------------------------------------------------------------------------
# Findings: fed tables that contradict each claim, the verdict and the wording follow

SEED_MODEL = "Wav2Vec2ConformerForPreTraining"


def _noise(scale: float, draws: int = 20) -> pd.DataFrame:
    seed_values = {"conv_features": 2.3e-6, "extract_features": 1.9e-6, "logits": 9.5e-6}
    rows = [{"seed": s, "label": label, "max_abs_diff": value * scale * (1 + 0.01 * s), "median_ulp": 2}
            for s in range(draws) for label, value in seed_values.items()]
    return pd.DataFrame(rows)


def test_median_interval_uses_order_statistics():
    low, high = ulp_noise.median_interval(np.arange(1, 101))  # ranks 40 and 61 for n = 100
    assert (low, high) == (40.0, 61.0)
    assert ulp_noise.median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0)  # too few values: the range


def test_medians_reproduce_the_seed_only_within_the_factor():
    same = noise_findings.medians_finding(_noise(1.0), SEED_MODEL, "dynamic")
    assert same.verdict == "reproduced" and "within a factor 3" in same.claim and "section 3" in same.source
    tenfold = noise_findings.medians_finding(_noise(10.0), SEED_MODEL, "dynamic")
    assert tenfold.verdict == "differs" and "not within a factor 3" in tenfold.claim


def test_medians_of_another_subject_or_export_are_not_compared():
    other = noise_findings.medians_finding(_noise(1.0), "UniSpeechForPreTraining", "dynamic")
    assert other.verdict == "not comparable" and "not UniSpeechForPreTraining" in other.why
    static = noise_findings.medians_finding(_noise(1.0), SEED_MODEL, "static")
    assert static.verdict == "not comparable" and "static" in static.why
    dac = pd.DataFrame({"seed": [0], "label": ["conv1"], "max_abs_diff": [1e-6], "median_ulp": [1]})
    finding = noise_findings.medians_finding(dac, "DacEncoder-tiny", "static")
    assert finding.verdict == "new" and finding.source == ""


def _profile(median_ulp, max_abs_diff=(1e-6, 4e-6, 1e-6)) -> pd.DataFrame:
    profile = pd.DataFrame({"depth": range(3), "tensor": ["a.conv", "b.layer_norm", "c.logits"],
                            "max_abs_diff": list(max_abs_diff), "median_ulp": list(median_ulp),
                            "p99_ulp": [10.0, 20.0, 30.0], "rel_rms": [1e-7] * 3})
    profile["growth"] = profile.max_abs_diff / profile.max_abs_diff.shift(1)
    return profile


def test_ulps_finding_says_a_few_rounding_steps_only_when_the_data_do():
    assert "a few float32 rounding steps" in noise_findings.ulps_finding(_profile([1, 2, 3])).claim
    many = noise_findings.ulps_finding(_profile([1, 200, 3])).claim
    assert many.startswith("Not just a few rounding steps") and "b.layer_norm" in many


def test_growth_finding_answers_in_relative_terms_per_layer_kind():
    scaled = pd.DataFrame({"depth": range(3), "tensor": ["m.dense", "m.layer_norm", "m.out_dense"],
                           "max_abs_diff": [1e-9, 3e-7, 3e-8], "rel_rms": [4e-6, 4.1e-6, 4e-6]})
    finding = noise_findings.growth_finding(scaled)
    assert "raised without relative growth at layer norm (x300)" in finding.claim
    assert "layer norm x1.0 relative" in finding.ours  # the factor of every kind: with our figures and in the table
    grows = noise_findings.growth_finding(scaled.assign(rel_rms=[4e-6, 4e-5, 4e-5]))
    assert "relative noise grows at layer norm (x10)" in grows.claim
    exact = noise_findings.growth_finding(scaled.assign(max_abs_diff=0.0, rel_rms=0.0))
    assert exact.claim.startswith("Every one of the 3 module outputs is bit-identical")
    # two outputs differ, each after an exact input: no factor, and the finding must not call them bit-identical
    made_here = noise_findings.growth_finding(scaled.assign(max_abs_diff=[4.8e-7, 0.0, 1e-7], rel_rms=[1e-7, 0, 1e-8],
                                                            input_module=["", "m.dense", ""]))
    assert made_here.claim.startswith("2 of 3 module outputs differ") and "4.8e-07, at m.dense" in made_here.claim
    assert "bit-identical" not in made_here.claim and "none has a measured input that differs" in made_here.claim
    # a container repeats its last child's output: counted once, as the leaf
    nested = scaled.assign(tensor=["m", "m.layer_norm", "m.out_dense"], max_abs_diff=[1e-7, 0.0, 1e-7],
                           rel_rms=[1e-8, 0, 1e-8], input_module=["", "", ""])
    assert noise_findings.growth_finding(nested).claim.startswith("1 of 2 module outputs differs")
    bare = noise_findings.growth_finding(scaled.iloc[:0])
    assert bare.claim.startswith("The model has no module whose output could be compared")


def test_float64_finding_follows_the_counts():
    mixed = pd.DataFrame({"closer": ["ort", "eager", "tie"]})
    assert "neither side is the exact one" in noise_findings.float64_finding(mixed).claim
    mostly_eager = pd.DataFrame({"closer": ["eager"] * 8 + ["ort"]})
    assert "eager float32 is usually the closer one" in noise_findings.float64_finding(mostly_eager).claim
    ort = pd.DataFrame({"closer": ["ort", "ort", "tie"]})
    assert "ORT is never further" in noise_findings.float64_finding(ort).claim


def _settings(spread: float, identical: bool = True) -> pd.DataFrame:
    return pd.DataFrame({"setting": ["ort_threads", "ort_threads"], "value": ["1", "2"], "seed": [0, 0],
                         "label": ["logits", "logits"], "max_abs_diff": [1e-6, 1e-6 * spread],
                         "median_ulp": [1, 1], "run_twice_identical": [True, identical]})


def test_settings_finding_tells_a_change_from_none():
    assert "leave the noise's size alone" in noise_findings.settings_finding(_settings(1.5)).claim
    changed = noise_findings.settings_finding(_settings(10.0, identical=False)).claim
    assert "change the noise" in changed and "NOT always bit-identical" in changed


def _comparison(p_value: float, model: str = SEED_MODEL) -> pd.DataFrame:
    return pd.DataFrame({"model": [model], "label": ["logits"], "failing_seeds": [3], "passing_seeds": [40],
                         "failing_median": [1e-5], "passing_median": [1e-5], "u": [60.0], "p_value": [p_value]})


def test_passing_failing_finding_compares_with_the_seed_on_its_model_only():
    same = noise_findings.passing_failing_finding(_comparison(0.6).assign(failing_seeds=12))
    assert same.verdict == "reproduced" and "No difference in noise" in same.claim and "section 5" in same.source
    # 3 failing seeds: no difference found cannot bear out "the same"
    few = noise_findings.passing_failing_finding(_comparison(0.6))
    assert few.verdict == "not comparable" and few.why.startswith("3 failing seeds of")
    noisier = noise_findings.passing_failing_finding(_comparison(0.001))
    assert noisier.verdict == "differs" and "differ in noise" in noisier.claim
    other = noise_findings.passing_failing_finding(_comparison(0.6, "UniSpeechForPreTraining"))
    assert other.verdict == "new" and other.source == ""
    nothing = noise_findings.passing_failing_finding(pd.DataFrame())
    assert nothing.verdict == "not comparable" and "no near-tie run" in nothing.claim
    passing_only = noise_findings.passing_failing_finding(_comparison(0.6).assign(failing_seeds=0), "run-7")
    assert passing_only.verdict == "not comparable" and "run-7 has no failing seed" in passing_only.claim


def test_medians_of_few_draws_say_range_not_interval():
    few = noise_findings.medians_finding(_noise(1.0, draws=4), SEED_MODEL, "dynamic")
    assert "range of 4 draws" in few.ours and "95% interval" not in few.ours
    assert "95% interval" in noise_findings.medians_finding(_noise(1.0, draws=20), SEED_MODEL, "dynamic").ours


def test_rms_ulps_count_rounding_steps_of_the_tensors_scale():
    from exactness.compare.scale import rms_ulps

    # RMS 1.0 (diff / rel_rms): 1 ulp there is 2**-23, so a diff of 2**-21 is 4 ulps of the RMS
    assert rms_ulps([2.0 ** -21], [2.0 ** -21]).tolist() == [4.0]
    assert rms_ulps([0.0], [0.0]).tolist() == [0.0]  # no difference: 0, whatever the scale
    assert np.isnan(rms_ulps([1e-6], [float("nan")])[0])  # all-zero tensor: no scale to measure in


def test_ulps_finding_puts_the_worst_element_counts_beside_the_scale():
    profile = _profile([1, 2, 3])
    scaled = pd.DataFrame({"tensor": ["a.conv", "c.logits"], "rms_ulps": [3.0, 12.0]})
    finding = noise_findings.ulps_finding(profile, scaled)
    assert "in ulps of each tensor's RMS the worst difference is 12 (c.logits)" in finding.claim
    assert "elements far below the RMS" in finding.ours  # the 99th-percentile element reaches 30 ulps > 12
    larger_scale = noise_findings.ulps_finding(profile, scaled.assign(rms_ulps=[3.0, 50.0]))
    assert "far below" not in larger_scale.ours
    located = noise_findings.ulps_finding(profile, scaled.assign(worst_of_rms=[1e-4, 3e-4],
                                                                 top_ulps_below_rms=[0.01, 0.03]))
    assert "worst element at a median 2.0e-04 of the RMS" in located.ours
    assert len(located.claim) < len(located.claim.split(";")[0]) + 90  # two figures, not a paragraph


def test_the_ulps_finding_names_the_worst_single_draw_beside_the_median_draw():
    from exactness.compare.scale import rms_ulps

    noise = pd.DataFrame({"seed": [0, 1, 2], "tensor": "c.logits", "max_abs_diff": [1e-6, 1e-6, 8e-6],
                          "rel_rms": [1e-7, 1e-7, 8e-7]})
    scaled = ulp_noise_depth.scale_profile(noise.assign(depth=0, median_ulp=2.0, p99_ulp=9.0, max_ulp=30.0))
    claim = noise_findings.ulps_finding(_profile([1, 2, 3]), scaled, noise).claim
    # 1e-6 at an RMS of 10 is 1.0 ulps of the RMS (2 of 3 draws); 8e-6 at 10 is 8.4 (seed 2 alone)
    assert rms_ulps([1e-6, 8e-6], [1e-7, 8e-7]).round(1).tolist() == [1.0, 8.4]
    assert "worst difference is 1.0 (c.logits) in the median draw, 8.4 (c.logits) in the worst draw." in claim
