"""The benchmark code runs and computes its ratios; the timings themselves are never asserted."""

import yaml

from exactness.workbook import benchmarks


def test_ratios_are_the_faster_rate_over_the_slower_one_against_a_target():
    rows = [{"case": "slow", "rate": 2.0}, {"case": "fast", "rate": 50.0}]
    benchmarks._ratio(rows, 10.0, "fast", "slow")
    assert rows[1]["ratio"] == 25.0 and rows[1]["meets"] and rows[1]["ratio_of"] == "fast / slow"
    benchmarks._ratio(rows, 30.0, "fast", "slow")
    assert not rows[1]["meets"]


def test_the_screen_benchmark_measures_both_paths_on_the_same_seeds():
    plain, fast = benchmarks.screen_paths(repeats=1, plain_seeds=2, fast_seeds=3)
    assert plain["items"] == 2 and fast["items"] == 3 and plain["unit"] == fast["unit"] == "seeds/s"
    assert fast["ratio"] == fast["rate"] / plain["rate"] and fast["target"] == 10.0


def test_the_dac_rows_plain_passes_are_the_studies_own_and_their_arguments_the_defaults_at_a_length():
    propagation = benchmarks.plain_dac_passes("dac_propagation", 0.05, variant="tiny")
    batching = benchmarks.plain_dac_passes("dac_batching", 0.05, windowed=True, variant="tiny")
    assert propagation["encode_decode"] > 0 and propagation["more_decodes"] > 0  # the codec table's second decode
    assert batching["encode_decode"] > 0 and batching["more_decodes"] == 0
    assert benchmarks._dac_arguments("dac_propagation", 60.0) == ["-p", "seconds", "60"]
    assert benchmarks._dac_arguments("dac_batching", 10.0) == ["-p", "clip_seconds", "[10, 6]"]
    assert benchmarks._dac_arguments("dac_propagation", 10.0, ("variance_preserving",)) == [
        "-p", "seconds", "10", "-p", "inits", "[variance_preserving]"]
    assert yaml.safe_load("[variance_preserving]") == ["variance_preserving"]  # as `-p` parses the value
