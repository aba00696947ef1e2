import math

import pytest
import torch

from exactness.models import dac, dac_chunks
from exactness.studies.dac_batching import audio_tail
from exactness.studies.dac_batching import study as batching
from exactness.studies.dac_batching.audio_tail import EarlyCause, Float64Says, TailCause


@pytest.fixture(scope="module")
def tiny():
    return dac.template("tiny", 0, "variance_preserving")


def test_receptive_field_from_the_architecture_matches_the_float64_gradient(tiny):
    field = batching.receptive_field(tiny.config)
    measured = batching.measured_receptive_field(dac.build_variant(tiny, "float64"), 4000, 250)
    # the layers' paddings put the frame's reach where the gradient finds it, on each side, to the sample
    assert (measured["left_samples"], measured["right_samples"]) == (field["left_samples"], field["right_samples"])
    assert field["left_samples"] != field["right_samples"]  # not symmetric: strided convolutions pad left less


def test_the_44khz_reach_is_3733_samples_left_and_4244_right():
    from exactness.models.dac import config

    field = batching.receptive_field(config("44khz"))
    assert (field["left_samples"], field["right_samples"], field["one_side_frames"]) == (3733, 4244, 9)


def test_padding_changes_only_a_tail_within_the_receptive_field(tiny):
    model = dac.build_variant(tiny, "folded_fp32")
    clips = [dac.audio("tiny", 0.5, 1), dac.audio("tiny", 0.3, 2)]
    table, curves, kept = batching.compare(model, clips)
    alone = batching.shorter_clip(model, clips[1], clips[0].shape[-1])  # the runs compare keeps, made alone
    assert kept.clip is clips[1] and all(torch.equal(kept.alone[k], alone.alone[k]) and
                                         torch.equal(kept.padded[k], alone.padded[k]) for k in batching.STAGES)
    short = table[(table["clip"] == 1) & (table["cause"] == "padding")].set_index("stage")
    field = batching.receptive_field(tiny.config)
    assert 0 < short.loc["latent", "first_diff_from_end"] <= field["one_side_frames"] + 1
    assert short.loc["latent", "max_diff_before"] < 1e-4 < short.loc["latent", "max_diff_in_tail"]
    longest = table[(table["clip"] == 0) & (table["cause"] == "padding")]
    assert (longest.first_diff_from_end == 0).all() and longest.bit_identical_before.all()  # not padded at all
    assert (1, "latent", "batch size") in curves


def test_samples_past_a_hop_multiple_are_dropped(tiny):
    model = dac.build_variant(tiny, "folded_fp32")
    table = batching.hop_drop(model, [800, 803, 808])
    assert table.dropped_samples.tolist() == [0, 3, 0] and table.hop.iloc[0] == 8


def test_windows_of_another_span_start_where_the_padding_reaches_a_window(tiny):
    # tiny: hop 8, 96-frame windows reading 20 frames ahead in the decoder. 300 frames alone: the window keeping
    # frames 192-287 reads up to frame 300 alone and 308 padded, so the spans differ from frame 192 on
    assert batching.decoder_windows_differ_from(tiny, 2400, 4000) == 192 * 8
    assert batching.decoder_windows_differ_from(tiny, 400, 640) is None  # both whole: lengths differ throughout
    assert batching.decoder_windows_differ_from(tiny, 2400, 2400) is None  # not padded


def test_padded_audio_differs_only_within_the_padding_s_reach_or_the_windows_of_another_span(tiny):
    model = dac.build_variant(tiny, "folded_fp32")
    clips = [dac.audio("tiny", 0.5, 1), dac.audio("tiny", 0.3, 2)]
    table, curves, _ = batching.compare(model, clips)
    audio = curves[(1, "audio", "padding")]
    windows_from = batching.decoder_windows_differ_from(model, clips[1].shape[-1], clips[0].shape[-1])
    assert windows_from < len(audio) and not audio[:windows_from].any()  # earlier windows: the same computation


def test_decoder_reach_is_measured_on_both_sides_of_a_frame(tiny):
    reach = batching.measured_decoder_reach(dac.build_variant(tiny, "float64"), 81, 40)
    assert reach["left_samples"] > 0 and reach["right_samples"] > 0


# ---------------------------------------------------------------------------------------------------------
# Findings: fed tables that contradict each claim, the verdict and the wording follow the data

import pandas as pd  # noqa: E402

from exactness.studies.dac_batching import findings as found  # noqa: E402


def _table(latent_tail: int, audio_tail: int = 100, before: float = 1e-7, codes_clean: bool = True,
           size_diff: float = 0.0) -> pd.DataFrame:
    rows = []
    for stage, tail, length in (("latent", latent_tail, 50), ("codes", latent_tail, 50), ("audio", audio_tail, 400)):
        rows.append({"clip": 1, "stage": stage, "cause": "padding", "length": length, "first_diff_from_end": tail,
                     "bit_identical_before": codes_clean if stage == "codes" else before == 0,
                     "max_diff_before": before, "max_diff_in_tail": 3.0 if tail else 0.0})
        rows.append({"clip": 1, "stage": stage, "cause": "batch size", "length": length, "first_diff_from_end": 0,
                     "bit_identical_before": size_diff == 0, "max_diff_before": size_diff, "max_diff_in_tail": 0.0})
    for stage, length in (("latent", 80), ("codes", 80), ("audio", 640)):  # the longest clip: nothing padded
        rows += [{"clip": 0, "stage": stage, "cause": cause, "length": length, "first_diff_from_end": 0,
                  "bit_identical_before": True, "max_diff_before": 0.0, "max_diff_in_tail": 0.0}
                 for cause in ("padding", "batch size")]
    return pd.DataFrame(rows)


def test_padding_finding_answers_the_reviewers_from_the_tail_against_the_receptive_field():
    within = found.padding_finding(_table(5), 1, 8)
    assert within.verdict == "reproduced" and "not broken" in within.claim and "last 5 latent" in within.claim
    beyond = found.padding_finding(_table(20), 1, 8)
    assert beyond.verdict == "differs" and "unexplained" in beyond.why and "not broken" not in beyond.claim
    none = found.padding_finding(_table(0), 1, 8)
    assert none.verdict == "differs" and "changes no latent frame" in none.claim


def _moved(tail: int, moved: int) -> pd.DataFrame:
    """The table with the shorter clip's latent moved at all over its last `moved` frames, above the floor over
    `tail`."""
    table = _table(tail).assign(any_diff_from_end=lambda t: t.first_diff_from_end)
    shorter_latent = (table["clip"] == 1) & (table.stage == "latent") & (table.cause == "padding")
    table.loc[shorter_latent, "any_diff_from_end"] = moved
    return table


def test_the_padding_decision_tells_rounding_beyond_the_reach_from_a_tail_the_field_does_not_explain():
    def reach(tail, moved):
        return batching.padding_reach(batching.clip_rows(_moved(tail, moved), 1, "padding"), 8)

    Reach = batching.PaddingReach
    assert (reach(0, 0), reach(0, 3), reach(5, 9)) == (Reach.UNCHANGED, Reach.WITHIN, Reach.WITHIN)
    # rounding on every frame (some CPUs' kernels round the two lengths apart from the first frame): not unexplained
    assert reach(5, 50) is Reach.ROUNDING_BEYOND and reach(20, 20) is reach(10, 50) is Reach.BEYOND
    assert reach(0, 50) is Reach.ROUNDING_ONLY  # nothing above the floor anywhere: rounding, not padding
    only = found.padding_finding(_moved(0, 50), 1, 8)
    assert only.verdict == "differs" and "no latent frame of the shorter clip above the rounding floor" in only.claim
    beyond = found.before_tail_finding(_moved(20, 20), _curves(latent_early=1e-3), 1, 8, 4)
    assert "above the rounding floor there" in beyond.claim and "rounding:" not in beyond.claim
    rounded = found.padding_finding(_moved(5, 50), 1, 8)
    assert rounded.verdict == "reproduced" and "last 5 latent frames of the shorter clip above the rounding floor" \
        in rounded.claim and "45 more by up to 1.0e-07, below the floor" in rounded.claim


def _curves(latent_early: float = 0.0, audio_early: float = 0.0) -> dict:
    latent, audio = torch.zeros(50), torch.zeros(400)
    latent[-5:], audio[-40:] = 3.0, 1.0
    latent[10], audio[20] = latent_early, audio_early
    return {(1, "latent", "padding"): latent, (1, "audio", "padding"): audio}


def test_before_tail_finding_counts_code_frames_and_says_when_codes_differ_early():
    clean = found.before_tail_finding(_table(5), _curves(), 1, 8, 4)
    assert "every code frame before the padded tail is identical" in clean.claim
    assert "4 of 50 code frames differ" in clean.claim and "codes are identical" not in clean.claim
    assert "bit-identical outside the last 8 frames" in clean.claim
    rounded = found.before_tail_finding(_table(5), _curves(latent_early=1e-7), 1, 8, 4)
    assert "even outside the last 8 frames" in rounded.claim and "bit-identical" not in rounded.claim
    early = found.before_tail_finding(_table(5, codes_clean=False), _curves(), 1, 8, 9)
    assert "before the padding's tail as well" in early.claim


def test_batch_size_finding_says_nothing_changes_only_when_nothing_does():
    assert "changes nothing" in found.batch_size_finding(_table(5), 0).claim
    moved = found.batch_size_finding(_table(5, size_diff=1e-6), 2)
    assert "changes nothing" not in moved.claim and "2 code frames" in moved.claim and "rounding" not in moved.claim
    assert "below the threshold at every position" in found.batch_size_finding(_table(5, size_diff=1e-6), 0).claim


def _tail(table, curves, **kw):
    return audio_tail.audio_tail(table, curves, 1, 8, 7, 30, **kw)


def test_the_audio_tail_is_explained_by_the_decoders_reach_or_said_to_be_unexplained():
    curves = _curves()
    above = _tail(_table(5, audio_tail=5 * 8 + 30), curves)
    assert (above.cause, above.early, above.above, above.reach) == (TailCause.CHANGED_FRAMES, EarlyCause.NONE, 70, 86)
    assert _tail(_table(5, audio_tail=5 * 8 + 31), curves).cause is TailCause.PADDING_REACH
    assert _tail(_table(5, audio_tail=7 * 8 + 31), curves).cause is TailCause.UNEXPLAINED
    isolated = _tail(_table(5, audio_tail=70), _curves(audio_early=1e-6))
    assert isolated.early is EarlyCause.UNMEASURED  # and not attributed to rounding either: not measured
    assert (isolated.early_first, isolated.early_last) == (20, 20) and isolated.early_max == pytest.approx(1e-6)
    carried = _tail(_table(5, audio_tail=70), _curves(latent_early=1e-7, audio_early=1e-6))
    assert carried.early is EarlyCause.CARRIED and carried.latent_rounding == pytest.approx(1e-7)
    # beyond the padding's reach but inside the windows the padding changes: their length, not unexplained
    windowed = _tail(_table(5, audio_tail=7 * 8 + 31), curves, windows_from=300)
    assert windowed.cause is TailCause.WINDOW
    assert _tail(_table(5, audio_tail=7 * 8 + 31), curves, windows_from=320).cause is TailCause.UNEXPLAINED
    inside = _tail(_table(5, audio_tail=70), _curves(audio_early=1e-6), windows_from=16)
    assert (inside.cause, inside.early) == (TailCause.CHANGED_FRAMES, EarlyCause.IN_WINDOW)
    before = _tail(_table(5, audio_tail=70), _curves(audio_early=1e-6), windows_from=24)
    assert before.early is EarlyCause.UNMEASURED  # sample 20 is before the windows: not explained by the padding


def test_the_audio_finding_words_each_cause():
    curves = _curves()
    above = found.audio_finding(_tail(_table(5, audio_tail=5 * 8 + 30), curves)).claim
    assert "unexplained" not in above and "spread back" in above
    below_floor = found.audio_finding(_tail(_table(5, audio_tail=5 * 8 + 31), curves)).claim
    assert "less than the floor" in below_floor and "unexplained" not in below_floor
    assert found.audio_finding(_tail(_table(5, audio_tail=7 * 8 + 31), curves)).claim.endswith(": unexplained.")
    isolated = found.audio_finding(_tail(_table(5, audio_tail=70), _curves(audio_early=1e-6))).claim
    assert "isolated difference of up to 1.0e-06 at samples 20 to 20" in isolated
    assert "not explained by the padding" in isolated
    carried = found.audio_finding(_tail(_table(5, audio_tail=70), _curves(latent_early=1e-7, audio_early=1e-6)))
    assert "carried from the latents' rounding differences (up to 1.0e-07)" in carried.claim
    windowed = found.audio_finding(_tail(_table(5, audio_tail=7 * 8 + 31), curves, windows_from=300))
    assert "unexplained" not in windowed.claim and "from sample 300" in windowed.claim
    assert "windows differ from sample 300 of 400" in windowed.ours
    inside = found.audio_finding(_tail(_table(5, audio_tail=70), _curves(audio_early=1e-6), windows_from=16))
    assert "all within the clip's last 384 samples" in inside.claim


@pytest.mark.slow
def test_the_float64_decodes_of_the_two_latents_differ_only_within_the_padding_s_reach():
    # the padded latent takes the clip's own frames wherever the padding cannot reach: on some CPUs the encoder's
    # kernels already round the two lengths apart from the first frame (then the float64 decodes differ
    # everywhere and cannot tell the decoder's rounding apart), on others they are bit-identical there
    plain = dac.template("44khz", 0, "variance_preserving")
    model = dac.build_variant(plain, "folded_fp32", shared=True)
    model64 = dac.build_variant(plain, "float64", shared=True)
    clips = [dac.audio("44khz", 0.5, 1), dac.audio("44khz", 0.3, 2)]
    measured = batching.shorter_clip(model, clips[1], clips[0].shape[-1])
    frames = measured.alone["latent"].shape[-1]
    field = batching.receptive_field(plain.config)
    kept = frames - field["one_side_frames"]
    latent = torch.cat([measured.alone["latent"][..., :kept], measured.padded["latent"][..., kept:]], dim=-1)
    with torch.no_grad():
        audio = dac_chunks.decode(model, latent, batching.CHUNK_FRAMES)
    runs = batching.ShorterClip(measured.clip, measured.alone, {**measured.padded, "latent": latent, "audio": audio})
    exact = batching.float64_audio(model64, runs)
    decoder = batching.measured_decoder_reach(model64, 8 * field["one_side_frames"] + 1, 4 * field["one_side_frames"])
    reach = field["one_side_frames"] * field["hop"] + decoder["left_samples"]
    audio = (runs.alone["audio"] - runs.padded["audio"][..., : runs.alone["audio"].shape[-1]]).abs()[0]
    first = int(audio.nonzero().min())
    assert len(audio) - first > reach  # the float32 decodes differ beyond the reach: the case this decides
    assert 0 < exact.value_tail <= reach and exact.rounding and exact.float32_difference > 0
    assert exact.float32_error < 1e-2 * exact.rms and exact.floor < 1e-7 * exact.float32_error
    # a latent moved in value at its first frame: the float64 decodes differ from the start, beyond any reach
    shifted = batching.ShorterClip(runs.clip, runs.alone, {**runs.padded, "latent": runs.padded["latent"].clone()})
    shifted.padded["latent"][..., 0] += 1.0
    assert batching.float64_audio(model64, shifted).value_tail > reach


def _exact(value_tail: int, difference: float = 1e-6, error: float = 1e-6):
    return batching.Float64Audio(value_tail=value_tail, floor=1e-14, float32_difference=difference,
                                 float32_error=error, rms=0.5)


def test_a_float32_difference_beyond_the_reach_is_rounding_only_when_the_float64_decodes_agree_there():
    curves = _curves(audio_early=1e-6)
    beyond_reach = _table(5, audio_tail=7 * 8 + 31)
    proven = _tail(beyond_reach, curves, exact=_exact(60))
    assert (proven.cause, proven.float64, proven.early) == (TailCause.FLOAT64, Float64Says.ROUNDING,
                                                            EarlyCause.SAME_AS_TAIL)
    assert _tail(beyond_reach, curves, exact=_exact(87)).float64 is Float64Says.BEYOND_REACH
    larger = _tail(beyond_reach, curves, exact=_exact(60, difference=1e-3))
    assert (larger.float64, larger.early) == (Float64Says.NOT_EXPLAINED, EarlyCause.FLOAT64)
    within = _tail(_table(5, audio_tail=70), curves, exact=_exact(60))
    assert (within.cause, within.early, within.float64) == (TailCause.CHANGED_FRAMES, EarlyCause.FLOAT64,
                                                            Float64Says.ROUNDING)
    # measured, but nothing left for them to decide: no verdict of theirs is carried
    unused = _tail(_table(5, audio_tail=70), _curves(), exact=_exact(87))
    assert (unused.cause, unused.early, unused.float64) == (TailCause.CHANGED_FRAMES, EarlyCause.NONE, None)
    assert unused.exact is not None  # its numbers are still reported beside ours
    # latents that differ by rounding outside the reach: the audio carries it, whatever float64 says of the decoder
    carried = _tail(beyond_reach, _curves(latent_early=1e-7, audio_early=1e-6), exact=_exact(400))
    assert (carried.cause, carried.early, carried.float64, carried.exact) == (
        TailCause.UNEXPLAINED, EarlyCause.CARRIED, None, None)
    # the words, once per float64 verdict
    words = found.audio_finding(proven).claim
    assert "is rounding" in words and "2.0e-06 of the RMS)" in words and "isolated ones at samples 20 to 20" in words
    words = found.audio_finding(_tail(beyond_reach, curves, exact=_exact(87))).claim
    assert "beyond the padding's reach (86): unexplained" in words and "is rounding" not in words
    assert "more than their own errors against float64" in found.audio_finding(larger).claim
    assert "float64" not in found.audio_finding(carried).claim


def test_hop_finding_states_the_rule_or_the_exception():
    follows = pd.DataFrame({"hop": [512] * 3, "remainder": [0, 1, 7], "dropped_samples": [0, 1, 7]})
    assert "up to 511 samples (hop - 1)" in found.hop_finding(follows).claim
    assert "do not follow" in found.hop_finding(follows.assign(dropped_samples=[0, 0, 0])).claim


def test_findings_count_code_frames_from_the_curves_not_index_differences():
    curves = {**_curves(), (1, "codes", "padding"): torch.tensor([0.0, 0.0, 981.0, 3.0]),
              (1, "codes", "batch size"): torch.zeros(4), (0, "codes", "batch size"): torch.zeros(4)}
    dropped = pd.DataFrame({"hop": [8], "remainder": [3], "dropped_samples": [3]})
    result = found.findings(_table(2), curves, 1, 8, 8, 30, dropped)
    assert "2 of 50 code frames differ" in result[1].claim and "981" not in result[1].claim
    assert len(result) == 5


def test_recomputing_the_tail_from_the_clip_alone_restores_its_codes(tiny):
    model = dac.build_variant(tiny, "folded_fp32")
    clip = dac.audio("tiny", 0.3, 2)
    runs = batching.shorter_clip(model, clip, dac.audio("tiny", 0.5, 1).shape[-1], chunk_frames=10**6)
    repaired = batching.repair(model, runs, chunk_frames=10**6)
    left, right = batching.dac_chunks.encoder_reach(model)
    assert repaired["tail_frames"] == -(-right // 8) + 1 and repaired["frames"] == 300
    assert repaired["samples_rerun"] <= (repaired["tail_frames"] + -(-left // 8)) * 8
    assert repaired["code_frames_after"] == 0 and repaired["max_latent_diff_after"] < 1e-4
    tail, start = batching.repair_span(model, repaired["frames"])  # what the benchmark's plain passes run again
    assert tail == repaired["tail_frames"] and clip.shape[-1] - start == repaired["samples_rerun"]


def test_repair_finding_says_when_the_fix_does_not_restore_the_codes():
    fixed = {"tail_frames": 10, "samples_rerun": 9216, "frames": 86, "code_frames_before": 3, "code_frames_after": 0,
             "max_latent_diff_after": 2e-7, "latent_rms": 0.5}
    claim = found.repair_finding(fixed).claim
    assert "recompute its last 10 frames" in claim and "every frame (3 differed before)" in claim
    assert "below the threshold, 0.0001 of their RMS" in claim and "float32 ulps of it" in claim
    assert "above the threshold" in found.repair_finding({**fixed, "latent_rms": 1e-4}).claim
    exact = found.repair_finding({**fixed, "max_latent_diff_after": 0.0}).claim
    assert exact.endswith("the latents bit-identical.") and "within 0" not in exact
    broken = found.repair_finding({**fixed, "code_frames_after": 2}).claim
    assert "does NOT restore" in broken and "2 code frames still differ" in broken
    assert "measured below" in found.padding_finding(_table(5), 1, 8, True).claim
    assert "measured below" not in found.padding_finding(_table(5), 1, 8).claim


def test_a_long_clip_s_plot_adds_a_panel_on_its_tail_and_shades_the_windows_of_another_span():
    import matplotlib

    matplotlib.use("Agg")
    from exactness.studies.dac_batching import figures as plots

    long = {(1, "audio", cause): torch.zeros(4000) for cause in ("padding", "batch size")}
    long[(1, "audio", "padding")][-30:] = 1.0
    figure = plots.batching_differences(long, 1, "audio", 100, "samples", windows_from=3900)
    whole, tail = figure.axes[0], figure.axes[1]
    assert tail.get_lines()[0].get_xdata()[0] == 3600 and whole.get_lines()[0].get_xdata()[0] == 0  # last 4 x 100
    shaded = [patch.get_x() for patch in tail.patches]
    assert 3900 in shaded and 3900 in [patch.get_x() for patch in whole.patches]
    short = {key: value[:500] for key, value in long.items()}
    assert len(plots.batching_differences(short, 1, "audio", 100, "samples").axes) == 1  # 5 fields: whole only


def test_a_long_difference_is_drawn_as_its_largest_value_per_bin():
    import numpy as np

    from exactness.studies.dac_batching import figures as plots

    curve = np.zeros(2400)
    curve[1::2] = 1e-6  # rounding every other sample: a wall of colour drawn sample by sample
    curve[-244:] = 1.0
    x, tops, width = plots.envelope(curve, 0, 2400)
    assert width == 10 and len(x) == len(tops) == 240
    assert (tops[:-25] == 1e-6).all() and tops[-24:].min() == 1.0  # the upper edge, and the tail where it starts
    assert plots.panels(2400, 400) == [(0, 10)] and plots.panels(2400, 100) == [(0, 10), (2000, 2)]


def test_the_figure_caption_counts_any_difference_and_the_part_above_the_threshold_apart():
    import pandas as pd

    from exactness.studies.dac_batching import sentences as batching_sentences

    table = pd.DataFrame({"clip": 1, "cause": "padding", "stage": ["latent", "audio"],
                          "first_diff_from_end": [5, 300], "any_diff_from_end": [6, 300]})
    assert batching_sentences.padding_tail_words(table, 1, "latent", "frames") == (
        "The padding changes values in the last 6 frames, by more than the threshold in the last 5.")
    assert batching_sentences.padding_tail_words(table, 1, "audio", "samples") == (
        "The padding changes the last 300 samples.")
    below = table.assign(first_diff_from_end=0)
    assert batching_sentences.padding_tail_words(below, 1, "latent", "frames").endswith(
        "none by more than the threshold.")
    assert batching_sentences.padding_tail_words(below.assign(any_diff_from_end=0), 1, "latent", "frames") == (
        "The padding changes none of its frames.")


def test_codes_get_no_difference_size_only_where_they_differ():
    """Two code indices are equal or not: 981 against 3 is no larger a difference than 4 against 3."""
    a = torch.tensor([[[3, 5, 7, 981]]])
    b = torch.tensor([[[3, 5, 7, 3]]])
    tail = batching._tail(a, b)
    assert tail["first_diff_from_end"] == 1 and tail["bit_identical_before"]
    assert math.isnan(tail["max_diff_before"]) and math.isnan(tail["max_diff_in_tail"])
    floats = batching._tail(a.float(), b.float())
    assert floats["max_diff_in_tail"] == 978.0
