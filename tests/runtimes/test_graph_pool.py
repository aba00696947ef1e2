"""A graph pool's two phases on a tiny two-layer model (exports of about a second): prepared in one step, then
only runs, with the path each runner takes; each refusal recorded as a state with its reason."""

import pickle

import numpy as np
import pytest
import torch

from exactness.runtimes import fed_graph, graph_pool, onnx_graph, weight_swap
from exactness.runtimes.graph_pool import Case, GraphPool, Learnt, Phase
from exactness.runtimes.speedup_paths import LookupPath, SessionPath, WeightsPath


class TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = torch.nn.Linear(6, 8)
        self.head = torch.nn.Linear(8, 2)

    def forward(self, features):
        return {"out": self.head(torch.relu(self.hidden(features)))}


def _case(seed: int) -> Case:
    torch.manual_seed(seed)
    return Case(seed, TwoLayers().eval(), {"features": torch.rand(5, 6)})


@pytest.fixture(scope="module")
def cases():
    return {seed: _case(seed) for seed in range(4)}


@pytest.fixture(scope="module")
def prepared(cases):
    return GraphPool("toy", "static").prepare(cases[0], cases[1])


def _eager(case: Case) -> np.ndarray:
    with torch.no_grad():
        return case.built(**case.inputs)["out"].numpy()


def _counting_exports(monkeypatch) -> list[int]:
    made = []
    real = graph_pool.export_fresh

    def counted(built, inputs, shape_mode):
        made.append(shape_mode)
        return real(built, inputs, shape_mode)

    monkeypatch.setattr(graph_pool, "export_fresh", counted)
    return made


@pytest.mark.slow
def test_preparing_learns_the_swap_and_the_fed_session_then_runs_take_the_fast_paths(prepared, cases):
    assert prepared.phase is Phase.PREPARED and prepared.exports == 2
    assert prepared.swap_state is Learnt.VERIFIED and prepared.fed_state is Learnt.VERIFIED
    assert prepared.swap_status == "verified against a fresh export of seed 1"
    assert prepared.fed_status.startswith("verified on seeds 1 and 0")
    own, own_paths = prepared.runner(0, cases[0].built, cases[0].inputs, intra_op_threads=1)
    assert (own_paths.weights, own_paths.session) == (WeightsPath.FRESH_EXPORT, SessionPath.PER_SEED)
    fed, fed_paths = prepared.runner(2, cases[2].built, cases[2].inputs, intra_op_threads=1)
    assert (fed_paths.weights, fed_paths.session, fed_paths.lookup) == (WeightsPath.SWAP, SessionPath.FED,
                                                                        LookupPath.PLAIN)  # no rewrite given
    np.testing.assert_allclose(fed.run(cases[2].inputs)["out"], _eager(cases[2]), atol=1e-5)
    fresh = onnx_graph.OrtRunner(onnx_graph.export(cases[2].built, cases[2].inputs, dynamic=False),
                                 intra_op_threads=1).run(cases[2].inputs)
    assert np.array_equal(fed.run(cases[2].inputs)["out"], fresh["out"])  # the swap and the feed are exact


def test_a_defect_or_unverified_options_run_swapped_in_a_session_of_their_own(prepared, cases):
    for options, defect in (({"intra_op_threads": 1, "optimization": "basic"}, None), ({}, None)):
        _, paths = prepared.runner(3, cases[3].built, cases[3].inputs, defect, **options)
        assert (paths.weights, paths.session) == (WeightsPath.SWAP, SessionPath.PER_SEED)


def test_a_prepared_pool_never_exports_again_and_refuses_a_second_preparation(prepared, cases, monkeypatch):
    made = _counting_exports(monkeypatch)
    for seed in (0, 1, 2, 3):
        prepared.runner(seed, cases[seed].built, cases[seed].inputs, intra_op_threads=1)
    assert made == [] and prepared.exports == 2
    with pytest.raises(RuntimeError, match="already prepared"):
        prepared.prepare(cases[2])


def test_a_worker_copy_runs_every_seed_swapped_and_needs_no_model(prepared, cases):
    copy = pickle.loads(pickle.dumps(prepared))
    assert copy.template[1] is None and copy.own == {}
    runner, paths = copy.runner(0, cases[0].built, cases[0].inputs, intra_op_threads=1)
    assert paths.weights is WeightsPath.SWAP
    mine, _ = prepared.runner(0, cases[0].built, cases[0].inputs, intra_op_threads=1)
    assert np.array_equal(runner.run(cases[0].inputs)["out"], mine.run(cases[0].inputs)["out"])


@pytest.mark.slow
def test_without_swap_every_seed_runs_its_own_export_once_for_both_views(cases, monkeypatch):
    pool = GraphPool("toy", "static", swap=False).prepare(cases[0], cases[1])
    assert pool.swap_state is Learnt.OFF and pool.fed_state is Learnt.OFF and pool.plan is None
    assert pool.swap_status == "off (fast paths off)" and pool.fed_status == "no swap"
    made = _counting_exports(monkeypatch)
    _, first = pool.runner(2, cases[2].built, cases[2].inputs, all_values=False)
    _, second = pool.runner(2, cases[2].built, cases[2].inputs, all_values=True)
    assert made == ["static"] and pool.exports == 3  # the seed's two views share one export
    assert first == second and first.weights is WeightsPath.FRESH_EXPORT and first.session is SessionPath.PER_SEED


def test_a_single_seed_learns_nothing_and_further_seeds_export(cases, monkeypatch):
    pool = GraphPool("toy", "static").prepare(cases[0])
    assert pool.phase is Phase.PREPARED and pool.swap_state is Learnt.OFF
    assert pool.swap_status == "not learnt (one seed only)"
    made = _counting_exports(monkeypatch)
    pool.runner(3, cases[3].built, cases[3].inputs)
    assert made == ["static"]


def test_a_refused_swap_is_recorded_with_its_reason_and_seeds_export_fresh(cases, monkeypatch):
    def refuse(*args):
        raise weight_swap.SwapError("initializer 'w' depends on the seed but matches no model tensor")

    monkeypatch.setattr(weight_swap, "learn", refuse)
    pool = GraphPool("toy", "static").prepare(cases[0], cases[1])
    assert pool.swap_state is Learnt.REFUSED and pool.fed_state is Learnt.OFF and pool.plan is None
    assert pool.swap_status == "disabled: initializer 'w' depends on the seed but matches no model tensor"
    _, paths = pool.runner(2, cases[2].built, cases[2].inputs)
    assert paths.weights is WeightsPath.FRESH_EXPORT and pool.exports == 3


def test_a_refused_fed_session_leaves_the_swap_in_a_session_per_seed(cases, monkeypatch):
    def refuse(*args):
        raise fed_graph.FedError("1 values differ from a per-seed session (first: 'out')")

    monkeypatch.setattr(fed_graph, "learn", refuse)
    pool = GraphPool("toy", "static").prepare(cases[0], cases[1])
    assert pool.swap_state is Learnt.VERIFIED and pool.fed_state is Learnt.REFUSED
    assert pool.fed_status == "disabled: 1 values differ from a per-seed session (first: 'out')"
    _, paths = pool.runner(2, cases[2].built, cases[2].inputs, intra_op_threads=1)
    assert (paths.weights, paths.session) == (WeightsPath.SWAP, SessionPath.PER_SEED)


def test_a_pool_run_without_preparing_learns_from_its_first_two_seeds(cases):
    pool = GraphPool("toy", "static")
    assert pool.phase is Phase.EMPTY and pool.swap_status == "not learnt yet"
    pool.runner(0, cases[0].built, cases[0].inputs)
    assert pool.phase is Phase.TEMPLATE and pool.swap_state is Learnt.PENDING
    pool.runner(0, cases[0].built, cases[0].inputs)  # the template again: still waiting for another seed
    assert pool.phase is Phase.TEMPLATE and pool.exports == 1
    pool.runner(1, cases[1].built, cases[1].inputs)
    assert pool.phase is Phase.PREPARED and pool.swap_state is Learnt.VERIFIED and pool.exports == 2


def test_an_unknown_shape_mode_is_refused():
    with pytest.raises(ValueError, match="unknown shape mode 'ragged'"):
        GraphPool("toy", "ragged")


def test_a_pool_without_a_fed_session_learns_the_swap_only(cases, monkeypatch):
    """discrete_ops runs its own sessions on the swapped weights: the fed session is neither learnt nor used."""
    def never(*args):
        raise AssertionError("the fed session was learnt")

    monkeypatch.setattr(fed_graph, "learn", never)
    pool = GraphPool("toy", "static", fed=False).prepare(cases[0], cases[1])
    assert pool.swap_state is Learnt.VERIFIED and pool.fed_state is Learnt.OFF and pool.fed is None
    _, paths = pool.runner(2, cases[2].built, cases[2].inputs, intra_op_threads=1)
    assert (paths.weights, paths.session) == (WeightsPath.SWAP, SessionPath.PER_SEED)
