"""The kept float64 twin gives what a deep copy gives, bit for bit, and a twin that would not is refused."""

import copy

import torch

from exactness.runtimes import float64_twin


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 3)
        self.norm = torch.nn.BatchNorm1d(3).eval()
        self.register_buffer("offset", torch.randn(3), persistent=False)

    def forward(self, x):
        return {"out": self.norm(self.proj(x)) + self.offset}


def _run(x):
    return lambda model: model(x.double())


def test_the_twin_path_equals_a_deep_copy_on_every_seed_and_is_verified_once():
    twins, x = float64_twin.Float64Twins(), torch.randn(5, 4)
    for seed in range(4):
        torch.manual_seed(seed)
        model = Small()
        got = twins.wide(model, _run(x))
        expected = _run(x)(copy.deepcopy(model).double())
        assert torch.equal(got["out"], expected["out"])
    assert len(twins.verified) == 1 and not twins.refused


def test_a_twin_that_differs_from_a_deep_copy_is_refused_and_the_deep_copy_used():
    twins, x = float64_twin.Float64Twins(), torch.randn(5, 4)
    torch.manual_seed(0)
    twins.wide(Small(), _run(x))
    twins._twin[1].register_forward_hook(lambda module, args, out: {"out": out["out"] + 1})  # a state no copy carries
    torch.manual_seed(1)
    model = Small()
    got = twins.wide(model, _run(x))
    assert torch.equal(got["out"], _run(x)(copy.deepcopy(model).double())["out"])
    assert twins.refused and not twins.verified


def test_off_it_deep_copies():
    twins = float64_twin.Float64Twins(enabled=False)
    twins.wide(Small(), _run(torch.randn(2, 4)))
    assert twins._twin is None
