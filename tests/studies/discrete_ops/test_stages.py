"""The pipeline's stages switched one at a time: the stage and the pass named only where removing it is measured to
remove the defect; a missing value named from a node's traced call; reproductions judged by running them."""

import re

import numpy as np
import onnx
import pytest
import torch
from onnx import helper

from exactness.causes import Stage
from exactness.engine import place_words
from exactness.engine.places import REFERENCE, Remedy, Symptom, Trial
from exactness.runtimes import onnx_graph
from exactness.runtimes.export_cache import ExportCache, export_key
from exactness.studies.discrete_ops import reproductions, stages


def test_bisect_names_the_one_candidate_whose_removal_removes_it_and_only_that():
    names = [f"p{i}" for i in range(13)]
    for culprit in names:
        asked = []

        def absent(off, culprit=culprit, asked=asked):
            asked.append(off)
            return culprit in off

        assert stages.bisect(names, absent) == culprit
        assert len(asked) <= 6  # all, four halvings, the one alone
    assert stages.bisect(names, lambda off: False) == ""  # removing every candidate leaves it: none is named
    # two needed at once: each half alone leaves it, so no single one is named
    assert stages.bisect(names, lambda off: {"p1", "p9"} <= set(off)) == ""
    assert stages.bisect([], lambda off: True) == ""


def test_optimizer_rules_have_distinct_names_and_an_options_change_is_a_new_cache_entry():
    names = [name for name, _ in onnx_graph.optimizer_rules()]
    assert len(names) == len(set(names)) > 10
    assert any(name.startswith("no_op[") and "Add(x, 0)" in name for name in names)
    model, inputs = torch.nn.Linear(2, 2), {"input": torch.zeros(1, 2)}
    default = export_key(model, inputs, dynamic=False)
    assert default == export_key(model, inputs, dynamic=False, options=onnx_graph.ExportOptions())
    assert default != export_key(model, inputs, dynamic=False, options=onnx_graph.ExportOptions(optimize=False))
    assert default != export_key(model, inputs, dynamic=False,
                                 options=onnx_graph.ExportOptions(rules_off=(names[0],)))
    with pytest.raises(ValueError, match="no such optimizer rule: nope"):
        with onnx_graph._rules(onnx_graph.ExportOptions(rules_off=("nope",))):
            pass


def _node(op, inputs, outputs, name, call=""):
    node = helper.make_node(op, inputs, outputs, name=name)
    if call:
        entry = node.metadata_props.add()
        entry.key, entry.value = onnx_graph.FX_NODE_KEY, call
    return node


def _graph(nodes, constants=()):
    values = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2]) for n in ("a", "b")]
    out = [helper.make_tensor_value_info("q", onnx.TensorProto.FLOAT, [2])]
    return helper.make_model(helper.make_graph(nodes, "g", values, out, initializer=list(constants)))


def test_a_node_whose_traced_call_reads_a_value_the_graph_no_longer_computes_names_it():
    call = "%div_8 : [num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%a, %add_3), kwargs = {})"
    optimized = _graph([_node("Div", ["a", "b"], ["q"], "node_div_8", call)])
    eps = onnx.numpy_helper.from_array(np.array(1e-10, np.float32), "eps")
    plain = _graph([_node("Add", ["b", "eps"], ["add_3"], "node_add_3"),
                    _node("Div", ["a", "add_3"], ["q"], "node_div_8", call)], [eps])
    found = stages.missing_inputs(optimized, "node_div_8", plain)
    assert (found.missing, found.reads, found.op, found.args, found.was_op) == ("add_3", "b", "div", ("a", "add_3"),
                                                                                "Add")
    assert found.was_args == ("b", pytest.approx(1e-10))  # the constant as its value, not as words
    # on a page: the exporter's value names become letters the sentence defines
    assert place_words.missing(found) == (
        "the node was traced from torch's div(x, y), but the optimized graph no longer computes y "
        "(exported with optimize=False, y = Add(z, 1e-10)); the node reads z in its place")
    assert stages.missing_inputs(plain, "node_div_8") is None  # the graph computes what the call read
    # an optional input left out (ONNX's empty name) is no argument: Clip(x, max) has no letter for the gap
    six = onnx.numpy_helper.from_array(np.array(6.0, np.float32), "six")
    clipped = _graph([_node("Clip", ["b", "", "six"], ["add_3"], "node_clip")], [six])
    assert stages._producer(clipped, "add_3") == ("Clip", ("b", 6.0))
    assert stages.missing_inputs(_graph([_node("Div", ["a", "b"], ["q"], "node_div_8")]), "node_div_8") is None


def test_a_reproduction_counts_only_when_running_it_shows_the_pass():
    shows = "import numpy as np\neager = np.zeros(3)\nwith_pass = np.full(3, np.nan)\nwithout_pass = np.zeros(3)\n"
    shown = reproductions.judge(shows)
    assert shown.reproduces and (shown.size, shown.with_bad, shown.without_bad) == (3, 3, 0)
    fixed = "import numpy as np\neager = np.zeros(3)\nwith_pass = np.zeros(3)\nwithout_pass = np.zeros(3)\n"
    assert not reproductions.judge(fixed).reproduces  # a pass fixed upstream: nothing to report
    both = "import numpy as np\neager = np.zeros(3)\nwith_pass = np.ones(3)\nwithout_pass = np.ones(3)\n"
    assert not reproductions.judge(both).reproduces  # the difference is not the pass's
    broken = reproductions.judge("raise RuntimeError('moved')")
    assert not broken.reproduces and broken.error.startswith("RuntimeError: moved")
    assert place_words.reproduction(broken) == "it fails: RuntimeError: moved"


class _Guarded(torch.nn.Module):
    def forward(self, a, b):
        return a / (b + 1e-10)  # the guard keeps 0 / 0 finite


class _PadPool(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.max_pool2d(torch.nn.functional.pad(x, (1, 1, 1, 1)), 3, stride=2)


def _measure(model, inputs, cache):
    eager = {"output": model(**inputs).double().numpy()}
    wide = {"output": model(**{k: v.double() for k, v in inputs.items()}).numpy()}
    return stages.Measure(model, inputs, False, cache, eager, wide)


@pytest.mark.slow
def test_a_guard_the_exporters_optimizer_deletes_is_named_by_its_rule(tmp_path):
    measure = _measure(_Guarded(), {"a": torch.zeros(4), "b": torch.zeros(4)}, ExportCache(tmp_path))
    proof = stages.locate(measure)
    assert proof.stage is stages.Stage.EXPORT_OPTIMIZER
    assert proof.pass_name.startswith("no_op[") and "Add(" in proof.pass_name
    assert proof.with_pass.nonfinite == 4 and proof.without_pass.nonfinite == 0
    assert proof.without.export.rules_off == (proof.pass_name,)
    assert proof.remedy == Remedy(Stage.EXPORT_OPTIMIZER, proof.pass_name, provider=onnx_graph.PROVIDER)
    assert "optimize=False" in place_words.remedy(proof.remedy) and proof.pass_name in place_words.proof(proof)


@pytest.mark.slow
def test_a_pad_folded_into_a_max_pool_is_named_by_ort_pass_and_reproduced(tmp_path):
    x = -1 - torch.rand(1, 2, 8, 8, generator=torch.Generator().manual_seed(0))
    proof = stages.locate(_measure(_PadPool(), {"x": x}, ExportCache(tmp_path)))
    assert proof.stage is stages.Stage.ORT_OPTIMIZER and proof.pass_name == "Pad_Fusion"
    assert proof.with_pass.over > 1 >= proof.without_pass.over
    assert proof.exports == 1  # ORT's passes are switched on the one graph
    assert 'disabled_optimizers=["Pad_Fusion"]' in place_words.remedy(proof.remedy)
    shown = reproductions.run(proof.stage, proof.pass_name)
    assert shown is not None and shown.reproduces, place_words.reproduction(shown)


def test_a_model_without_the_defect_names_no_stage(tmp_path):
    x = 1 + torch.rand(1, 2, 8, 8, generator=torch.Generator().manual_seed(0))  # positive: a zero pad never wins
    proof = stages.locate(_measure(_PadPool(), {"x": x}, ExportCache(tmp_path)))
    assert proof.stage is stages.Stage.NOT_SHOWN and not proof.pass_name and place_words.remedy(proof.remedy) == ""


@pytest.fixture(scope="module")
def registry_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("exports")


def _localized(model: str, seed: int, output: str, cache_folder):
    from exactness.engine.rows import ClassTask
    from exactness.studies.discrete_ops import localize, study

    cg = study.prepare(ClassTask(model, "static"), [0, 1], study.Settings(cache=str(cache_folder)))
    made = study._fresh(model, "")(seed)
    return localize.localize(cg, seed, made.model, made.inputs, ExportCache(cache_folder), output)


@pytest.mark.slow
def test_tapas_nan_is_named_as_the_exporters_add_zero_rule_deleting_its_guard(registry_cache):
    found = _localized("TapasForQuestionAnswering", 0, "", registry_cache)
    missing = place_words.missing(found.missing)
    assert found.op_type == "Div" and "no longer computes y (" in missing and "Add(z, 1e-10)" in missing
    where = place_words.where(found)
    assert not re.search(r"\b(?:add|view|sum|mul)_\d+\b", where), where  # no value name of the graph
    assert re.search(r"ONNX node node_\w+ of the exported graph", where), where
    assert found.stage == stages.Stage.EXPORT_OPTIMIZER.value
    assert found.pass_name.startswith("no_op[") and "Add(" in found.pass_name
    assert found.error_with > 1 and found.error_without < 1e-6  # the -10000 mask on another column; none
    assert found.remedy.reproduces and "optimize=False" in place_words.remedy(found.remedy)


@pytest.mark.slow
def test_bitmodel_is_named_as_ort_pad_fusion_with_its_workaround(registry_cache):
    found = _localized("BitModel", 1, "last_hidden_state", registry_cache)
    assert found.stage == stages.Stage.ORT_OPTIMIZER.value and found.pass_name == "Pad_Fusion"
    assert found.error_with > 1e-4 > 1e-6 > found.error_without
    assert 'disabled_optimizers=["Pad_Fusion"]' in place_words.remedy(found.remedy) and found.remedy.reproduces


class _Scripted:
    """A measure whose symptom is scripted per configuration: the stage logic on its own."""

    def __init__(self, present_in_reference: bool | None):
        self.trials, self.reference = [], present_in_reference

    def __call__(self, config):
        if config.runtime == REFERENCE:
            if self.reference is None:
                raise NotImplementedError("no kernel for op Foo")
            present = self.reference
        else:
            present = True  # every optimizer off and it still shows
        symptom = Symptom(1.0 if present else 1e-9, 10.0 if present else 0.01, 0, "y")
        self.trials.append(Trial(config, symptom))
        return symptom


def test_with_no_optimizer_to_blame_the_reference_evaluator_tells_the_graph_from_ort_kernels():
    translation = stages.locate(_Scripted(present_in_reference=True))
    assert translation.stage is stages.Stage.TRANSLATION and translation.reference.present
    assert "shows it too" in place_words.proof(translation)
    kernels = stages.locate(_Scripted(present_in_reference=False))
    assert kernels.stage is stages.Stage.ORT_KERNELS and not kernels.reference.present
    assert "does not" in place_words.proof(kernels)
    assert kernels.remedy == Remedy(Stage.ORT_KERNELS, provider=onnx_graph.PROVIDER)
    assert "report it to ONNX Runtime" in place_words.remedy(kernels.remedy)
    unseparated = stages.locate(_Scripted(present_in_reference=None))
    assert unseparated.stage is stages.Stage.UNSEPARATED and unseparated.reference is None
    assert unseparated.reference_error == "NotImplementedError: no kernel for op Foo"
    assert "no kernel for op Foo" in place_words.proof(unseparated)
    # optimize=False with ORT's optimizations off was measured before the evaluator was asked
    assert [t.config.export.optimize for t in kernels.trials][:3] == [True, True, False]


class _OrtOnly(_Scripted):
    """ORT's 'extended' level makes it, and no single pass disabled removes it."""

    def __call__(self, config):
        present = config.level in ("extended", "all")
        symptom = Symptom(1.0 if present else 1e-9, 10.0 if present else 0.01, 0, "y")
        self.trials.append(Trial(config, symptom))
        return symptom

    def graph(self, options):
        return None


def test_an_ort_level_no_single_pass_explains_is_named_with_the_level_below_it(monkeypatch):
    monkeypatch.setattr(onnx_graph, "ort_passes", lambda model, level: ["A", "B", "C"])
    proof = stages.locate(_OrtOnly(None))
    assert proof.stage is stages.Stage.ORT_OPTIMIZER and proof.pass_name == "" and proof.level == "extended"
    assert proof.without.level == "basic" and not proof.without_pass.present
    assert proof.remedy == Remedy(Stage.ORT_OPTIMIZER, level="extended", below="basic",
                                provider=onnx_graph.PROVIDER)
    assert "graph optimization level 'basic', below the 'extended' level" in place_words.remedy(proof.remedy)


def test_a_moved_rule_set_is_named_by_package_and_version(monkeypatch):
    from onnxscript import rewriter

    from exactness import compat

    monkeypatch.delattr(rewriter, "_DEFAULT_REWRITE_RULES")
    with pytest.raises(compat.CompatError, match="onnxscript .* has no onnxscript.rewriter._DEFAULT_REWRITE_RULES"):
        onnx_graph.optimizer_rules()
