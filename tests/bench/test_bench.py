"""The benchmark code runs and computes its ratios; the timings themselves are never asserted."""

import pytest
import yaml

from exactness.bench import run as benchmarks


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
    assert benchmarks._dac_arguments("dac_batching", 1.0, variant="tiny")[-2:] == ["variant", "tiny"]
    assert benchmarks._dac_arguments("dac_propagation", 10.0, ("variance_preserving",)) == [
        "-p", "seconds", "10", "-p", "inits", "[variance_preserving]"]
    assert yaml.safe_load("[variance_preserving]") == ["variance_preserving"]  # as `-p` parses the value


def _dac_pair(study, seconds, study_s, plain_s, inits="as the parameters", peak=1500.0):
    return [{"benchmark": study, "case": f"{seconds:g} s: study", "median_s": study_s, "seconds_of_audio": seconds,
             "inits": inits, "peak_memory_mb": peak},
            {"benchmark": study, "case": f"{seconds:g} s: plain forwards", "median_s": plain_s + 5,
             "encode_decode_s": plain_s, "seconds_of_audio": seconds, "inits": inits, "peak_memory_mb": 900.0}]


def test_the_added_time_per_audio_second_cancels_fixed_costs_and_pairs_only_equal_inits():
    rows = (_dac_pair("dac_propagation", 1.0, 60.0, 20.0) + _dac_pair("dac_propagation", 10.0, 420.0, 230.0)
            + _dac_pair("dac_propagation", 60.0, 1700.0, 1000.0, inits="variance_preserving"))
    (added,) = benchmarks.per_audio_second(rows)  # 10 -> 60 s changes the inits: no pair
    assert added["case"] == "1 -> 10 s: per added second"
    assert added["median_s"] == 40.0 and added["plain_encode_decode_per_s"] == 210.0 / 9
    assert added["ratio"] == 40.0 / (210.0 / 9) and added["meets"]  # 3x at 1 s, 1.7x per added second
    assert added["fixed_s"] == 20.0  # 60 s at 1 s of audio, 40 s of it the audio's
    slower = benchmarks.per_audio_second(_dac_pair("dac_batching", 1.0, 40.0, 16.0)
                                         + _dac_pair("dac_batching", 10.0, 500.0, 200.0))
    assert slower[0]["ratio"] == (460.0 / 9) / (184.0 / 9) and not slower[0]["meets"]
    longer = benchmarks.per_audio_second(_dac_pair("dac_batching", 1.0, 40.0, 16.0) + _dac_pair("dac_batching", 10.0,
                                         500.0, 200.0) + _dac_pair("dac_batching", 60.0, 1500.0, 1400.0))
    assert [r["case"] for r in longer] == ["1 -> 10 s: per added second", "10 -> 60 s: per added second"]
    assert longer[0]["fixed_s"] == 40.0 - 460.0 / 9 and longer[1]["fixed_s"] is None  # only from the shortest run


def test_the_time_target_is_judged_from_ten_seconds_and_memory_against_the_shortest_run():
    assert benchmarks.DAC_TIME_JUDGED_FROM_S == 10.0 and benchmarks.DAC_LONG_INITS[60.0] == ("variance_preserving",)
    rows = _dac_pair("dac_batching", 1.0, 40.0, 16.0, peak=1000.0) + _dac_pair("dac_batching", 10.0, 300, 200,
                                                                                peak=2100.0)
    rows[3]["case"] = "10 s: plain forwards (in the study's windows)"
    benchmarks._memory_growth(rows, 1.0)
    assert rows[2]["memory_over_shortest"] == 2.1 and not rows[2]["memory_meets"]
    assert "memory_over_shortest" not in rows[0] and "memory_over_shortest" not in rows[3]  # plain rows: no target


def test_the_overview_draws_each_dac_run_at_its_length_beside_its_plain_passes():
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd

    from exactness.bench.figures import overview

    rows = (_dac_pair("dac_propagation", 1.0, 60.0, 20.0) + _dac_pair("dac_propagation", 10.0, 420.0, 230.0)
            + _dac_pair("dac_propagation", 60.0, 1700.0, 1000.0, inits="variance_preserving"))
    rows += [{"benchmark": "screen", "case": "fast", "ratio": 25.0, "target": 10.0}]
    figure = overview(pd.DataFrame(rows))
    time_axis = figure.axes[2]
    lines = {line.get_label(): line for line in time_axis.get_lines()}
    study = [line for label, line in lines.items() if label == "propagation: study"]
    assert study and list(study[0].get_xdata()) == [1.0, 10.0] and list(study[0].get_ydata()) == [60.0, 420.0]
    plain = [line for label, line in lines.items() if label == "propagation: plain encode + decode"]
    assert list(plain[0].get_ydata()) == [20.0, 230.0]  # the passes' own time, not their process's
    assert any(label == "propagation (variance_preserving): study" for label in lines)
    assert figure.axes[0].axison and not figure.axes[1].axison  # a speed-up drawn; no scaling rows: no empty frame


def test_the_printed_table_names_each_missed_target_and_skips_the_unjudged(capsys):
    import pandas as pd

    rows = _dac_pair("dac_batching", 1.0, 40.0, 16.0, peak=1000.0) + _dac_pair("dac_batching", 10.0, 500.0, 200.0,
                                                                                peak=2100.0)
    rows[0].update(ratio=2.5, target=None, meets=None, ratio_of="study / (encode + decode)")  # 1 s: not judged
    rows[2].update(ratio=2.5, target=2.0, meets=False, ratio_of="study / (encode + decode)")
    benchmarks._memory_growth(rows, 1.0)
    assert benchmarks.print_table(pd.DataFrame(rows)) == 1
    errors = capsys.readouterr().err.splitlines()
    assert errors == ["MISSED TARGET: dac_batching 10 s: study: study / (encode + decode) = 2.50, target 2",
                      "MISSED TARGET: dac_batching 10 s: study: peak 2100 MB, 2.10x the shortest clip's"]
    rows[2].update(ratio=1.5, meets=True, peak_memory_mb=1500.0)
    benchmarks._memory_growth(rows, 1.0)
    assert benchmarks.print_table(pd.DataFrame(rows)) == 0


@pytest.mark.slow
def test_the_dac_rows_run_the_study_as_a_user_does_beside_its_plain_passes(tmp_path):
    study, plain = benchmarks.dac_rows("dac_batching", (0.4,), tmp_path, variant="tiny")  # one length: no slope
    assert study["case"] == "0.4 s: study" and plain["case"] == "0.4 s: plain forwards"
    assert study["peak_memory_mb"] > 100 and plain["peak_memory_mb"] > 100 and plain["encode_decode_s"] > 0
    assert study["ratio"] == study["median_s"] / plain["encode_decode_s"] and study["target"] is None  # < 10 s
    (params,) = tmp_path.glob("dac_batching/*/params.yaml")  # the study ran as asked, its report beside
    assert yaml.safe_load(params.read_text())["clip_seconds"] == [0.4, 0.24]
    assert (params.parent / "report.html").exists()


def test_benchmarks_md_names_the_date_the_machine_and_every_missed_target(tmp_path):
    import pandas as pd

    from exactness.bench.markdown import write_benchmarks

    table = pd.DataFrame([{"benchmark": "discrete ops screen", "case": "M: screen", "median_s": 2.0, "rate": 20.0,
                           "unit": "seeds/s", "ratio": 12.0, "target": 10.0, "meets": True},
                          {"benchmark": "discrete_ops", "case": "default, warm export cache", "median_s": 400.0,
                           "rate": 0.0025, "unit": "runs/s", "target_s": 300.0, "meets": False}])
    machine = {"cpu_model": "Some CPU", "usable_cpus": 2, "versions": {"torch": "2.13.0+cpu", "onnxruntime": "1.31.1"}}
    text = write_benchmarks(table, tmp_path / "BENCHMARKS.md", machine, tmp_path, ("discrete_ops",),
                            ("dac", "make_run")).read_text()
    assert "Some CPU (2 cores; torch 2.13.0+cpu, onnxruntime 1.31.1)" in text and "UTC" in text
    assert "Parts measured: discrete_ops; not measured in this run: dac, make_run." in text
    assert "Targets missed: 1 (discrete_ops default, warm export cache)" in text and "| **no** |" in text


def test_a_missed_wall_time_target_is_printed_with_its_seconds(capsys):
    import pandas as pd

    table = pd.DataFrame([{"benchmark": "make run", "case": "fresh clone", "median_s": 900.0, "rate": 1 / 900,
                           "unit": "runs/s", "target_s": 720.0, "meets": False}])
    assert benchmarks.print_table(table) == 1
    assert "MISSED TARGET: make run fresh clone: 900 s, target 720 s" in capsys.readouterr().err


def test_the_discrete_ops_screen_row_runs_as_the_study_prepares_a_class():
    from exactness.bench import discrete_ops

    screen, whole, plain, phase = discrete_ops.screen_against_checks(classes=("BertModel",), screened=2, checked=1)
    assert (screen["case"], whole["case"], plain["case"]) == ("BertModel: screen", "BertModel: whole check",
                                                              "BertModel: whole plain forward")
    assert screen["rate"] > 0 and whole["rate"] > 0 and plain["rate"] > 0
    assert screen["ratio"] == screen["rate"] / whole["rate"]
    # the screen phase is the screen's time scaled to the default run's seeds on its cores
    assert phase["median_s"] == discrete_ops.DEFAULT_SEEDS * screen["median_s"] / 2 / discrete_ops.CORES
    assert phase["target_s"] == discrete_ops.DEFAULT_WARM_S and phase["meets"] == (phase["median_s"] <= 300)


def test_the_screen_rows_cover_every_default_class_a_screen_waits_on():
    import pathlib

    from exactness.bench import discrete_ops

    default = pathlib.Path(__file__).resolve().parents[2] / "params" / "discrete_ops" / "default.yaml"
    models = yaml.safe_load(default.read_text())["models"]
    assert sorted(discrete_ops.CLASSES + discrete_ops.NEVER_SCREENED) == sorted(models)
    assert not set(discrete_ops.CLASSES) & set(discrete_ops.NEVER_SCREENED)


@pytest.mark.slow
def test_the_shape_modes_row_times_one_screen_against_each_mode_alone():
    from exactness.bench import discrete_ops

    shared, alone = discrete_ops.shape_modes_shared(classes=("XLMForQuestionAnswering",), screened=2)
    assert (shared["case"], alone["case"]) == ("XLMForQuestionAnswering: both shape modes, one screen",
                                               "XLMForQuestionAnswering: both shape modes, each screened alone")
    assert shared["ratio"] == shared["rate"] / alone["rate"] and "target" not in shared
