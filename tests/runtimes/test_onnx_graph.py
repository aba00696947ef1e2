"""Export, intermediates, weight swapping and defects on real exports (static shapes: ~10 s each)."""

import numpy as np
import pytest
import torch

from exactness.models import wav2vec2_family as family
from exactness.runtimes import eager_capture, fed_graph, onnx_graph, weight_swap

MODEL = "Wav2Vec2ConformerForPreTraining"


def _export(model, seed):
    built = family.build_model(model, seed)
    return built, onnx_graph.export(built, family.tester_inputs(model, seed), dynamic=False)


@pytest.fixture(scope="module")
def conformer():
    return {seed: _export(MODEL, seed) for seed in (1, 2, 3)}


@pytest.mark.slow
def test_intermediates_are_found_by_module_scope(conformer):
    built, graph = conformer[1]
    modules = {path for path, _ in built.named_modules() if path}
    assert {"quantizer.weight_proj", "wav2vec2_conformer.feature_extractor",
            "wav2vec2_conformer.feature_projection.layer_norm", "quantizer.argmax", "quantizer.one_hot"} <= set(
        graph.intermediates)
    assert len([p for p in graph.intermediates if p in modules]) > 50


@pytest.mark.slow
def test_exposing_intermediates_leaves_the_outputs_unchanged_and_eager_close(conformer):
    built, graph = conformer[1]
    inputs = family.tester_inputs(MODEL, 1)
    produced = onnx_graph.OrtRunner(graph).run(inputs)
    eager = eager_capture.run(built, inputs)
    for name in graph.outputs:
        assert np.abs(produced[name] - eager.outputs[name].numpy()).max() < 1e-3
    logits = produced[graph.intermediates["quantizer.weight_proj"]]
    assert np.abs(logits - eager.modules["quantizer.weight_proj"][0].numpy()).max() < 1e-4
    assert produced[graph.intermediates["quantizer.argmax"]].shape == (364,)


def test_swapped_weights_give_bit_identical_outputs_to_a_fresh_export(conformer):
    (a_model, a_graph), (b_model, b_graph), (c_model, c_graph) = conformer[1], conformer[2], conformer[3]
    plan = weight_swap.learn(a_graph, a_model, b_graph, b_model, 2)
    assert {r.kind for r in plan.rules.values()} >= {"same", "transpose", "reshape", "batchnorm_fold", "constant"}
    inputs = family.tester_inputs(MODEL, 3)
    swapped = onnx_graph.OrtRunner(a_graph, plan.initializers(c_model)).run(inputs)
    fresh = onnx_graph.OrtRunner(c_graph).run(inputs)
    assert swapped.keys() == fresh.keys()
    for name in fresh:
        assert np.array_equal(swapped[name], fresh[name]), name


def test_one_session_fed_the_swapped_weights_gives_a_fresh_exports_outputs(conformer):
    (a_model, a_graph), (b_model, _), (c_model, c_graph) = conformer[1], conformer[2], conformer[3]
    plan = weight_swap.learn(a_graph, a_model, conformer[2][1], b_model, 2)
    fed = fed_graph.learn(a_graph, [(plan.initializers(b_model), family.tester_inputs(MODEL, 2)),
                                    (plan.initializers(a_model), family.tester_inputs(MODEL, 1))])
    inputs = family.tester_inputs(MODEL, 3)
    got = fed.runner(plan.initializers(c_model), intra_op_threads=1).run(inputs)
    fresh = onnx_graph.OrtRunner(c_graph).run(inputs)
    assert list(got) == list(fresh)
    for name in fresh:
        assert np.array_equal(got[name], fresh[name]), name


def test_a_plain_run_exposes_only_what_a_check_reads_and_equals_the_bare_graph():
    from exactness.runtimes.graph_pool import GraphPool

    model = "Wav2Vec2ForPreTraining"
    pool = GraphPool(model, "static", exposed=family.check_exposed(model))
    built, inputs = family.build_model(model, 4), family.tester_inputs(model, 4)
    plain, _ = pool.runner(4, built, inputs, all_values=False)
    full, _ = pool.runner(4, built, inputs, all_values=True)
    assert pool.exports == 1  # both views of one seed come from one export
    assert set(plain.graph.intermediates) == family.check_exposed(model) | {"quantizer.weight_proj"}
    assert len(full.graph.intermediates) > 50
    bare = onnx_graph.OrtRunner(pool.template[0].exposing(())).run(inputs)
    produced = plain.run(inputs)
    assert set(bare) == set(pool.template[0].outputs)
    assert all(np.array_equal(bare[name], produced[name]) for name in bare)


def test_exposing_values_that_move_an_output_is_refused(monkeypatch):
    import sys
    from pathlib import Path

    from exactness.runtimes.graph_pool import ExposureError, GraphPool

    sys.path.insert(0, str(Path(__file__).parent))
    from test_fed_graph import _graph, _seed

    real_run = onnx_graph.OrtRunner.run

    def observed(self, inputs):  # as if exposing the relu kept ORT from fusing around it
        out = real_run(self, inputs)
        if "r" in out:
            out["Y"] = np.nextafter(out["Y"], np.float32(np.inf))
        return out

    monkeypatch.setattr(onnx_graph.OrtRunner, "run", observed)
    pool = GraphPool("toy", "static", exposed=frozenset({"relu"}))
    monkeypatch.setattr(pool, "fresh", lambda seed, built, inputs: _graph())
    with pytest.raises(ExposureError, match=r"moves the output\(s\) \['Y'\]"):
        pool.runner(1, None, _seed(1)[1], all_values=False)


def test_a_swap_that_cannot_be_explained_is_refused(conformer):
    (a_model, a_graph), (_, b_graph) = conformer[1], conformer[2]
    with torch.no_grad():
        broken = family.build_model(MODEL, 2)
        broken.project_q.weight.add_(1.0)  # the check export no longer matches its model
    with pytest.raises(weight_swap.SwapError, match="differs from a fresh export"):
        weight_swap.learn(a_graph, a_model, b_graph, broken, 2)


@pytest.mark.slow
def test_weight_norm_class_swaps_bit_identically():
    exports = {seed: _export("Wav2Vec2ForPreTraining", seed) for seed in (4, 5, 6)}
    plan = weight_swap.learn(exports[4][1], exports[4][0], exports[5][1], exports[5][0], 5)
    inputs = family.tester_inputs("Wav2Vec2ForPreTraining", 6)
    swapped = onnx_graph.OrtRunner(exports[4][1], plan.initializers(exports[6][0])).run(inputs)
    fresh = onnx_graph.OrtRunner(exports[6][1]).run(inputs)
    assert all(np.array_equal(swapped[n], fresh[n]) for n in fresh)


@pytest.mark.parametrize("defect", [{"kind": "perturbed_weight"}, {"kind": "wrong_op"},
                                    {"kind": "biased_code", "code": 3, "amount": 5.0}])
def test_defects_change_the_graph_outputs(conformer, defect):
    _, graph = conformer[1]
    inputs = family.tester_inputs(MODEL, 1)
    clean = onnx_graph.OrtRunner(graph).run(inputs)
    broken_runner = onnx_graph.OrtRunner(graph, defect=defect)
    broken = broken_runner.run(inputs)
    assert broken_runner.defect
    assert any(not np.array_equal(clean[n], broken[n]) for n in graph.outputs)


def test_a_confident_flip_defect_flips_the_row_it_targets(conformer):
    from exactness.compare.tie_aware import top_two
    from exactness.models.quantizer_logits import plain_logits
    from exactness.studies.near_tie.study import _confident_flip

    _, graph = conformer[1]
    defect = {"kind": "biased_code", **_confident_flip(MODEL, 1, bound=2e-5)}
    produced = onnx_graph.OrtRunner(graph, defect=defect).run(family.tester_inputs(MODEL, 1))
    codes = torch.from_numpy(produced[graph.intermediates["quantizer.argmax"]])
    eager = top_two(plain_logits(MODEL, 1)).top1_index
    flipped = (codes != eager).nonzero().flatten().tolist()
    assert flipped and all(int(codes[r]) + (r % 2) * 320 == defect["code"] for r in flipped)


class _Pair(torch.nn.Module):
    """A forward returning a namedtuple, which transformers' exporter fails to rebuild."""

    Out = __import__("collections").namedtuple("Out", ["logits", "choice"])

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 4)

    def forward(self, x):
        y = self.lin(x)
        return self.Out(y, y.argmax(-1))


def test_a_namedtuple_output_is_named_with_its_fix_and_a_plain_tuple_exports():
    torch.manual_seed(0)
    model, inputs = _Pair().eval(), {"x": torch.randn(2, 8)}
    with pytest.raises(onnx_graph.UnexportableOutputError, match=r"returns a namedtuple \(Out\).*return a dict"):
        onnx_graph.export(model, inputs, dynamic=False)
    model.Out = lambda *values: tuple(values)  # the fix the message names: the same values in a plain tuple
    assert onnx_graph.export(model, inputs, dynamic=False).outputs == ["0", "1"]
