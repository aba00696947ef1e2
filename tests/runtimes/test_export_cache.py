"""Exports are cached by everything that decides the graph; a damaged entry is exported again, never used."""

import json

import numpy as np
import pytest
import torch

from exactness.runtimes import export_cache, onnx_graph
from exactness.runtimes.export_cache import ExportCache


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(3, 2)

    def forward(self, x):
        return {"y": self.proj(x)}


def _model(seed):
    torch.manual_seed(seed)
    return Small().eval(), {"x": torch.randn(4, 3)}


@pytest.mark.slow
def test_a_second_export_is_read_from_the_cache_and_runs_the_same(tmp_path, monkeypatch):
    cache = ExportCache(tmp_path)
    model, inputs = _model(0)
    first = cache.export(model, inputs, dynamic=False)
    exported = []
    monkeypatch.setattr(onnx_graph, "export", lambda *a, **k: exported.append(1))
    again = ExportCache(tmp_path).export(model, inputs, dynamic=False)
    assert not first.cached and again.cached and not exported
    assert again.graph.outputs == first.graph.outputs and again.graph.intermediates == first.graph.intermediates
    a, b = (onnx_graph.OrtRunner(g.graph).run(inputs) for g in (first, again))
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_anything_that_decides_the_graph_is_in_the_key():
    model, inputs = _model(0)
    other, other_inputs = _model(1)
    key = export_cache.export_key(model, inputs, dynamic=False)
    assert key == export_cache.export_key(model, inputs, dynamic=False)
    assert key != export_cache.export_key(model, inputs, dynamic=True)
    assert key != export_cache.export_key(other, inputs, dynamic=False)  # weights
    assert key != export_cache.export_key(model, other_inputs, dynamic=False)  # inputs
    assert key != export_cache.export_key(model, {"x": torch.zeros(())}, dynamic=False)  # a 0-d input hashes too


def test_an_edited_forward_in_your_own_file_is_another_key_and_a_packages_class_keys_on_its_version(tmp_path):
    import importlib.util

    path = tmp_path / "mine.py"

    def load(body: str):
        path.write_text("import torch\n\n\nclass Mine(torch.nn.Module):\n    def __init__(self):\n        super()"
                        ".__init__()\n        self.proj = torch.nn.Linear(3, 2)\n\n    def forward(self, x):\n"
                        f"        return {body}\n")
        spec = importlib.util.spec_from_file_location("exactness_test_mine", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        torch.manual_seed(0)
        return module.Mine().eval()

    inputs = {"x": torch.randn(4, 3)}
    before = export_cache.export_key(load("self.proj(x)"), inputs, dynamic=False)
    assert before == export_cache.export_key(load("self.proj(x)"), inputs, dynamic=False)
    assert before != export_cache.export_key(load("self.proj(x) * 2"), inputs, dynamic=False)  # same weights
    assert export_cache._model_code(torch.nn.Sequential(torch.nn.Linear(3, 2))) == {}  # torch's: its version


@pytest.mark.slow
def test_a_damaged_entry_is_exported_again_never_used(tmp_path, capsys):
    cache = ExportCache(tmp_path)
    model, inputs = _model(0)
    cache.export(model, inputs, dynamic=False)
    (graph_file,) = tmp_path.glob("*.onnx")
    graph_file.write_bytes(graph_file.read_bytes()[:-10] + b"0123456789")
    found = cache.export(model, inputs, dynamic=False)
    assert not found.cached and "damaged" in found.rebuilt
    assert capsys.readouterr().err == f"export cache: {found.rebuilt}\n"  # said once, where the run's log shows it
    assert cache.export(model, inputs, dynamic=False).cached  # and the rebuilt entry is whole again
    assert capsys.readouterr().err == ""
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind


def test_nested_inputs_the_attention_code_and_training_mode_are_in_the_key():
    model, inputs = _model(0)
    a = export_cache.export_key(model, {"x": [torch.tensor([1.00001])]}, dynamic=False)
    assert a != export_cache.export_key(model, {"x": [torch.tensor([1.00002])]}, dynamic=False)
    key = export_cache.export_key(model, inputs, dynamic=False)
    model.train()
    assert export_cache.export_key(model, inputs, dynamic=False) != key


class TwoOutputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(3, 2)

    def forward(self, x):
        y = self.proj(x)
        return {"first": y, "second": y * 2}


def _runs_as(lookup, model, inputs) -> bool:
    """The looked-up graph computes this model: each named output equals eager's within float rounding."""
    eager = model(**inputs)
    ran = onnx_graph.OrtRunner(lookup.graph).run(inputs)
    named = dict(zip(lookup.graph.outputs, (ran[name] for name in lookup.graph.outputs), strict=True))
    expected = eager if isinstance(eager, dict) else {"y": eager}
    return all(np.allclose(named[g], expected[e].detach().numpy(), atol=1e-6)
               for g, e in zip(lookup.graph.outputs, expected, strict=True))


@pytest.mark.slow
def test_an_entry_copied_over_another_keys_entry_is_exported_again_never_used(tmp_path):
    cache = ExportCache(tmp_path / "exports")
    (a, a_inputs), (b, b_inputs) = _model(0), _model(1)
    key_a, key_b = (export_cache.export_key(m, i, dynamic=False) for m, i in ((a, a_inputs), (b, b_inputs)))
    cache.export(a, a_inputs, dynamic=False)
    cache.export(b, b_inputs, dynamic=False)
    for suffix in (".onnx", ".json"):  # a's entry under b's key, as a copy by hand would leave it
        entries = tmp_path / "exports"
        (entries / f"{key_b}{suffix}").write_bytes((entries / f"{key_a}{suffix}").read_bytes())
    found = cache.export(b, b_inputs, dynamic=False)
    assert not found.cached and "damaged" in found.rebuilt and key_b[:12] in found.rebuilt
    assert _runs_as(found, b, b_inputs)


def test_an_entry_written_by_another_cache_is_exported_again_never_used(tmp_path):
    model, inputs = _model(0)
    ExportCache(tmp_path / "exports", secret=b"s" * 32).export(model, inputs, dynamic=False)
    found = ExportCache(tmp_path / "exports", secret=b"t" * 32).export(model, inputs, dynamic=False)
    assert not found.cached and "not authenticated" in found.rebuilt


def test_a_record_whose_outputs_were_reordered_is_exported_again_never_used(tmp_path):
    torch.manual_seed(0)
    model, inputs = TwoOutputs().eval(), {"x": torch.randn(4, 3)}
    cache = ExportCache(tmp_path / "exports")
    cache.export(model, inputs, dynamic=False)
    (record_file,) = (tmp_path / "exports").glob("*.json")
    record = json.loads(record_file.read_text())
    record["outputs"] = record["outputs"][::-1]
    record_file.write_text(json.dumps(record))
    found = cache.export(model, inputs, dynamic=False)
    assert not found.cached and "not authenticated" in found.rebuilt
    assert _runs_as(found, model, inputs)


def test_a_signed_record_whose_outputs_are_not_the_graphs_is_refused(tmp_path):
    """Even a record carrying a valid HMAC (a bug of ours writing it) is checked against its graph."""
    torch.manual_seed(0)
    model, inputs = TwoOutputs().eval(), {"x": torch.randn(4, 3)}
    cache = ExportCache(tmp_path / "exports", secret=b"k" * 32)
    key = export_cache.export_key(model, inputs, dynamic=False)
    cache.export(model, inputs, dynamic=False)
    record_file = tmp_path / "exports" / f"{key}.json"
    record = json.loads(record_file.read_text())
    record["outputs"] = record["outputs"][::-1]
    record["hmac"] = export_cache._signature(b"k" * 32, record)
    record_file.write_text(json.dumps(record))
    graph, why = cache.read(key, {"x"})
    assert graph is None and "are not the record's" in why
    cache.export(model, inputs, dynamic=False)
    graph, why = cache.read(key, {"input_ids"})
    assert graph is None and "do not have" in why


def test_a_cache_folder_that_cannot_be_made_leaves_no_key_and_still_exports(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    cache = ExportCache(tmp_path / "file" / "exports")
    model, inputs = _model(0)
    found = cache.export(model, inputs, dynamic=False)
    assert not found.cached and found.graph.outputs == ["y"]
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["file"]
