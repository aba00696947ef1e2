"""Tapped records are the dispatch recorder's, bit for bit, for every kind of call a screen waits for (functions,
methods, operators), the forward stops after the last, and what cannot be tapped is refused."""

import pytest
import torch

from exactness.runtimes import discrete_recorder, discrete_taps


class Calls(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 8)
        self.after = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.proj(x)
        top = torch.topk(h, 3, dim=-1)  # a torch function
        best = h.argmax(-1)  # a method
        kept = (h > 0.1).float() * h  # an operator
        again = h.gt(0.2)  # the same method by name: counted with the operator
        steps = torch.floor(h * 3)
        more = self.after(kept)
        return top.values.sum() + best.sum() + again.sum() + steps.sum() + more.topk(2).indices.sum()


def _whole(model, x):
    return discrete_recorder.record(model, {"x": x}, seed=0)[1]


def test_tapped_records_equal_the_whole_recordings_for_functions_methods_and_operators():
    torch.manual_seed(0)
    model, x = Calls().eval(), torch.randn(5, 4)
    records = _whole(model, x)
    wanted = frozenset((r.op, r.call) for r in records)
    assert {r.op for r in records} >= {"aten.topk", "aten.argmax", "aten.gt", "aten.floor"}
    plan = discrete_taps.learn(model, {"x": x}, wanted, seed=0)
    assert {t.name for t in plan.taps} >= {"topk", "argmax", "gt", "floor"}
    for seed in range(3):
        torch.manual_seed(seed + 10)
        other, y = Calls().eval(), torch.randn(5, 4)
        tapped, whole = plan.record(other, {"x": y}, seed=0), _whole(other, y)
        assert len(tapped) == len(whole) and all(discrete_taps.same_record(a, b) for a, b in zip(tapped, whole,
                                                                                                 strict=True))
    assert all(getattr(torch.Tensor, name) is getattr(torch._C.TensorBase, name) for name in ("gt", "__gt__", "argmax"))
    assert torch.topk is torch._C._VariableFunctions.topk  # every wrapper taken off after the forward


def test_the_forward_stops_after_the_last_tapped_call():
    torch.manual_seed(0)
    model, x = Calls().eval(), torch.randn(5, 4)
    first = next(r for r in _whole(model, x) if r.op == "aten.topk")
    ran = []
    model.after.register_forward_hook(lambda *a: ran.append(1))
    plan = discrete_taps.learn(model, {"x": x}, frozenset({(first.op, first.call)}), seed=0)
    ran.clear()
    assert len(plan.record(model, {"x": x}, seed=0)) == 1 and not ran


def test_a_record_that_differs_when_tapped_or_a_call_no_function_makes_is_refused(monkeypatch):
    torch.manual_seed(0)
    model, x = Calls().eval(), torch.randn(5, 4)
    with pytest.raises(discrete_taps.TapError):
        discrete_taps.learn(model, {"x": x}, frozenset({("aten.topk", 7)}), seed=0)
    records = _whole(model, x)
    wanted = frozenset((r.op, r.call) for r in records if r.op == "aten.argmax")
    monkeypatch.setattr(discrete_taps, "same_record", lambda a, b: False)
    with pytest.raises(discrete_taps.TapError, match="differs"):
        discrete_taps.learn(model, {"x": x}, wanted, seed=0)


def test_same_record_tells_a_one_bit_difference():
    torch.manual_seed(0)
    model, x = Calls().eval(), torch.randn(5, 4)
    a, b = _whole(model, x)[0], _whole(model, x)[0]
    assert discrete_taps.same_record(a, b)
    b.inputs[0].view(torch.int32).view(-1)[0] ^= 1
    assert not discrete_taps.same_record(a, b)


class DataDependent(torch.nn.Module):
    """How many values the top-k keeps depends on the input: another seed's n-th call is another call."""

    def forward(self, x):
        return torch.topk(x, int(x.abs().sum() > 10) + 1).values


def test_a_call_that_is_not_the_learnt_one_is_refused_not_recorded():
    small, large = torch.full((1, 4), 0.5), torch.full((1, 4), 5.0)
    wanted = frozenset((r.op, r.call) for r in _whole(DataDependent(), small))
    plan = discrete_taps.learn(DataDependent(), {"x": small}, wanted, seed=0)
    assert len(plan.record(DataDependent(), {"x": small}, seed=0)) == len(wanted)  # its comparison too
    with pytest.raises(discrete_taps.TapError, match="when learnt"):
        plan.record(DataDependent(), {"x": large}, seed=0)
    assert torch.topk is torch._C._VariableFunctions.topk
