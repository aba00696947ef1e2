import numpy as np
import pandas as pd
import pytest

from exactness.models import wav2vec2_family as family
from exactness.runtimes import onnx_graph
from exactness.studies.near_tie import study as near_tie
from exactness.workbook.shards import ShardStore

MODEL = "Wav2Vec2ConformerForPreTraining"


def _screen(seeds_and_gaps):
    return pd.DataFrame([{"model": MODEL, "seed": s, "min_gap": g} for s, g in seeds_and_gaps])


@pytest.mark.slow
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
    # the first two seeds run their own exports (the template, the one the swap was verified on), the rest swapped
    # into one fed session with the graph's codevector product gathered, their models rebuilt into one template
    assert one.checks.weights_path.tolist() == ["fresh_export", "fresh_export", "swap", "swap"]
    assert one.checks.session_path.tolist() == ["per_seed", "per_seed", "fed", "fed"]
    assert one.checks.ort_lookup_path.tolist() == ["plain", "plain", "gathered", "gathered"]
    assert one.checks.build_path.tolist() == ["build", "build", "rebuild", "rebuild"]
    assert one.graphs().one_session[0].startswith("verified on seeds 8 and 3")
    # the exported quantizer's codevector product was found and replaced by a gather, and gave the same values
    assert one.graphs().one_session[0].endswith("its codevector product replaced by a gather (the same values, "
                                                "checked))")
    assert set(one.checks.eager_lookup_path) == {"gathered"}
    # ORT's gap at eager's smallest-gap row: eager's gap moved by at most the gap noise; ORT putting the second
    # code ahead there is a flip of that row
    moved = (one.checks.ort_min_row_gap - one.checks.min_gap).abs()
    assert (moved <= one.checks.gap_noise_max).all()
    assert (one.checks.flip_is_min_gap_row | ~(one.checks.ort_min_row_gap < 0)).all()

    def no_exports(*args, **kwargs):
        raise AssertionError("a resumed check exported")

    monkeypatch.setattr(onnx_graph, "export", no_exports)
    again = near_tie.run_checks(screen, 1.5e-5, ["static"], what_if_checks=2, workers=1, shards=store)
    pd.testing.assert_frame_equal(again.checks, one.checks)
    assert {m: d.tolist() for m, d in again.deltas.items()} == {m: d.tolist() for m, d in one.deltas.items()}


def test_the_seeds_example_is_set_beside_our_replay_of_it():
    replayed = pd.DataFrame([
        {"model": MODEL, "seed": 1371433937, "shape_mode": "dynamic", "perplexity_eager": 92.14, "perplexity_ort": 91.2,
         "test_rule_passed": False},
        {"model": "Wav2Vec2ForPreTraining", "seed": 1371433937, "shape_mode": "dynamic", "perplexity_eager": 158.7,
         "perplexity_ort": 158.7, "test_rule_passed": True},
        {"model": MODEL, "seed": 5, "shape_mode": "dynamic", "perplexity_eager": 1.0, "perplexity_ort": 1.0,
         "test_rule_passed": True},
    ])
    (row,) = near_tie.seed_example(replayed).to_dict("records")  # the seed's example is a conformer run
    assert row["seed_000_eager"] == 92.1406 and row["seed_000_ort"] == 91.2174 and row["perplexity_eager"] == 92.14


@pytest.mark.slow
def test_a_replay_seed_rides_on_the_pools_second_export_and_equals_a_fresh_replay(monkeypatch):
    screen = _screen([(3, 4e-6), (8, 1e-6), (11, 9e-6)])
    result = near_tie.run_checks(screen, 1.5e-5, ["static"], what_if_checks=0, replay_seed=40)
    assert result.checks.seed.tolist() == [3, 8, 11]  # the replay seed is no candidate: not a check
    assert result.checks.weights_path.tolist() == ["fresh_export", "swap", "swap"]
    assert result.checks.session_path.tolist() == ["per_seed", "fed", "fed"]
    assert result.graphs().exports.tolist() == [2] and result.graphs().one_session[0].startswith(
        "verified on seeds 40 and 3")
    pool = result.pools[(MODEL, "static")]
    built, inputs = family.build_model(MODEL, 50), family.tester_inputs(MODEL, 50)
    paths = [pool.runner(50, built, inputs, all_values=False, **options)[1]
             for options in ({"intra_op_threads": 1}, {}, {"intra_op_threads": 1, "optimization": "basic"})]
    assert [p.session.value for p in paths] == ["fed", "per_seed", "per_seed"]  # one session only where verified
    assert {p.weights.value for p in paths} == {"swap"}
    fresh = near_tie.replay([40], [MODEL], ["static"])  # its own export
    pd.testing.assert_frame_equal(result.replayed, fresh)

    def no_exports(*args, **kwargs):
        raise AssertionError("a replay that was done exported again")

    monkeypatch.setattr(onnx_graph, "export", no_exports)
    pd.testing.assert_frame_equal(near_tie.replay([40], [MODEL], ["static"], done=result.replayed), fresh)


def test_a_model_listed_twice_is_refused_before_it_is_counted_twice():
    import pytest

    from exactness.studies.near_tie.study import validate
    from exactness.workbook.parameter_rules import StudyParameterError

    with pytest.raises(StudyParameterError, match="Wav2Vec2ForPreTraining more than once"):
        validate(["Wav2Vec2ForPreTraining", "Wav2Vec2ForPreTraining"], 10, 1e-5, ["dynamic"], 0)


def test_no_defect_seeds_means_no_defects_even_without_a_learnt_swap():
    from types import SimpleNamespace

    from exactness.studies.near_tie import study as near_tie

    pools = {("Wav2Vec2ForPreTraining", "static"): SimpleNamespace(plan=None, template_seed=3)}
    table = near_tie.defects(pools, {"Wav2Vec2ForPreTraining": []}, bound=1e-5)
    assert table.empty and list(table.columns) == list(near_tie.DEFECT_COLUMNS)


class _Named:
    """Picklable `[SeedTask, ...] -> [resume key, ...]`, refusing to run when `refuse` (a resumed sweep must not)."""

    def __init__(self, refuse: bool = False):
        self.refuse = refuse

    def __call__(self, tasks) -> list:
        if self.refuse:
            raise AssertionError("a finished chunk ran again")
        return [task.resume_key for task in tasks]


def test_sweep_tasks_resume_by_their_key_even_when_a_model_id_holds_a_slash(tmp_path):
    from exactness.workbook import sweep

    tasks = [near_tie.SeedTask("facebook/wav2vec2-base", "dynamic", seed) for seed in (3, 4, 5)]
    assert tasks[0].resume_key == "facebook/wav2vec2-base|dynamic|3" == str(tasks[0])
    assert near_tie.ClassTask("org/model", "static").resume_key == "org/model|static"
    store = ShardStore(tmp_path)
    first = sweep.map_chunks(_Named(), tasks, 1, 1, "exports", shards=store, combine=near_tie._flatten)
    assert first == [t.resume_key for t in tasks] and len(store.keys()) == 3
    again = sweep.map_chunks(_Named(refuse=True), tasks, 1, 1, "exports", shards=store, combine=near_tie._flatten)
    assert again == first
    # tasks are dict keys by value: a replay already made is found whatever object names it
    assert {near_tie.SeedTask("a/b", "static", 1): 1}[near_tie.SeedTask("a/b", "static", 1)] == 1


def test_fast_paths_must_be_a_switch():
    import pytest

    from exactness.studies.near_tie.study import validate
    from exactness.workbook.parameter_rules import StudyParameterError

    validate(["Wav2Vec2ForPreTraining"], 10, 1e-5, ["dynamic"], 0, fast_paths=False)
    with pytest.raises(StudyParameterError, match="fast_paths must be true or false .*got 1"):
        validate(["Wav2Vec2ForPreTraining"], 10, 1e-5, ["dynamic"], 0, fast_paths=1)


@pytest.mark.slow
def test_the_pools_exports_go_through_the_export_cache_and_a_second_run_exports_nothing(tmp_path):
    """One export path for both studies: the near-tie pools read and store their exports where discrete_ops does,
    and a cached export gives the same checks, margins and outputs, value for value."""
    screen = _screen([(3, 4e-6), (8, 1e-6), (20, 2e-6)])
    cache = str(tmp_path / "exports")
    first = near_tie.run_checks(screen, 1.5e-5, ["static"], what_if_checks=0, cache=cache)
    again = near_tie.run_checks(screen, 1.5e-5, ["static"], what_if_checks=0, cache=cache)
    assert first.graphs()[["exports", "cached_exports"]].values.tolist() == [[2, 0]]
    assert again.graphs()[["exports", "cached_exports"]].values.tolist() == [[0, 2]]
    for table in ("checks", "margins", "outputs"):
        pd.testing.assert_frame_equal(getattr(first, table), getattr(again, table))


@pytest.mark.slow
def test_each_rows_gap_noise_is_also_kept_in_ulps_of_its_own_top_logit(tmp_path):
    result = near_tie.run_checks(_screen([(3, 4e-6), (8, 1e-6)]), 1.5e-5, ["static"], what_if_checks=0,
                                 cache=str(tmp_path))
    logits, ulps = result.deltas[MODEL], result.deltas_ulps[MODEL]
    assert logits.shape == ulps.shape and (logits != 0).any()
    moved = logits != 0
    spacing = logits[moved] / ulps[moved]  # one float32 ulp of the row's top logit: a power of two
    assert np.all(np.log2(spacing) == np.round(np.log2(spacing)))
    assert 2.0 ** -30 < spacing.min() and spacing.max() < 2.0 ** -15  # top logits between 2^-7 and 2^8


@pytest.mark.slow
def test_seeds_beyond_the_threshold_but_within_the_engines_reach_are_checked_too(tmp_path):
    screen = pd.DataFrame({"model": MODEL, "seed": [3, 8, 20, 21], "min_gap": [4e-6, 1e-6, 5e-5, 1e-2],
                           "smallest_gap_ulps": [30.0, 8.0, 12.0, 1e5]})
    result = near_tie.run_checks(screen, 1.5e-5, ["static"], what_if_checks=0, cache=str(tmp_path))
    # 20 lies above the threshold but within the reach (at least 16 ulps); 21 lies far beyond both
    assert sorted(result.checks.seed) == [3, 8, 20] and sorted(result.margins.seed) == [3, 8, 20]
