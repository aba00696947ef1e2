"""The precision pairs: every seed compared, the proof of noise, the prediction, and a GPU run read back."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from conftest import REPO
from exactness.causes import Cause
from exactness.engine.answers import pair_answer
from exactness.runtimes.sides import Pair, SideError
from exactness.studies.near_tie import answers as near_tie_answers
from exactness.studies.near_tie import gpu_run, precision
from exactness.studies.near_tie import sentences as near_tie_sentences
from exactness.studies.near_tie.rules import STUDY
from exactness.workbook.wording import machine_words

MODEL = "Wav2Vec2ConformerForPreTraining"
GPU_RUN = REPO / "etc" / "gpu_runs" / "h200-2026-12-04"
TF32 = Pair.parse("eager:cpu:fp32 vs eager:cpu:tf32-conv")


def test_fast_and_plain_logits_agree_under_an_emulated_side():
    for seed in (0, 7):
        fast = precision.compare_seed(MODEL, TF32, seed, 1e-3, 1e-3, fast_paths=True, float64=True).row
        plain = precision.compare_seed(MODEL, TF32, seed, 1e-3, 1e-3, fast_paths=False, float64=True).row
        assert pd.Series(fast).equals(pd.Series(plain))  # NaN where no row flipped, on both


@pytest.fixture(scope="module")
def tf32_table():
    return precision.compare_pairs([MODEL], [TF32], 0, 160, calibration=60, workers=1, progress_every=1e9)


@pytest.mark.slow
def test_tf32_flips_codes_and_every_failure_flipped_one(tf32_table):
    failed = ~tf32_table.test_rule_passed.astype(bool)
    assert failed.sum() > 10  # about one seed in five: TF32's noise is a thousand times the CPU's
    assert (tf32_table.n_flipped_rows[failed] > 0).all()
    assert (tf32_table.max_logit_diff > 1e-3).mean() > 0.9
    (summary,) = precision.summarize(tf32_table)
    assert summary.failures_without_flip == 0 and summary.calibration_seeds == 60 and summary.held_out == 100
    # noise: a few of TF32's own roundoff units from float64, as float32 is a few tens of its own
    assert summary.other_error_units < 30 and summary.reference_error_units < 200
    assert summary.evidence.cause is Cause.NEAR_TIE
    assert summary.every_row_law.low <= summary.held_out_failures <= summary.every_row_law.high


def test_a_defect_is_not_called_noise(tf32_table):
    (summary,) = precision.summarize(tf32_table.assign(other_error_units=1e6))
    assert summary.evidence.cause is Cause.DEFECT
    # failures with the codes unchanged and both sides near float64: the precision's noise in the perplexity itself
    (summary,) = precision.summarize(tf32_table.assign(n_flipped_rows=0))
    assert summary.evidence.cause is Cause.PRECISION_NOISE
    assert "use_tf32=0" in pair_answer(summary.evidence).action
    assert "tie-aware" not in pair_answer(summary.evidence).action  # no flip to excuse


def test_the_answer_names_both_sides_and_what_to_turn_off(tf32_table):
    (summary,) = precision.summarize(tf32_table)
    line = pair_answer(summary.evidence, "none in 160 seeds")
    assert "eager CPU fp32 vs eager CPU TF32 convolutions (emulated)" in line.subject
    assert "torch.backends.cudnn.allow_tf32 = False" in line.action and "none in 160 seeds" in line.action
    assert line.rate.endswith(f"{int((~tf32_table.test_rule_passed).sum())} of 160 seeds)")
    assert line.flips.endswith(f"{int((tf32_table.n_flipped_rows > 0).sum())} of 160 seeds)")
    # a tie-aware comparison is offered only where it was measured to keep value checks on the class
    assert "or compare tie-aware" not in line.action and "exclude the outputs a flipped choice reaches" in line.action
    assert "or compare tie-aware" in pair_answer(summary.evidence, "none in 160 seeds", tie_aware=True).action


def test_a_cuda_pair_is_refused_here_in_one_line():
    problem = STUDY.rules["pairs"].problem(["eager:cpu:fp32 vs eager:cuda:tf32-conv"])
    assert "python -m exactness.gpu" in problem
    assert "ONNX Runtime" in STUDY.rules["pairs"].problem(["eager:cpu:fp32 vs ort:cpu:fp32"])
    assert "more than once" in STUDY.rules["pairs"].problem([TF32.spec, TF32.spec])
    assert STUDY.rules["pairs"].problem([TF32.spec]) is None
    with pytest.raises(SideError):
        precision.eager_pairs(["eager:cuda:fp32 vs eager:cuda:tf32"])


@pytest.mark.slow
def test_the_committed_gpu_run_reads_back_and_agrees_with_its_prototype():
    run = gpu_run.read(str(GPU_RUN))
    assert "NVIDIA H200" in machine_words(run.facts)
    pairs = set(run.table.pair)
    assert "eager:cpu:fp32 vs eager:cuda:tf32-conv" in pairs and "eager:cpu:fp32 vs eager:cpu:tf32-conv" in pairs
    first = run.table[run.table.pair == "eager:cpu:fp32 vs eager:cuda:tf32-conv"]
    assert len(first) == 19_885 and len(first.smallest_gaps.iloc[0]) == precision.SMALLEST_ROWS
    agreement = precision.emulated_against_cuda(run.table, pd.DataFrame())
    tf32 = agreement[agreement.cuda_pair == "eager:cpu:fp32 vs eager:cuda:tf32-conv"].iloc[0]
    assert tf32.both_fail < tf32.cuda_failures  # flips depend on each kernel's rounding: the sets differ
    assert abs(tf32.cuda_failures - tf32.emulated_failures) < 0.05 * tf32.cuda_failures


def test_without_a_gpu_run_the_gpu_section_is_empty_and_says_nothing(tmp_path, capsys):
    from exactness.workbook.artifacts import RunArtifacts

    tables = precision.gpu_tables(None, pd.DataFrame())
    assert (tables.summaries, len(tables.rates), len(tables.agreement)) == ([], 0, 0)
    artifacts = RunArtifacts(tmp_path / "run")
    near_tie_sentences.show_gpu_run(None, tables, pd.DataFrame(), artifacts)
    assert capsys.readouterr().out == "" and not list((tmp_path / "run").rglob("gpu_*"))


@pytest.mark.slow
def test_a_gpu_runs_tables_hold_its_cuda_pairs_beside_their_emulation():
    tables = precision.gpu_tables(gpu_run.read(str(GPU_RUN)), pd.DataFrame())
    assert len(tables.summaries) == len(tables.rates) > 0
    assert set(tables.rates.model) == {s.model for s in tables.summaries}
    assert set(tables.agreement.emulated_on) == {"the GPU machine's CPU"}  # no pair of this run to set beside


@pytest.mark.parametrize(("setup", "words"), [
    (lambda d: None, "not a folder"),
    (lambda d: d.mkdir(), "lacks machine.json"),
])
def test_a_folder_that_is_not_a_gpu_run_is_one_line(tmp_path, setup, words):
    folder = tmp_path / "run"
    setup(folder)
    problem = STUDY.rules["gpu_run"].problem(str(folder))
    assert words in problem and "\n" not in problem


def test_a_gpu_runs_machine_json_is_read_as_data_only(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    for name in gpu_run.FILES:
        (folder / name).write_bytes((GPU_RUN / name).read_bytes())
    (folder / "machine.json").write_text("[" * 100_000 + "]" * 100_000)
    assert "is not JSON" in STUDY.rules["gpu_run"].problem(str(folder))
    (folder / "machine.json").write_text(json.dumps({"gpu": "x"}))
    assert "no torch version" in STUDY.rules["gpu_run"].problem(str(folder))


def test_a_low_precision_sides_perplexity_rounds_in_its_own_dtype():
    """Autocast leaves the quantizer's mean and logarithm in bf16: the same codes give another perplexity there."""
    from exactness.models.quantizer_logits import plain_logits
    from exactness.runtimes.sides import Side

    logits = plain_logits(MODEL, 0)
    codes = logits.argmax(-1)
    fp32 = precision._perplexity(MODEL, codes, logits.shape)
    bf16 = precision._perplexity(MODEL, codes, logits.shape, torch.bfloat16, Side.parse("eager:cpu:bf16"))
    assert fp32 != bf16 and abs(bf16 - fp32) > 1e-3 * abs(fp32)  # beyond the export test's rtol, codes unchanged
    assert precision._perplexity(MODEL, codes, logits.shape, torch.float32, Side.parse("eager:cpu:tf32")) == fp32


def test_missing_float64_errors_are_undecided_never_a_defect(tf32_table):
    (summary,) = precision.summarize(tf32_table.assign(reference_error_units=float("nan"),
                                                       other_error_units=float("nan")))
    assert summary.evidence.cause is Cause.UNDECIDED


def test_no_flipped_calibration_seed_predicts_nothing_and_says_so(tf32_table):
    calm = tf32_table.assign(n_flipped_rows=tf32_table.n_flipped_rows.where(~tf32_table.calibration, 0))
    (summary,) = precision.summarize(calm)
    assert summary.every_row_law.expected != summary.every_row_law.expected  # NaN
    words = near_tie_sentences.prediction_sentence([summary])
    assert "not predicted (no calibration seed flipped" in words and "outside" not in words


@pytest.mark.slow
def test_a_classs_line_against_ort_keeps_its_name_beside_its_pair_lines_so_the_index_finds_it(tf32_table):
    from exactness.workbook import answers as workbook_answers
    from exactness.workbook import index

    (summary,) = precision.summarize(tf32_table)
    ort = workbook_answers.Answer(MODEL, "near-tie", "compare projected_states", "1 in 5,700")
    found = near_tie_answers.with_pairs([ort], [summary], [])
    assert [a.subject for a in found] == [MODEL, f"{MODEL} · {Pair.parse(summary.pair).label}"]
    entry = index.RunEntry(REPO, None, {})
    assert [index.in_class_table(entry, a) for a in found] == [True, False]


@pytest.mark.slow
def test_a_gpu_runs_section_shows_and_keeps_what_its_tables_hold(tmp_path, monkeypatch):
    """The section a `gpu_run` adds (the tf32 set's): its tables kept in the run folder, and its sentences read the
    rates, the probe and the prototype's figures from the run, not from anything fixed."""
    from exactness.workbook.artifacts import RunArtifacts

    said, shown = [], []
    monkeypatch.setattr(near_tie_sentences, "say", said.append)
    monkeypatch.setattr(near_tie_sentences, "table", lambda frame, **kw: shown.append(frame))
    gpu = gpu_run.read(str(GPU_RUN))
    tables = precision.gpu_tables(gpu, pd.DataFrame())
    artifacts = RunArtifacts(tmp_path / "run")
    near_tie_sentences.show_gpu_run(gpu, tables, pd.DataFrame(), artifacts)
    kept = pd.read_parquet(tmp_path / "run" / "tables" / "gpu_pair_rates.parquet")
    assert kept.failures.tolist() == tables.rates.failures.tolist() and len(shown) == 2  # rates, then agreement
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert "NVIDIA H200" in summary["gpu_run"]["machine"] and len(summary["gpu_run"]["pairs"]) == len(kept)
    text = " ".join(said)
    assert f"{gpu.facts['seeds']:,} conformer seeds per pair" in text
    probe = gpu.probe
    agree = int((probe.cuda_tf32_changes.astype(bool) == probe.emulated_changes.astype(bool)).sum())
    assert f"the same layers on {agree} of {len(probe)} kinds" in text
    tf32 = tables.rates[tables.rates.pair == "eager:cpu:fp32 vs eager:cuda:tf32-conv"].iloc[0]
    assert f"eager CUDA TF32 convolutions: {int(tf32.failures):,} failures in {int(tf32.seeds):,} seeds" in text
    # a flipped probe is read, not assumed: the sentence follows the table
    gpu.probe.loc[0, "cuda_tf32_changes"] = not gpu.probe.loc[0, "emulated_changes"]
    assert f"on {agree - 1} of {len(probe)} kinds" in near_tie_sentences.probe_sentence(gpu.probe)
