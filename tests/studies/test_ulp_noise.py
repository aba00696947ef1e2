import numpy as np
import torch

from exactness.runtimes.eager_capture import EagerRun
from exactness.runtimes.onnx_graph import ExportedGraph
from exactness.studies import ulp_noise


class _Runner:
    def __init__(self, values: dict[str, float]):
        self.graph = ExportedGraph(None, ["y"], {"encoder.conv1": "h"})
        self.values = values

    def run(self, inputs):
        return {name: np.full(4, value, dtype=np.float32) for name, value in self.values.items()}


def test_the_models_outputs_come_from_the_graph_as_exported_and_the_rest_from_the_exposing_run():
    eager = EagerRun({"y": torch.full((4,), 2.0)}, {"encoder.conv1": [torch.full((4,), 1.0)]})
    # exposing every value moved the output "y" (1.0 there, 2.0 in the graph as exported, as in eager)
    draw = ulp_noise._Draw(None, {}, eager, _Runner({"h": 1.5, "y": 1.0}), _Runner({"y": 2.0}))
    table = ulp_noise._table("DacEncoder-tiny", draw).set_index("tensor")
    assert table.loc["y", "max_abs_diff"] == 0.0  # read from the graph as exported
    assert table.loc["encoder.conv1", "max_abs_diff"] == 0.5 and table.loc["encoder.conv1", "label"] == "conv1"
    assert table.loc["y", "depth"] > table.loc["encoder.conv1", "depth"]  # the outputs come last
