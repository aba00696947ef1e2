"""The ulp-noise notebook's computed sentences (`studies.ulp_noise.findings`, second half)."""
import pandas as pd

from exactness.studies.ulp_noise import sentences as ulp_noise_sentences


def test_depth_sentence_names_the_loudest_tensor_and_the_ones_that_shrink():
    profile = pd.DataFrame({"tensor": ["enc.conv", "enc.norm", "enc.proj"], "max_abs_diff": [1e-6, 4e-7, 2e-6],
                            "median_ulp": [1.0, 3.0, 2.0], "growth": [float("nan"), 0.4, 5.0]})
    text = ulp_noise_sentences.depth_sentence(profile)
    assert text.startswith("The largest absolute noise is at enc.proj (2.0e-06)")
    assert "at most 3.0 ulps" in text and text.endswith(": norm.")
    assert ulp_noise_sentences.depth_sentence(profile.assign(max_abs_diff=0.0)).startswith("No tensor differs")


def test_settings_sentence_says_when_a_session_run_twice_differs():
    settings = pd.DataFrame({"setting": ["threads"] * 2, "value": ["1", "2"], "label": ["logits"] * 2,
                             "max_abs_diff": [1e-6, 3e-6], "median_ulp": [1.0, 2.0],
                             "run_twice_identical": [True, True]})
    assert "logits 1.0e-06 to 3.0e-06" in ulp_noise_sentences.settings_sentence(settings)
    assert "logits 2.0e-06." in ulp_noise_sentences.settings_sentence(settings.assign(max_abs_diff=2e-6))
    assert "every time" in ulp_noise_sentences.settings_sentence(settings)
    assert "NOT always" in ulp_noise_sentences.settings_sentence(settings.assign(run_twice_identical=[True, False]))


def test_passing_failing_sentence_needs_failing_seeds():
    comparison = pd.DataFrame({"model": ["M"], "label": ["logits"], "failing_seeds": [0], "passing_seeds": [9],
                               "p_value": [float("nan")]})
    assert ulp_noise_sentences.passing_failing_sentence(comparison, "run-1") == (
        "No near-tie run with failing seeds to compare (run-1).")
    tested = ulp_noise_sentences.passing_failing_sentence(comparison.assign(failing_seeds=3, p_value=0.01), "run-1")
    assert "M logits 0.010 (3 failing / 9 passing); some differ at the 5% level." in tested
    near = ulp_noise_sentences.passing_failing_sentence(comparison.assign(failing_seeds=3, p_value=0.0534), "run-1")
    assert "M logits 0.053 (3 failing / 9 passing); no difference detected" in near  # not 0.05 beside "no difference"


def test_float64_sentence_counts_each_side():
    closer = pd.DataFrame({"closer": ["ort", "ort", "eager", "tie"]})
    assert ulp_noise_sentences.float64_sentence(closer) == (
        "Against a float64 eager run of the same weights, ORT is closer on 2 tensors, eager float32 on 1, and they "
        "tie on 1.")
