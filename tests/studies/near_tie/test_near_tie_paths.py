"""`fast_paths: false` turns every speed-up off; the screen, the checks and the defects come out the same value for
value, and each row says which path made it."""

import pandas as pd
import pytest

from exactness.studies.near_tie import screen as near_tie_screen
from exactness.studies.near_tie import study as near_tie
from exactness.studies.near_tie.row import PATH_COLUMNS

MODEL = "Wav2Vec2ConformerForPreTraining"


def _without_paths(table: pd.DataFrame, name: str) -> pd.DataFrame:
    return table.drop(columns=list(PATH_COLUMNS[name]))


@pytest.fixture(scope="module")
def both_ways():
    runs = {}
    for fast in (True, False):
        screen = near_tie_screen.screen([MODEL], 0, 8, fast_paths=fast)
        # the three smallest gaps: the template, the seed the swap is learnt on, and one swapped into the fed session
        result = near_tie.run_checks(screen, float("inf"), ["static"], max_checks=3, what_if_checks=1,
                                     full_tensor_checks=3, fast_paths=fast)
        swapped_seed = int(result.checks.seed.iloc[-1])
        defects = near_tie.defects(result.pools, {MODEL: [swapped_seed]}, bound=1e-5, fast_paths=fast)
        runs[fast] = screen, result, defects
    return runs


@pytest.mark.slow
def test_the_screen_is_the_same_replayed_or_built_and_run_whole(both_ways):
    fast, plain = both_ways[True][0], both_ways[False][0]
    assert set(fast.screen_path) == {"replay"} and set(plain.screen_path) == {"forward"}
    pd.testing.assert_frame_equal(_without_paths(fast, "screen"), _without_paths(plain, "screen"))


@pytest.mark.slow
def test_the_checks_and_defects_are_the_same_with_every_speed_up_off(both_ways):
    (_, fast, fast_defects), (_, plain, plain_defects) = both_ways[True], both_ways[False]
    assert len(fast.checks) == 3
    pd.testing.assert_frame_equal(_without_paths(fast.checks, "checks"), _without_paths(plain.checks, "checks"))
    pd.testing.assert_frame_equal(fast.outputs, plain.outputs)
    pd.testing.assert_frame_equal(fast.tensors, plain.tensors)
    assert {m: d.tolist() for m, d in fast.deltas.items()} == {m: d.tolist() for m, d in plain.deltas.items()}
    pd.testing.assert_frame_equal(fast_defects, plain_defects)


@pytest.mark.slow
def test_each_check_records_the_path_it_took(both_ways):
    fast, plain = both_ways[True][1].checks, both_ways[False][1].checks
    assert fast[list(PATH_COLUMNS["checks"])].to_dict("records")[-1] == {
        "build_path": "rebuild", "weights_path": "swap", "session_path": "fed", "ort_lookup_path": "gathered",
        "eager_lookup_path": "gathered"}
    assert plain[list(PATH_COLUMNS["checks"])].drop_duplicates().to_dict("records") == [{
        "build_path": "build", "weights_path": "fresh_export", "session_path": "per_seed", "ort_lookup_path": "plain",
        "eager_lookup_path": "plain"}]
    plain_pool = both_ways[False][1].pools[(MODEL, "static")]
    assert plain_pool.plan is None and plain_pool.fed is None and plain_pool.exports == 3
    assert both_ways[True][1].pools[(MODEL, "static")].exports == 2
