import pandas as pd

from exactness.studies.dac_propagation import findings as found
from exactness.studies.dac_propagation import sentences as propagation_sentences
from exactness.studies.dac_propagation import study as propagation


def _codec(decoded, codec_err, codec_max=None):
    return pd.DataFrame({"init": ["default", "default", "vp", "vp"], "variant": ["folded_fp32", "folded_fp64"] * 2,
                         "codec_rms_err": codec_err, "codec_max_abs_err": codec_max or [3 * e for e in codec_err],
                         "decoded_vs_float64": decoded})


def test_codec_ratio_is_taken_within_one_init_not_across_inits():
    # default: loud difference, large codec error; vp: small difference, small codec error. A ratio of the
    # largest difference (default's) over the smallest codec error (vp's) would mix two models.
    codec = _codec(decoded=[1e-4, 2e-4, 1e-7, 1e-7], codec_err=[0.5, 0.5, 1e-3, 1e-3])
    ratios = propagation.codec_run_ratios(codec)
    assert ratios["default"] == 2e-4 / 1.5 and ratios["vp"] == 1e-7 / 3e-3
    finding = found.codec_finding(codec)
    assert finding.verdict == "reproduced" and "default: 1.3e-04; vp: 3.3e-05" in finding.ours


def test_codec_ratio_sets_a_largest_difference_against_a_largest_codec_error_not_an_rms():
    codec = _codec(decoded=[1e-3, 1e-3, 1e-7, 1e-7], codec_err=[0.05, 0.05, 1e-3, 1e-3], codec_max=[0.5, 0.5, 1, 1])
    assert propagation.codec_run_ratios(codec)["default"] == 1e-3 / 0.5  # against the RMS it would read 0.02: "differs"
    assert found.codec_finding(codec).verdict == "reproduced"


def test_codec_finding_names_the_init_whose_runs_differ():
    finding = found.codec_finding(_codec(decoded=[1e-6, 1e-6, 1e-4, 5e-4], codec_err=[0.5, 0.5, 1e-3, 1e-3]))
    assert finding.verdict == "differs" and finding.claim.startswith("Under vp the runs differ by 0.17")


def test_config_finding_names_the_models_the_seed_measured():
    configs = pd.DataFrame({"case": ["16khz", "24khz", "44khz", "stale 16khz"],
                            "result": ["consistent", "consistent", "consistent", "hop length 512, expected 320"]})
    # the configurations are the library's own, consistent by construction: nothing the investigation's could
    # contradict, so the check is new, not a reproduction
    finding = found.config_finding(configs)
    assert finding.verdict == "new" and finding.source == "" and "library's own" in finding.claim


def test_codec_sentence_gives_one_value_where_every_run_has_the_same_codec_error():
    text = propagation_sentences.codec_sentence(_codec(decoded=[1e-7, 2e-7, 1e-5, 1e-5],
                                                       codec_err=[0.19, 0.19, 0.9, 0.95]))
    assert "default: 0.19 RMS and 0.57 at most" in text and "vp: 0.90 to 0.95 RMS and 2.7 to 2.8 at most" in text
