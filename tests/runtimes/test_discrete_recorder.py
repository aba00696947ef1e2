import torch

from exactness.runtimes import discrete_recorder

ops = torch.ops.aten


def test_each_overload_of_one_packet_keeps_its_own_key():
    # aten.max.dim chooses an index, aten.max.default (over the whole tensor) chooses nothing: one packet, two keys
    wanted = {ops.max.dim: "aten.max.dim", ops.max.default: None, ops.argmax.default: "aten.argmax",
              ops.topk.default: "aten.topk", ops.add.Tensor: None, ops.gt.Scalar: "aten.gt"}
    assert {op: discrete_recorder.aten_key(op) for op in wanted} == wanted


def test_a_forward_records_its_discrete_calls_alone_and_the_same_each_time():
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU())
    inputs = {"input": torch.randn(3, 6, generator=torch.Generator().manual_seed(0))}

    class Choosing(torch.nn.Module):
        def forward(self, input):
            x = model(input)
            return x.argmax(-1), x.max(-1), x.max(), (x > 0.1).sum()

    first = discrete_recorder.record(Choosing(), inputs)[1]
    again = discrete_recorder.record(Choosing(), inputs)[1]
    assert [(r.op, r.call) for r in first] == [(r.op, r.call) for r in again] == [
        ("aten.argmax", 0), ("aten.max.dim", 0), ("aten.gt", 0)]
