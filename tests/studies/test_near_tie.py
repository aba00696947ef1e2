import pandas as pd

from exactness.runtimes.graph_pool import GraphPool
from exactness.shards import ShardStore
from exactness.studies import near_tie

MODEL = "Wav2Vec2ConformerForPreTraining"


def _screen(seeds_and_gaps):
    return pd.DataFrame([{"model": MODEL, "seed": s, "min_gap": g} for s, g in seeds_and_gaps])


def test_checks_are_the_same_on_one_or_two_workers_and_resume_from_shards_without_exporting(tmp_path, monkeypatch):
    screen = _screen([(3, 4e-6), (8, 1e-6), (11, 9e-6), (20, 2e-6), (21, 5e-5)])  # seed 21 is above the threshold
    store = ShardStore(tmp_path)
    one = near_tie.run_checks(screen, 1.5e-5, ["static"], what_if_checks=2, workers=1, shards=store)
    two = near_tie.run_checks(screen, 1.5e-5, ["static"], what_if_checks=2, workers=2)
    pd.testing.assert_frame_equal(one.checks, two.checks)
    pd.testing.assert_frame_equal(one.tensors, two.tensors)
    assert one.checks.seed.tolist() == [3, 8, 11, 20]
    # what one flip would do is simulated for the two smallest gaps only
    assert one.checks.set_index("seed").fails_if_flipped.notna().to_dict() == {3: False, 8: True, 11: False, 20: True}
    assert one.pools[(MODEL, "static")].plan is not None and one.graphs().exports.tolist() == [2]

    def no_exports(*args, **kwargs):
        raise AssertionError("a resumed check exported")

    monkeypatch.setattr(GraphPool, "fresh", no_exports)
    again = near_tie.run_checks(screen, 1.5e-5, ["static"], what_if_checks=2, workers=1, shards=store)
    pd.testing.assert_frame_equal(again.checks, one.checks)
    assert {m: d.tolist() for m, d in again.deltas.items()} == {m: d.tolist() for m, d in one.deltas.items()}
