"""The allocator benchmark's bookkeeping (the measurement itself runs in `make bench`, never in tests)."""
from exactness.workbook import benchmark_allocator


def test_rows_alternate_processes_and_judge_the_ten_percent_target(monkeypatch):
    calls = []

    def fake(model, keep, checks):
        calls.append(keep)
        return checks * (0.010 if keep else 0.012)  # kept: 20% faster
    monkeypatch.setattr(benchmark_allocator, "_measure", fake)
    rows = benchmark_allocator.allocator_rows(repeats=2, checks=5, models=("M",))
    assert calls == [False, True, False, True]
    default, kept = rows
    assert default["case"] == "M: glibc default" and abs(kept["ratio"] - 1.2) < 1e-9 and kept["meets"]
    monkeypatch.setattr(benchmark_allocator, "_measure", lambda m, keep, n: n * (0.0105 if keep else 0.011))
    assert not benchmark_allocator.allocator_rows(repeats=1, checks=5, models=("M",))[1]["meets"]  # 4.8%
