import pandas as pd
import pytest

from exactness.studies.near_tie import screen as near_tie_screen
from exactness.studies.near_tie import study as near_tie
from exactness.workbook.parameter_rules import StudyParameterError


@pytest.mark.slow
def test_screen_is_the_same_bit_for_bit_with_one_or_two_workers():
    one = near_tie_screen.screen(["Wav2Vec2ConformerForPreTraining"], 10, 40, workers=1, chunk_size=15)
    two = near_tie_screen.screen(["Wav2Vec2ConformerForPreTraining"], 10, 40, workers=2, chunk_size=15)
    pd.testing.assert_frame_equal(one, two)
    assert one.seed.tolist() == list(range(10, 50))
    assert (one.min_gap >= 0).all() and one.frame.between(0, 13).all() and one.group.isin([0, 1]).all()


def test_screen_locates_the_smallest_gap():
    from exactness.compare.tie_aware import top_two
    from exactness.models.quantizer_logits import plain_logits

    row = near_tie_screen.screen_seeds("UniSpeechForPreTraining", [5]).iloc[0]
    gaps = top_two(plain_logits("UniSpeechForPreTraining", 5))
    assert row.min_gap == float(gaps.gap.min())
    # the comparable axis: the smallest gap in ulps of each row's own top logit, over all rows
    assert row.smallest_gap_ulps == float(gaps.gap_ulps.min()) and row.smallest_gap_ulps <= row.min_gap_ulps
    assert (row.batch * 35 + row.frame) * 2 + row.group == gaps.min_row


def test_classes_without_argmax_are_set_apart():
    screened, immune = near_tie_screen.screenable(["Wav2Vec2ForPreTraining", "UniSpeechSatForPreTraining"])
    assert screened == ["Wav2Vec2ForPreTraining"] and immune == ["UniSpeechSatForPreTraining"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"models": ["Nope"]}, "unknown model 'Nope'"),
    ({"shape_modes": ["lazy"]}, "unknown shape mode 'lazy'"),
    ({"n_seeds": 0}, "n_seeds must be at least 1"),
    ({"threshold": 0.0}, "threshold must be positive"),
])
def test_bad_parameters_are_named_before_any_work(kwargs, message):
    arguments = {"models": ["Wav2Vec2ForPreTraining"], "n_seeds": 10, "threshold": 1e-5, "shape_modes": ["dynamic"],
                 "workers": 1, **kwargs}
    with pytest.raises(StudyParameterError, match=message):
        near_tie.validate(**arguments)


@pytest.mark.slow
def test_screen_on_a_dask_cluster_equals_the_local_screen():
    from distributed import LocalCluster

    local = near_tie_screen.screen(["Wav2Vec2ConformerForPreTraining"], 100, 24, workers=1, chunk_size=8)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        remote = near_tie_screen.screen(["Wav2Vec2ConformerForPreTraining"], 100, 24, chunk_size=8,
                                        scheduler=cluster.scheduler_address)
    pd.testing.assert_frame_equal(local, remote)
