"""The learnt weight swap on a conv followed by an eval BatchNorm, as a detector's conv+norm layers are:
the exporter folds the norm into the conv's weight, and the swap must reproduce that fold bit for bit."""

import numpy as np
import pytest
import torch

from exactness.runtimes import onnx_graph, weight_swap


class ConvNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, bias=False), torch.nn.BatchNorm2d(4))
        self.head = torch.nn.Linear(4, 2)

    def forward(self, pixel_values):
        return {"out": self.head(self.layer(pixel_values).mean(dim=(2, 3)))}


def _built(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = ConvNorm().eval()
    norm = model.layer[1]
    with torch.no_grad():  # statistics and scale that differ per seed, so the fold cannot pass as a constant
        norm.running_var.uniform_(0.5, 2.0)
        norm.running_mean.uniform_(-1.0, 1.0)
        norm.weight.uniform_(0.5, 1.5)
    return model


def _export(seed: int):
    model, inputs = _built(seed), {"pixel_values": torch.rand(2, 3, 8, 8)}
    return model, onnx_graph.export(model, inputs, dynamic=False)


def test_a_conv_and_batchnorm_fold_swaps_bit_identically_to_a_fresh_export():
    (a_model, a_graph), (b_model, b_graph), (c_model, c_graph) = _export(0), _export(1), _export(2)
    plan = weight_swap.learn(a_graph, a_model, b_graph, b_model, 1)
    assert "batchnorm_fold" in {rule.kind for rule in plan.rules.values()}
    swapped = plan.initializers(c_model)
    fresh = c_graph.initializer_arrays()
    assert all(np.array_equal(swapped[name], fresh[name]) for name in swapped)


def test_without_the_fold_the_swap_is_refused():
    (a_model, a_graph), (b_model, b_graph) = _export(0), _export(1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(weight_swap, "_batchnorm_folds", lambda model: {})
        with pytest.raises(weight_swap.SwapError, match="matches no model tensor"):
            weight_swap.learn(a_graph, a_model, b_graph, b_model, 1)
