"""Exports are cached by everything that decides the graph; a damaged entry is exported again, never used."""

import numpy as np
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


def test_a_damaged_entry_is_exported_again_never_used(tmp_path):
    cache = ExportCache(tmp_path)
    model, inputs = _model(0)
    cache.export(model, inputs, dynamic=False)
    (graph_file,) = tmp_path.glob("*.onnx")
    graph_file.write_bytes(graph_file.read_bytes()[:-10] + b"0123456789")
    found = cache.export(model, inputs, dynamic=False)
    assert not found.cached and "damaged" in found.rebuilt
    assert cache.export(model, inputs, dynamic=False).cached  # and the rebuilt entry is whole again
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind


def test_nested_inputs_the_attention_code_and_training_mode_are_in_the_key():
    model, inputs = _model(0)
    a = export_cache.export_key(model, {"x": [torch.tensor([1.00001])]}, dynamic=False)
    assert a != export_cache.export_key(model, {"x": [torch.tensor([1.00002])]}, dynamic=False)
    key = export_cache.export_key(model, inputs, dynamic=False)
    model.train()
    assert export_cache.export_key(model, inputs, dynamic=False) != key
