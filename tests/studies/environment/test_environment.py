import math

import pandas as pd

from exactness.studies.environment import answers as environment_answers
from exactness.studies.environment import findings as environment_findings
from exactness.studies.environment import sentences as environment_sentences
from exactness.studies.environment import study as environment
from exactness.workbook import machine

HARDWARE = {"cpu_model": "Test CPU", "usable_cpus": 4, "vector_extensions": ["sse4_2", "avx2", "fma"],
            "torch_cpu_capability": "AVX2", "torch_intra_op_threads": 4, "ort_intra_op_threads_setting": 0}
KEPT = {"numpy_keeps_subnormals": True, "torch_keeps_subnormals": True, "ort_keeps_subnormals": True}


def test_ieee_ulp_is_the_power_of_two_below_the_magnitude_over_the_mantissa():
    assert environment.ieee_ulp(1.0, "float32") == 2.0 ** -23
    assert environment.ieee_ulp(10.0, "float32") == 2.0 ** -20
    assert environment.ieee_ulp(0.001, "float64") == 2.0 ** (-10 - 52)
    assert environment.ieee_ulp(1000.0, "bfloat16") == 2.0 ** (9 - 7)


def test_the_measured_spacing_of_this_machine_agrees_with_ieee():
    checked = environment.spacing_against_ieee(machine.float_spacing([0.001, 1.0, 10.0, 1000.0]))
    assert len(checked) == 16 and checked.agrees.all()


def test_spacing_finding_calls_the_seeds_ulp_near_ten_a_fact_and_flags_a_wrong_spacing():
    spacing = machine.float_spacing([1.0, 10.0])
    finding = environment_findings.spacing_finding(environment.spacing_against_ieee(spacing))
    # arithmetic any IEEE machine gives: checked, never "reproduced"
    assert finding.verdict == "fact" and "9.5e-07" in finding.source and "IEEE 754 value" in finding.claim
    assert "reproduc" not in finding.claim
    wrong = spacing.assign(float32=spacing.float32 * 2)  # a spacing no IEEE float32 has
    finding = environment_findings.spacing_finding(environment.spacing_against_ieee(wrong))
    assert finding.verdict == "differs" and "differ from IEEE 754" in finding.claim and "unlike" in finding.claim


def test_spacing_finding_without_magnitude_ten_has_no_seed_figure():
    finding = environment_findings.spacing_finding(environment.spacing_against_ieee(machine.float_spacing([1.0])))
    assert finding.verdict == "fact" and finding.source == ""


def test_subnormals_finding_names_the_runtime_that_flushes():
    assert "keeps" in environment_findings.subnormals_finding(KEPT).claim
    finding = environment_findings.subnormals_finding({**KEPT, "ort_keeps_subnormals": False})
    assert "flushed to zero by ort" in finding.claim and "ort flushes" in finding.ours


def test_threads_finding_says_whether_reductions_can_split():
    assert "summation order depends" in environment_findings.threads_finding(HARDWARE).claim
    single = {**HARDWARE, "torch_intra_op_threads": 1, "ort_intra_op_threads_setting": 1}
    assert "reductions run on one thread" in environment_findings.threads_finding(single).claim


def test_kernels_finding_names_the_widest_extension():
    claim = environment_findings.kernels_finding(HARDWARE).claim
    assert "widest extension avx2" in claim and "(cpu_kernels: native, avx2, default)" in claim
    assert "no vector extension" in environment_findings.kernels_finding({**HARDWARE, "vector_extensions": []}).claim


def test_findings_of_this_machine_are_all_records():
    spacing = machine.float_spacing([1.0, 10.0])
    found = environment_findings.findings(machine.software_versions(), environment.hardware_facts(),
                                 environment.float_behaviour(), spacing)
    assert 3 <= len(found) <= 7 and all(f.verdict in ("new", "fact") for f in found)
    assert isinstance(environment.spacing_against_ieee(spacing), pd.DataFrame)


def test_ieee_spacing_holds_below_the_normal_range_and_is_absent_beyond_the_largest_value():
    assert environment.ieee_ulp(1e-5, "float16") == 2.0 ** (-14 - 10)  # a float16 subnormal: 5.96e-08
    assert environment.ieee_ulp(1e-40, "float32") == 2.0 ** (-126 - 23)
    assert math.isnan(environment.ieee_ulp(1e5, "float16")) and not environment.representable(1e5, "float16")
    assert environment.ieee_ulp(6e4, "float16") == 32.0


def test_subnormal_and_out_of_range_magnitudes_are_no_false_disagreement():
    checked = environment.spacing_against_ieee(machine.float_spacing([1e-5, 1e5, 1e39]))
    assert checked[checked.representable].agrees.all()
    finding = environment_findings.spacing_finding(checked)
    assert "differ" not in finding.claim and "beyond the dtype's range and are not compared" in finding.claim


def test_subnormals_sentence_names_the_runtimes_that_flush():
    kept = {"torch_keeps_subnormals": True, "onnxruntime_keeps_subnormals": True, "providers": "CPU"}
    assert environment_sentences.subnormals_sentence(kept) == "Subnormal float32 values are kept by every runtime."
    flushed = environment_sentences.subnormals_sentence({**kept, "onnxruntime_keeps_subnormals": False})
    assert flushed.startswith("Subnormals are flushed to zero by: onnxruntime;")
    assert environment.summary_values({"torch": "t", "onnxruntime": "o"},
                                      {"cpu_model": "c", "torch_intra_op_threads": 2},
                                      {**kept, "torch_keeps_subnormals": False},
                                      pd.DataFrame({"magnitude": [2.0], "float32": [2.4e-7]})) == {
        "cpu": "c", "torch": "t", "onnxruntime": "o", "torch_threads": 2, "subnormals_kept": False,
        "float32_ulp_at_1": None}


def test_spacing_sentence_counts_the_spacings_that_match_ieee():
    spacing = pd.DataFrame({"magnitude": [1.0, 10.0], "float32": [2.0**-23, 2.0**-20]})
    checked = pd.DataFrame({"agrees": [True, False, True]})
    assert environment_sentences.spacing_sentence(spacing, checked) == (
        "At magnitude 1, one float32 ulp is 1.19e-07; 2 of 3 measured spacings equal the IEEE 754 value.")


def _spacing(magnitudes=(1e-3, 1.0)):
    return machine.float_spacing(magnitudes)


def test_the_machine_answers_in_one_line_with_its_kernels_versions_and_float_behaviour():
    versions = {"torch": "2.13.0", "onnxruntime": "1.31.1"}
    behaviour = {**KEPT, "ort_default_graph_optimization_level": "GraphOptimizationLevel.ORT_ENABLE_ALL"}
    (line,) = environment_answers.answers(versions, HARDWARE, behaviour, _spacing())
    assert line.subject == "Test CPU (4 CPUs, AVX2 kernels)" and line.cause == "IEEE floats"
    assert ("AVX2 kernels, torch 2.13.0 and onnxruntime 1.31.1, at the thread counts each report states (this "
            "machine's torch default: 4 threads)") in line.action
    assert "8 of 8 float spacings" in line.proof and "all (every graph optimisation)" in line.proof
    assert "GraphOptimizationLevel" not in line.proof
    flushing = environment_answers.answers(versions, HARDWARE, {**behaviour, "ort_keeps_subnormals": False},
                                           _spacing())[0]
    assert flushing.cause == "flushes subnormals" and "flushed by ort" in flushing.proof


def test_facts_read_in_words_not_as_their_recorded_names():
    level = "GraphOptimizationLevel.ORT_ENABLE_ALL"
    table = environment_sentences.facts_for_people({"ort_intra_op_threads_setting": 0, "numpy_keeps_subnormals": True,
                                          "ort_default_graph_optimization_level": level, "some_new_fact": 3})
    assert not table.fact.str.contains("_").any() and "ONNX Runtime" in table.fact.iloc[0]
    assert table.value.tolist() == ["0", "yes", "all (every graph optimisation)", "3"]
