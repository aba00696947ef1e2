import math
import os
import pickle
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from exactness.models import dac
from exactness.models import dac_chunks as chunks
from exactness.studies.dac_propagation import sentences as propagation_sentences
from exactness.studies.dac_propagation import study as propagation
from exactness.workbook.study_rules import registration

WHOLE = 10**6  # frames per window: the tiny clips here run whole (their 250 frames exceed CHUNK_FRAMES)


@pytest.fixture(scope="module")
def propagated():
    plain = dac.template("tiny", 0, "variance_preserving")
    return propagation.propagate(plain, dac.audio("tiny", 0.25, 0), chunk_frames=WHOLE)


def _hooked_table(plain, audio):
    """The study as it first ran: every variant's whole encode and decode through the library with hooks on
    each layer, the references' outputs stored, compared afterwards (the oracle for one window)."""
    order = ["float64", "weight_norm", "folded_fp32", "folded_fp64"]
    models = {v: dac.build_variant(plain, v, shared=False) for v in order}
    paths = [p for _, p, _ in propagation.layers(plain)]
    with torch.no_grad():
        codes = models["weight_norm"].encode(audio).audio_codes
    stored, rows = {}, []
    for variant in order:
        stats, keep = {}, (stored.setdefault(variant, {}) if variant in propagation.REFERENCES else None)

        def measure(path, out, stats=stats, keep=keep, variant=variant):
            if keep is not None:
                keep[path] = out.detach()
            wide = out.detach().double()
            entry = stats.setdefault(path, {"act_rms": float(wide.square().mean().sqrt())})
            for against, activations in stored.items():
                if against != variant:
                    error = (wide - activations[path].double()).abs()
                    entry[against] = (float(error.max()), float(error.mean()))

        modules = dict(models[variant].named_modules())
        handles = [modules[p].register_forward_hook(lambda m, a, out, p=p: measure(p, out)) for p in paths]
        with torch.no_grad():
            models[variant].encode(audio.to(next(models[variant].parameters()).dtype))
            models[variant].decode(audio_codes=codes)
        for handle in handles:
            handle.remove()
        for depth, (label, path, role) in enumerate(propagation.layers(plain)):
            for against in (r for r in propagation.REFERENCES if r in stats[path]):
                max_err, mean_err = stats[path][against]
                rms = stats[path]["act_rms"]
                rows.append({"variant": variant, "against": against, "layer": label, "depth": depth, "role": role,
                             "max_abs_err": max_err, "mean_abs_err": mean_err, "act_rms": rms,
                             "rel_err": max_err / rms if rms else np.nan})
    return propagation._with_growth(pd.DataFrame(rows))


def test_one_window_in_lockstep_gives_the_hooked_whole_runs_table_value_for_value(propagated):
    table, _ = propagated
    oracle = _hooked_table(dac.template("tiny", 0, "variance_preserving"), dac.audio("tiny", 0.25, 0))
    pd.testing.assert_frame_equal(table, oracle, check_exact=True)


def test_windows_change_the_table_by_rounding_only(propagated):
    whole, _ = propagated
    chunked, extra = propagation.propagate(dac.template("tiny", 0, "variance_preserving"), dac.audio("tiny", 0.25, 0),
                                           chunk_frames=40)
    assert extra["chunk_frames"] == 40
    assert chunked[["variant", "against", "layer", "depth", "role"]].equals(whole[["variant", "against", "layer",
                                                                                   "depth", "role"]])
    assert (chunked[chunked.variant == "folded_fp32"].query("against == 'weight_norm'").max_abs_err == 0).all()
    assert np.allclose(chunked.act_rms, whole.act_rms, rtol=1e-5, atol=0)
    nonzero = whole.max_abs_err > 0
    ratio = chunked.max_abs_err[nonzero] / whole.max_abs_err[nonzero]
    assert ratio.between(0.5, 2).all()  # rounding-sized differences stay rounding-sized


def test_statistics_over_windows_keep_maxima_exact_and_sums_to_the_last_ulps():
    generator = torch.Generator().manual_seed(0)
    reference = torch.randn(3, 1000, generator=generator, dtype=torch.float64)
    outputs = {"float64": reference, "weight_norm": reference.float() + 1e-3 * torch.rand(3, 1000, generator=generator)}
    step = chunks.encoder_steps(dac.template("tiny", 0))[0]
    one = propagation.LayerStatistics(["float64", "weight_norm"])
    one.add(step, outputs)
    two = propagation.LayerStatistics(["float64", "weight_norm"])
    two.add(step, {k: v[..., :377] for k, v in outputs.items()})
    two.add(step, {k: v[..., 377:] for k, v in outputs.items()})
    error = (outputs["weight_norm"].double() - reference).abs()
    (max_one, sum_one), (max_two, sum_two) = (s.sums[("weight_norm", step.path)]["float64"] for s in (one, two))
    assert max_one == max_two == float(error.max())
    assert sum_one / error.numel() == float(error.mean())  # torch's mean is its sum over n: exactly
    assert abs(sum_two - sum_one) <= 4 * math.ulp(sum_one) and "float64" not in one.sums[("float64", step.path)]


def _slow_largest_difference(a, b, elements):
    """The weight table's function before its shortcuts: float64 differences in blocks of rows."""
    rows = max(1, elements // max(1, a[0].numel()))
    return max(float((a[i:i + rows].double() - b[i:i + rows].double()).abs().max()) for i in range(0, len(a), rows))


def _same(x, y):
    return x == y or (math.isnan(x) and math.isnan(y))


def test_largest_weight_difference_takes_shortcuts_that_give_the_float64_blocks_number():
    generator = torch.Generator().manual_seed(1)
    a = torch.randn(64, 3, 5, generator=generator)
    near = a + 1e-6 * torch.randn(64, 3, 5, generator=generator)  # float32 differences round: ties are likely
    wide = torch.tensor([[3e38, -3e38], [1.0, 2.0]])  # 6e38 overflows float32 but not float64
    nan, inf = a.clone(), a.clone()
    nan[5, 1, 2], inf[0, 0, 0] = float("nan"), float("inf")
    cases = [(a, a.clone()), (a, near), (near, a), (a, a.double()), (a, near.double() * 1.5),
             (wide, torch.tensor([[-3e38, 3e38], [1.0, 2.5]])), (nan, a), (nan, nan.clone()), (inf, inf.clone()),
             (inf, a)]
    for x, y in cases:
        ours = propagation._largest_difference(x, y, elements=7)
        assert _same(ours, _slow_largest_difference(x, y, 7)), (x.dtype, y.dtype, ours)
    ties = (a.double() - near.double()).abs()
    assert int((ties == ties.max()).sum()) == 1 and int(((a - near).abs() == (a - near).abs().max()).sum()) >= 1


def test_a_run_identical_to_an_earlier_one_takes_its_numbers_and_they_are_the_ones_it_would_compute():
    generator = torch.Generator().manual_seed(2)
    reference = torch.randn(2, 4, 300, generator=generator, dtype=torch.float64)
    recomputed = (reference + 1e-4 * torch.randn(2, 4, 300, generator=generator, dtype=torch.float64)).float()
    other = recomputed + 1e-5
    nan, inf = recomputed.clone(), recomputed.clone()
    nan[0, 0, 0], inf[1, 2, 3] = float("nan"), float("inf")
    order = ["float64", "weight_norm", "folded_fp32", "folded_fp64"]
    step = chunks.encoder_steps(dac.template("tiny", 0))[0]
    for twin_of_first, last in ((recomputed.clone(), other), (other, other.clone()), (nan, nan.clone()),
                                (inf, inf.clone())):
        outputs = {"float64": reference, "weight_norm": recomputed, "folded_fp32": twin_of_first,
                   "folded_fp64": last}
        statistics = propagation.LayerStatistics(order)
        statistics.add(step, outputs)
        for variant in order:
            value = outputs[variant].double()
            got = statistics.sums[(variant, step.path)]
            assert _same(got["squares"], float(value.square().sum())) and got["count"] == value.numel()
            for against in statistics.against[variant]:
                error = (value - outputs[against].double()).abs()
                expected = (float(error.max()), float(error.sum()))
                assert all(map(_same, got[against], expected)), (variant, against, got[against], expected)


def test_layers_follow_the_seed_naming():
    labels = [label for label, _, _ in propagation.layers(dac.template("tiny", 0))]
    assert labels[:5] == ["encoder.Conv1", "encoder.Block0.res_unit1", "encoder.Block0.res_unit2",
                          "encoder.Block0.res_unit3", "encoder.Block0"]
    assert "encoder.Snake1" in labels and labels[-1] == "decoder.Conv2"


def test_fold_in_float32_is_bit_identical_to_recomputing(propagated):
    table, _ = propagated
    same = table[(table.variant == "folded_fp32") & (table.against == "weight_norm")]
    assert (same.max_abs_err == 0).all()


def test_the_float32_fold_runs_once_as_weight_norms_twin(propagated):
    _, extra = propagated
    assert extra["twins"] == {"folded_fp32": "weight_norm"}


def test_a_twins_own_decode_is_the_one_its_run_would_compute(propagated):
    _, extra = propagated
    codec = propagation.codec_errors(extra, dac.audio("tiny", 0.25, 0)).set_index("variant")
    twin = extra["models"]["folded_fp32"]
    own = chunks.decode(twin, extra["results"]["folded_fp32"]["quantized"], WHOLE).double()
    audio = dac.audio("tiny", 0.25, 0)[:, 0, :own.shape[-1]].double()
    assert codec.loc["folded_fp32", "codec_max_abs_err"] == float((own - audio).abs().max())
    assert codec.loc["folded_fp32"].equals(codec.loc["weight_norm"])


@pytest.mark.slow
def test_the_kernel_environment_of_the_study_changes_no_number(propagated):
    """Huge pages (the study's registered kernel environment) move where tensors live, never what they hold: the
    same table in a process that starts with them."""
    code = ("import pickle, sys; from exactness.models import dac; "
            "from exactness.studies.dac_propagation import study as p; "
            "table, _ = p.propagate(dac.template('tiny', 0, 'variance_preserving'), dac.audio('tiny', 0.25, 0), "
            f"chunk_frames={WHOLE}); sys.stdout.buffer.write(pickle.dumps(table))")
    environment = {**os.environ, **registration("dac_propagation").kernel_environment}
    assert environment["THP_MEM_ALLOC_ENABLE"] == "1"
    done = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, check=True)
    pd.testing.assert_frame_equal(pickle.loads(done.stdout), propagated[0], check_exact=True)


def test_a_float64_fold_propagates_a_growing_error(propagated):
    table, _ = propagated
    chain = table[(table.variant == "folded_fp64") & (table.against == "weight_norm")].set_index("layer")
    assert chain.loc["encoder.Conv1", "max_abs_err"] > 0
    assert chain.loc["encoder.Conv2", "max_abs_err"] > chain.loc["encoder.Conv1", "max_abs_err"]
    assert chain.loc["encoder.Block0", "growth"] == pytest.approx(
        chain.loc["encoder.Block0", "max_abs_err"] / chain.loc["encoder.Conv1", "max_abs_err"])
    assert pd.isna(chain.loc["decoder.Conv1", "growth"])  # the decoder starts a new chain from identical codes
    assert (chain.rel_err == chain.max_abs_err / chain.act_rms).all()


def test_codes_margins_and_codec(propagated):
    table, extra = propagated
    codes = propagation.code_agreement({v: r["codes"] for v, r in extra["results"].items()})
    assert set(codes.variant) == set(dac.VARIANTS) and (codes.fraction_differing.between(0, 1)).all()
    margins = propagation.code_margins(extra["models"]["weight_norm"], dac.audio("tiny", 0.25, 0))
    assert len(margins) == 4 and (margins.min_margin >= 0).all()
    codec = propagation.codec_errors(extra, dac.audio("tiny", 0.25, 0)).set_index("variant")
    assert codec.loc["float64", "decoded_vs_float64"] == 0 and codec.loc["folded_fp64", "decoded_vs_float64"] > 0


def test_encoder_growth(propagated):
    table, _ = propagated
    table = table.assign(init="variance_preserving")
    growth = propagation.encoder_growth(table).loc["variance_preserving"]
    chain = table[(table.variant == "folded_fp64") & (table.against == "weight_norm")].set_index("layer")
    assert growth.encoder_error == chain.loc["encoder.Conv2", "max_abs_err"]
    assert growth.amplification == pytest.approx(growth.encoder_error / chain.loc["encoder.Conv1", "max_abs_err"])


# ---------------------------------------------------------------------------------------------------------
# Findings: fed tables that contradict each claim, the verdict and the wording follow the data

from exactness import published  # noqa: E402
from exactness.studies.dac_propagation import findings as found  # noqa: E402


def _chain(errors: dict[str, float], init: str = "trained", rms: float = 1.0) -> pd.DataFrame:
    """A folded_fp64-against-weight_norm chain with the given max error per layer, through _with_growth."""
    rows = [{"variant": "folded_fp64", "against": "weight_norm", "layer": layer, "depth": d, "role": "main",
             "max_abs_err": e, "mean_abs_err": e, "act_rms": rms, "rel_err": e / rms}
            for d, (layer, e) in enumerate(errors.items())]
    return propagation._with_growth(pd.DataFrame(rows)).assign(init=init)


SEED_ERRORS = {k: published.value(k) for k in ("encoder.Conv1", "encoder.Block0", "encoder.Block1", "encoder.Block2",
                                              "encoder.Block3", "encoder.Snake1", "encoder.Conv2")}


def test_fold_finding_says_whether_float32_folding_is_exact():
    exact = pd.DataFrame({"variant": ["folded_fp32"], "max_abs_diff": [0.0]})
    outputs = pd.DataFrame({"variant": ["folded_fp32"], "against": ["weight_norm"], "max_abs_err": [0.0]})
    same = found.fold_finding(outputs, exact)
    # equal by construction (the same torch._weight_norm call): a fact checked, never a measurement of two runs
    assert same.verdict == "fact" and "equal by construction" in same.claim and "run once" in same.claim
    assert same.ours == ("largest weight difference 0 over 1 layer (checked); the layer outputs are the original "
                         "run's, not computed again")
    two_inits = found.fold_finding(pd.concat([outputs.assign(init=i) for i in "ab"] * 3),
                                   pd.concat([exact.assign(init=i) for i in "ab"] * 2))
    assert two_inits.ours.startswith("largest weight difference 0 over 2 layers in each of 2 inits")  # not 4 layers
    inexact = found.fold_finding(outputs.assign(max_abs_err=1e-7), exact.assign(max_abs_diff=3e-8))
    assert "does NOT" in inexact.claim and inexact.verdict == "new" and "1.0e-07" in inexact.ours


def test_rounding_finding_is_beside_the_seed_only_on_44khz_and_follows_the_size():
    seed_sized = pd.DataFrame({"variant": ["folded_fp64"], "init": ["trained"], "max_abs_diff": [3e-8]})
    assert found.rounding_finding(seed_sized, "44khz").verdict == "reproduced"
    assert found.rounding_finding(seed_sized.assign(max_abs_diff=1e-5), "44khz").verdict == "differs"
    assert found.rounding_finding(seed_sized, "tiny").verdict == "not comparable"


def test_growth_and_amplifier_findings_reproduce_the_seeds_chain_and_not_a_flat_one():
    seed_like = _chain(SEED_ERRORS)
    growth = propagation.encoder_growth(seed_like)
    assert found.growth_finding(growth, "44khz").verdict == "reproduced"
    amplifier = found.amplifier_finding(seed_like, "44khz")
    assert amplifier.verdict == "reproduced" and "Block0 x1,899" in amplifier.claim
    flat = _chain({k: 1e-7 * (1.1 ** i) for i, k in enumerate(SEED_ERRORS)})
    # random weights cannot contradict the trained checkpoint's growth: not comparable, never "differs"
    assert found.growth_finding(propagation.encoder_growth(flat), "44khz").verdict == "not comparable"
    flat_top = found.amplifier_finding(flat, "44khz")
    assert flat_top.verdict == "not comparable" and "Block0 x1,899" not in flat_top.claim
    assert "Block0 x1897" in amplifier.source  # the investigation's column as it printed it
    assert found.amplifier_finding(seed_like, "tiny").verdict == "not comparable"
    # a checkpoint of the investigation's model is named, its numbers beside the investigation's; nothing here can
    # tell its weights from another training's, so it is not called a disagreement
    trained = found.growth_finding(propagation.encoder_growth(flat), "44khz", checkpoint="/data/dac_44khz.pth")
    assert trained.verdict == "not comparable" and "from dac_44khz.pth" in trained.why
    assert "random" not in trained.why and "if this is that file, the two disagree" in trained.why
    assert found.amplifier_finding(flat, "44khz", checkpoint="mine.pth").verdict == "not comparable"
    assert found.growth_finding(growth, "44khz", checkpoint="mine.pth").verdict == "reproduced"
    assert found.amplifier_finding(seed_like, "tiny", checkpoint="mine.pth").verdict == "not comparable"


def test_block_table_sets_the_seed_beside_ours_by_layer_name_only_on_44khz():
    table = found.block_table(_chain(SEED_ERRORS), "44khz").set_index("layer")
    assert table.loc["encoder.Block0", "trained"] == pytest.approx(1899, abs=1)  # ours, from the errors
    assert table.loc["encoder.Block0", "seed_002"] == 1897.0  # the investigation's, as it printed it
    assert found.block_table(_chain(SEED_ERRORS), "tiny").seed_002.isna().all()


def test_codes_finding_turns_when_a_code_flips():
    chain = _chain(SEED_ERRORS)
    codes = pd.DataFrame({"variant": ["folded_fp64"], "init": ["trained"], "codebook": [0],
                          "fraction_differing": [0.0]})
    margins = pd.DataFrame({"init": ["trained"], "min_margin": [1e-3]})
    kept = found.codes_finding(codes, margins, chain)
    assert kept.verdict == "reproduced" and "stays below every frame's winning margin" in kept.claim
    tied = found.codes_finding(codes, margins.assign(min_margin=0.0), chain)  # an exact tie: the margin bounds nothing
    assert tied.verdict == "reproduced" and "stays below" not in tied.claim
    assert "under trained a frame's two best codebook entries tie exactly" in tied.claim
    flipped = found.codes_finding(codes.assign(fraction_differing=0.02), margins, chain)
    assert flipped.verdict == "differs" and "flip" in flipped.claim


def test_codec_finding_turns_when_runs_differ_as_much_as_the_codec_error():
    codec = pd.DataFrame({"init": "trained", "codec_rms_err": [0.2, 0.2], "codec_max_abs_err": [0.6, 0.6],
                          "decoded_vs_float64": [0.0, 1e-6]})
    assert found.codec_finding(codec).verdict == "reproduced"
    assert found.codec_finding(codec.assign(decoded_vs_float64=[0.0, 0.1])).verdict == "differs"


def test_config_finding_fails_when_a_published_configuration_does_not_pass():
    good = pd.DataFrame(dac.config_checks())
    assert found.config_finding(good).verdict == "new"
    broken = good.copy()
    broken.loc[broken.case == "16khz", "result"] = "hop_length 512 != 320"
    finding = found.config_finding(broken)
    assert finding.verdict == "differs" and "16khz" in finding.claim and "pass" not in finding.claim


def test_findings_on_another_variant_never_reproduce_the_seeds_44khz_figures(propagated):
    table, extra = propagated
    table = table.assign(init="variance_preserving")
    weights = propagation.weight_table(extra["models"]).assign(init="variance_preserving")
    codes = propagation.code_agreement({v: r["codes"] for v, r in extra["results"].items()}).assign(
        init="variance_preserving")
    margins = propagation.code_margins(extra["models"]["weight_norm"], dac.audio("tiny", 0.25, 0)).assign(
        init="variance_preserving")
    codec = propagation.codec_errors(extra, dac.audio("tiny", 0.25, 0)).assign(init="variance_preserving")
    result = found.findings(table, weights, propagation.encoder_growth(table), codes, margins, codec,
                                  pd.DataFrame(dac.config_checks()), "tiny")
    assert [f.verdict for f in result[1:6]] == ["not comparable"] * 5 and result[-1].verdict == "new"


def test_other_rates_run_each_configuration_and_the_sentence_follows_the_rows():
    others = propagation.other_rates(["tiny"], 0.05, 0, 0, ["variance_preserving"])
    row = others.iloc[0]
    assert (row.variant, row.init, row.seconds) == ("tiny", "variance_preserving", 0.05) and row.fold_fp32_exact
    assert row.amplification == pytest.approx(row.activation_growth * row.relative_error_growth)
    sentence = propagation_sentences.other_rates_sentence(others)
    assert "exact in 1 of 1 runs" in sentence and "tiny variance_preserving: x" in sentence
    flipped = others.assign(fold_fp32_exact=False, codes_differing_pct=2.5)
    assert "exact in 0 of 1" in propagation_sentences.other_rates_sentence(flipped) and "up to 2.5%" in \
        propagation_sentences.other_rates_sentence(flipped)
    assert "No other configuration" in propagation_sentences.other_rates_sentence(others.iloc[:0])


def test_other_configurations_get_a_finding_that_names_a_flip():
    others = pd.DataFrame({"variant": ["16khz", "16khz", "24khz", "24khz"], "seconds": 10.0,
                           "init": ["default", "variance_preserving"] * 2,
                           "codes_differing_pct": [0.0, 0.0, 0.0, 0.1333]})
    flipped = found.other_codes_finding(others)
    assert "24khz variance_preserving: 0.13% of code frames" in flipped.claim and "16khz" not in flipped.claim
    assert flipped.ours == "4 runs of 16khz, 24khz at 10 s; code frames changed: up to 0.13%"
    kept = found.other_codes_finding(others.assign(codes_differing_pct=0.0))
    assert kept.claim == "On the other configurations no float32 run changes a code either."


def test_a_checkpoint_parameter_is_checked_before_a_run_and_runs_in_the_inits_place(tmp_path):
    rule = registration("dac_propagation").rules["checkpoint"]
    assert rule.problem("") is None
    assert "does not exist" in rule.problem(str(tmp_path / "missing.pth"))
    (tmp_path / "empty.pth").write_bytes(b"")
    assert "an empty file" in rule.problem(str(tmp_path / "empty.pth"))
    (tmp_path / "folder").mkdir()
    assert "no config.json" in rule.problem(str(tmp_path / "folder"))
    from dac_files import write_original

    write_original(tmp_path / "mine.pth", dac.template("tiny", 1), trained=True)
    assert rule.problem(str(tmp_path / "mine.pth")) is None
    runs = propagation.templates("tiny", 0, ["default", "variance_preserving"], str(tmp_path / "mine.pth"))
    assert list(runs) == ["mine.pth"] and hasattr(runs["mine.pth"]().encoder.conv1, dac.GAIN)
    with pytest.raises(ValueError, match="not variant '16khz'"):  # refused before any run
        propagation.templates("16khz", 0, ["default"], str(tmp_path / "mine.pth"))
    from exactness.workbook.study_rules import StudyParameterError, check

    with pytest.raises(StudyParameterError, match="checkpoint and gpu_run: a GPU run's chain is of the random inits"):
        check("dac_propagation", {"checkpoint": str(tmp_path / "mine.pth"), "gpu_run": "etc/gpu_runs/h200-2026-12-04"})
    assert list(propagation.templates("tiny", 0, ["default", "variance_preserving"])) == ["default",
                                                                                         "variance_preserving"]
