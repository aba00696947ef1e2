"""The eager screen is exact: its margins are the checks' eager margins for every kind of op, stopping the
forward after the last op it waits for changes none of them, and the plain path (every seed checked) gives the
same verdict."""

import dataclasses

import numpy as np
import pytest
import torch

from exactness.engine import verdict_words
from exactness.engine.rows import ClassTask
from exactness.runtimes import discrete_recorder, onnx_graph, worker_state
from exactness.runtimes.eager_capture import EXPORT_TEST_FORWARD_SEED
from exactness.runtimes.export_cache import ExportCache
from exactness.studies.discrete_ops import check, study


class EveryKind(torch.nn.Module):
    """An argmax, a top-k, a comparison, a rounding feeding an integer cast and an Equal, each on an output."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 8)

    def forward(self, x):
        h = self.proj(x)
        rounded = torch.floor(h * 3).long()
        return {"first": h.argmax(-1), "best3": h.topk(3, dim=-1).indices, "kept": (h > 0.1).float() * h,
                "steps": rounded, "same": torch.where(h == h[:, :1], h, -h), "total": h.sum(-1)}


def test_the_screens_margins_are_the_checks_eager_margins_for_every_kind_of_op():
    torch.manual_seed(0)
    model, inputs = EveryKind().eval(), {"x": torch.randn(6, 4)}
    task = ClassTask("every-kind", "static")
    cg = check.from_graph(task, 0, onnx_graph.export(model, inputs, dynamic=False), inputs)
    kinds = {op.category for op in cg.ops if check.counted(op)}
    assert kinds >= {"argmax", "topk", "compare", "rounding"}
    result = check.check_seed(cg, 0, model, inputs, ExportCache("/nonexistent"), 1e-3, 1e-3, "calibration")
    _, records = discrete_recorder.record(model, inputs, seed=EXPORT_TEST_FORWARD_SEED)
    screened = {r.node: r for r in check.screen_rows(task, 0, cg.ops, records)}
    checked = {r.node: r for r in result.margins if r.node in screened}
    assert screened and set(screened) == {op.node for op in cg.ops if check.counted(op)}
    for node, row in screened.items():
        other = checked[node]
        assert (row.decisions, row.exact_ties) == (other.decisions, other.exact_ties)
        np.testing.assert_array_equal([row.min_margin, row.min_margin_ulps], [other.min_margin, other.min_margin_ulps])
    waited = frozenset((r.op, r.call) for r in records if r.category in ("argmax", "topk"))
    _, stopped = discrete_recorder.record(model, inputs, seed=EXPORT_TEST_FORWARD_SEED, stop_after=waited)
    assert len(stopped) < len(records) and all(a.op == b.op and torch.equal(a.inputs[0], b.inputs[0])
                                               for a, b in zip(stopped, records, strict=False))


@pytest.mark.slow
def test_the_plain_path_checks_every_seed_and_gives_the_same_verdict(tmp_path):
    seeds, fast = 6, study.Settings(calibration_seeds=2, max_checks=6, cache=str(tmp_path))
    plain = study.Settings(calibration_seeds=2, max_checks=6, fast_paths=False, cache=str(tmp_path))
    a = study.run(["XLMForQuestionAnswering"], 0, seeds, ["static"], settings=fast, progress_every=1e9)
    b = study.run(["XLMForQuestionAnswering"], 0, seeds, ["static"], settings=plain, progress_every=1e9)
    assert a.verdicts[0].cause == b.verdicts[0].cause and a.verdicts[0].compare == b.verdicts[0].compare
    # XLM's top-k ties on every seed: screened all the same, its rate from every seed, the ties a sample
    assert a.verdicts[0].screened == seeds and a.verdicts[0].ties == seeds
    assert set(a.screen.recorder) == {"tapped"} and "only the counted ops' calls recorded" in a.graphs.screen.iloc[0]
    assert len(b.seeds) == seeds and set(a.seeds.seed) <= set(b.seeds.seed)
    shared = a.margins.merge(b.margins, on=["seed", "node"], suffixes=("", "_plain"))
    assert len(shared) and np.array_equal(shared.min_margin, shared.min_margin_plain, equal_nan=True)
    assert a.screen.sort_values(["seed", "node"]).min_margin.tolist() == \
        b.screen.sort_values(["seed", "node"]).min_margin.tolist()
    assert int(a.graphs.cached_exports.sum()) == 0
    assert int(b.graphs.exports.sum()) == 0  # the second run exports nothing


@pytest.mark.slow
def test_a_worker_learns_a_class_once_and_a_fallback_stays_in_its_chunk(tmp_path, monkeypatch):
    from exactness.runtimes import discrete_taps

    settings = study.Settings(cache=str(tmp_path))
    task = ClassTask("XLMForQuestionAnswering", "static")
    cg = study.prepare(task, [0, 1], settings)
    learnt = []
    real = discrete_taps.learn
    monkeypatch.setattr(discrete_taps, "learn", lambda *a, **k: learnt.append(1) or real(*a, **k))
    with worker_state.fresh() as state:
        first = study._Screen({task: cg.ops}, settings)([(task, 3), (task, 4)])
        assert len(learnt) == 1 and set(first.recorder) == {"tapped"}
        plan = next(iter(state.learnt.values())).taps

        def refused(*args, **kwargs):
            raise discrete_taps.TapError("another call")

        monkeypatch.setattr(discrete_taps.TapPlan, "record", refused)
        fallen = study._Screen({task: cg.ops}, settings)([(task, 3), (task, 4)])
        assert set(fallen.recorder) == {"dispatch"}  # this chunk's seeds recorded whole, margins the same
        cols = ["seed", "node", "decisions", "min_margin", "min_margin_ulps", "exact_ties", "reads_nonfinite"]
        assert fallen[cols].equals(first[cols])
        monkeypatch.undo()
        again = study._Screen({task: cg.ops}, settings)([(task, 5)])
        assert len(learnt) == 1 and set(again.recorder) == {"tapped"}  # the next chunk taps again, not relearnt
        assert next(iter(state.learnt.values())).taps is plan
    assert worker_state.current() is not state  # the process's own state is back


@pytest.mark.slow
def test_one_or_two_workers_give_the_same_tables(tmp_path):
    settings = study.Settings(calibration_seeds=2, max_checks=4, cache=str(tmp_path))
    models = ["XLMForQuestionAnswering", "BertModel"]
    one = study.run(models, 0, 6, ["static"], workers=1, settings=settings, progress_every=1e9)
    two = study.run(models, 0, 6, ["static"], workers=2, settings=settings, progress_every=1e9)
    for name in ("graphs", "ops", "screen", "margins", "outputs"):
        a, b = getattr(one, name), getattr(two, name)
        # the second run reads the first one's exports from the cache
        a, b = (t.drop(columns=[c for c in t.columns if "seconds" in c or "exports" in c]) for t in (a, b))
        assert a.equals(b), name
    assert one.seeds.drop(columns="seconds").equals(two.seeds.drop(columns="seconds"))
    assert verdict_words.table(one.verdicts).equals(verdict_words.table(two.verdicts))


@pytest.mark.slow
def test_one_forward_a_seed_screens_every_shape_mode_as_each_screened_alone(tmp_path, monkeypatch):
    from exactness.runtimes import discrete_taps

    settings, seeds = study.Settings(cache=str(tmp_path)), list(range(4))
    tasks = [ClassTask("XLMForQuestionAnswering", mode) for mode in ("static", "dynamic")]
    graphs = {task: study.prepare(task, [0, 1], settings) for task in tasks}
    units = [u for u in study._units(graphs, seeds, settings) if u.phase is study.Phase.SCREEN]
    assert len(units) == 1 and units[0].tasks == tasks
    assert str(units[0]) == "XLMForQuestionAnswering|static+dynamic screen 0-3"
    with worker_state.fresh():  # this test's own worker for the shared chunk; the process's state afterwards
        learning = discrete_taps.learn
        learnt = []
        monkeypatch.setattr(discrete_taps, "learn", lambda *a, **k: learnt.append(1) or learning(*a, **k))
        study._Work(settings)([dataclasses.replace(units[0], seeds=(9,))])
        assert len(learnt) == 1  # the second mode waits for the same calls: the first one's plan
        forwards, verified = [], []
        real_record, real_recorded = discrete_taps.TapPlan.record, study._Screen._recorded
        monkeypatch.setattr(discrete_taps.TapPlan, "record",
                            lambda plan, *a: forwards.append(1) or real_record(plan, *a))
        monkeypatch.setattr(study._Screen, "_recorded",
                            lambda screen, task, *a: verified.append(task) or real_recorded(screen, task, *a))
        shared = study._Work(settings)(units)
        assert len(forwards) == len(seeds)  # not one a seed and shape mode
        assert verified == tasks  # yet each mode's taps checked against the dispatch recorder on the first seed
        monkeypatch.undo()
    assert [done.task for done in shared] == tasks
    for task, done in zip(tasks, shared, strict=True):
        alone = study._Screen({task: graphs[task].ops}, settings)([(task, s) for s in seeds])
        assert len(alone) and set(alone.recorder) == {"tapped"} and done.screen.equals(alone), task

    # a mode that counts fewer calls (Tapas's dynamic graph): the first mode's plan taps them already
    counted_nodes = [op.node for op in graphs[tasks[1]].ops if check.counted(op)]
    assert len(counted_nodes) > 1
    fewer = {tasks[0]: graphs[tasks[0]].ops,
             tasks[1]: [op for op in graphs[tasks[1]].ops if op.node != counted_nodes[0]]}
    unit = study._Unit(tasks[0], study.Phase.SCREEN, tuple(seeds), ops=fewer)
    study._Work(settings)([dataclasses.replace(unit, seeds=(9,))])
    forwards.clear()
    monkeypatch.setattr(discrete_taps.TapPlan, "record", lambda plan, *a: forwards.append(1) or real_record(plan, *a))
    subset = study._Work(settings)([unit])
    assert len(forwards) == len(seeds)
    monkeypatch.undo()
    for task, done in zip(tasks, subset, strict=True):
        alone = study._Screen({task: fewer[task]}, settings)([(task, s) for s in seeds])
        assert len(alone) and set(alone.recorder) == {"tapped"} and done.screen.equals(alone), task
    assert set(subset[1].screen.node) == set(counted_nodes[1:])

    # a seed whose forward makes another call: both modes fall back from it on, as each would alone
    building = []
    real_made = study._Screen._made
    monkeypatch.setattr(study._Screen, "_made", lambda screen, model, seed: building.append(seed) or
                        real_made(screen, model, seed))

    def refused_on_seed_2(plan, *args):
        if building[-1] == 2:
            raise discrete_taps.TapError("another call")
        return real_record(plan, *args)

    monkeypatch.setattr(discrete_taps.TapPlan, "record", refused_on_seed_2)
    fallen = study._Work(settings)(units)
    for task, done in zip(tasks, fallen, strict=True):
        alone = study._Screen({task: graphs[task].ops}, settings)([(task, s) for s in seeds])
        by_seed = alone.groupby("seed").recorder.agg(set).tolist()
        assert by_seed == [{"tapped"}] * 2 + [{"dispatch"}] * 2 and done.screen.equals(alone), task


def test_a_screen_shards_name_fits_a_file_name_for_every_paper_class():
    import pathlib

    import yaml

    from exactness.workbook.shards import ShardStore

    paper = pathlib.Path(__file__).resolve().parents[3] / "params" / "discrete_ops" / "paper.yaml"
    preset = yaml.safe_load(paper.read_text())
    label = f"discrete ops: calibration and screen ({len(preset['models']) * len(preset['shape_modes'])} classes)"
    last = tuple(range(preset["n_seeds"] - study.SCREEN_CHUNK, preset["n_seeds"]))
    for model in preset["models"]:
        unit = study._Unit(ClassTask(model, "static"), study.Phase.SCREEN, last,
                           ops={ClassTask(model, mode): [] for mode in preset["shape_modes"]})
        key = ShardStore.key(label, [unit])
        assert len(f".{key}.pkl.XXXXXXXX.tmp".encode()) < 255, key  # the name the shard is written under first


@pytest.mark.slow
def test_a_worker_that_ran_the_codevector_lookup_screens_a_class_as_a_fresh_one(tmp_path, own_worker_state):
    """One worker state serves every study a process runs (a Dask worker runs near_tie's checks, then discrete_ops'
    screen): what the lookup learnt about a quantizer never reads as a class's tap plan."""
    from exactness.models import wav2vec2_family as family
    from exactness.runtimes import codevector_lookup

    model = "UniSpeechForPreTraining"
    assert codevector_lookup.run(family.build_model(model, 0), family.tester_inputs(model, 0), capture=False).gathered
    settings = study.Settings(calibration_seeds=1, max_checks=1, cache=str(tmp_path))
    found = study.run(["XLMForQuestionAnswering"], 0, 2, ["static"], settings=settings, progress_every=1e9)
    assert found.verdicts[0].screened == 2 and set(found.screen.recorder) == {"tapped"}
