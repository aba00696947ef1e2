"""Machine dependence: kernel sets offered, refused before any work, run in fresh processes, and compared."""

from dataclasses import replace

import pandas as pd
import pytest

from exactness.studies.near_tie import cpu_kernel_sets as kernels
from exactness.studies.near_tie import screen as near_tie_screen
from exactness.studies.near_tie import sentences as near_tie_sentences
from exactness.workbook import machine

MODEL = "Wav2Vec2ConformerForPreTraining"


def test_kernel_sets_follow_the_cpus_vector_extensions():
    assert machine.available_kernel_sets(["sse4_2", "avx2", "fma"]) == ["native", "avx2", "default"]
    assert machine.available_kernel_sets(["sse4_2", "avx2", "fma", "avx512f", "avx512bw"]) == [
        "native", "avx512", "avx2", "default"]
    assert machine.available_kernel_sets([]) == ["native"]


def test_a_kernel_set_the_cpu_lacks_or_that_does_not_exist_is_refused_with_the_choices():
    problems = kernels.unavailable(["avx512", "turbo"], extensions=["sse4_2", "avx2", "fma"])
    assert any("'avx512' needs avx512f, avx512bw, which this CPU lacks (available here: native, avx2, default)" in p
               for p in problems)
    assert any("'turbo' is not a kernel set" in p for p in problems)
    assert kernels.unavailable(["native", "avx2"], extensions=["sse4_2", "avx2", "fma"]) == []


def _screen(gaps, ulps=None):
    return pd.DataFrame({"model": MODEL, "seed": range(len(gaps)), "min_gap": gaps,
                         "min_gap_ulps": ulps or [g * 1e7 for g in gaps]})


def _checks(failing, seeds):
    return pd.DataFrame({"model": MODEL, "seed": seeds, "test_rule_passed": [s not in failing for s in seeds]})


def test_the_comparison_counts_identical_gaps_shared_candidates_and_shared_failures():
    native = _screen([1e-6, 2e-6, 1e-3, 5e-3])
    other = _screen([1e-6, 3e-5, 1e-3, 4e-3])
    table = kernels.compare({"native": native, "avx2": other},
                            {"native": _checks({0}, [0, 1]), "avx2": _checks({0}, [0])}, 1.5e-5).iloc[0]
    assert table.identical_gap_fraction == 0.5 and (table.candidates, table.candidates_other) == (2, 1)
    assert (table.candidates_both, table.failing, table.failing_other, table.failing_both) == (1, 1, 1, 1)
    text = near_tie_sentences.kernel_sets_sentence(kernels.compare({"native": native, "avx2": other},
                                            {"native": _checks({0}, [0, 1]), "avx2": _checks({0}, [0])}, 1.5e-5),
                            {"native": "AVX512", "avx2": "AVX2"})
    assert "A failing seed is portable" in text and "the rate is portable" in text and "50.0% of 4 seeds" in text


def test_a_seed_that_fails_on_one_set_only_is_not_portable_and_a_far_rate_is_not_either():
    native, other = _screen([1e-6] * 40), _screen([1e-6] * 40)
    table = kernels.compare({"native": native, "avx2": other},
                            {"native": _checks({0}, list(range(40))), "avx2": _checks({1}, list(range(40)))}, 1.5e-5)
    assert kernels.portability(table) == (False, True)
    assert "A failing seed is not portable" in near_tie_sentences.kernel_sets_sentence(table, {})
    seeds = list(range(40))
    many = kernels.compare({"native": native, "avx2": other},
                           {"native": _checks(set(), seeds), "avx2": _checks(set(range(20)), seeds)}, 1.5e-5)
    assert kernels.portability(many)[1] is False
    assert "the rate is not portable" in near_tie_sentences.kernel_sets_sentence(many, {})
    none = kernels.compare({"native": native, "avx2": other},
                           {"native": _checks(set(), [0]), "avx2": _checks(set(), [0])}, 1.5e-5)
    assert "not measured here" in near_tie_sentences.kernel_sets_sentence(none, {})
    assert "nor is the rate: no failure to compare" in near_tie_sentences.kernel_sets_sentence(none, {})
    assert "rate is portable" not in near_tie_sentences.kernel_sets_sentence(none, {})


@pytest.mark.slow
def test_a_kernel_set_runs_in_its_own_process_and_reaches_its_workers():
    few = kernels.SeedRange((MODEL,), 0, 12, 1e-12, shape_mode="static")
    screen, checks, capability = kernels.run_under("avx2", few, {})
    assert capability == "AVX2" and len(checks) == 0  # no gap below 1e-12: nothing to check
    native = near_tie_screen.screen([MODEL], 0, 12)
    assert screen.seed.tolist() == native.seed.tolist() and list(screen.columns) == list(native.columns)
    # 300 seeds make two chunks of the screen, so two worker processes run them: they inherit the kernel set
    more = kernels.SeedRange((MODEL,), 0, 300, 1e-12, shape_mode="static")
    one, _, _ = kernels.run_under("avx2", more, {})
    two, _, _ = kernels.run_under("avx2", replace(more, workers=2), {})
    pd.testing.assert_frame_equal(one, two)
    if machine.torch_cpu_capability() == "AVX512":  # oneDNN's AVX2 kernels round differently from its AVX-512 ones
        assert (screen.min_gap != native.min_gap).any()


def test_the_environment_report_lists_the_kernel_sets_this_cpu_offers():
    from exactness.studies.environment import findings as environment

    hardware = {"vector_extensions": ["sse4_2", "avx2", "fma"], "torch_cpu_capability": "AVX2", "cpu_model": "x"}
    finding = environment.kernels_finding(hardware)
    assert "(cpu_kernels: native, avx2, default)" in finding.claim
    assert "avx512" not in finding.claim


def test_across_kernel_sets_reruns_only_the_other_sets_with_the_native_failing_seeds(monkeypatch):
    import pandas as pd

    from exactness.studies.near_tie import cpu_kernel_sets as near_tie_kernels

    calls = []

    def fake_run_under(name, seeds, failing):
        calls.append((name, seeds.shape_mode, failing))
        return screen, checks[checks.shape_mode == seeds.shape_mode], "AVX2"

    screen = pd.DataFrame({"model": ["M", "M"], "seed": [0, 1], "min_gap": [1e-6, 1e-3], "min_gap_ulps": [2.0, 900.0]})
    checks = pd.DataFrame({"model": ["M", "M"], "seed": [0, 0], "shape_mode": ["static", "dynamic"],
                           "test_rule_passed": [False, True]})
    monkeypatch.setattr(near_tie_kernels, "run_under", fake_run_under)
    seeds = near_tie_kernels.SeedRange(("M",), 0, 2, 1e-5, shape_mode="static")
    none = near_tie_kernels.across_kernel_sets(["native"], screen, checks, seeds)
    assert none.table.empty and calls == [] and set(none.capabilities) == {"native"}
    sets = near_tie_kernels.across_kernel_sets(["native", "avx2"], screen, checks, seeds)
    assert calls == [("avx2", "static", {"M": [0]})] and sets.capabilities["avx2"] == "AVX2"
    assert set(sets.screens.kernel_set) == {"avx2"} and len(sets.table)
