import pytest
import torch

from exactness.models.rng_replay import ReplayError, make_plan


class _Toy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 3)
        self.norm = torch.nn.LayerNorm(3)
        self.b = torch.nn.Linear(3, 5)
        with torch.no_grad():
            self.b.weight.normal_()  # re-initialised: only the last draw counts
        self.c = torch.nn.Linear(5, 2)
        with torch.no_grad():
            self.c.weight.mul_(2.0)  # changed after its draw: cannot be replayed


def test_replayed_tensors_equal_a_full_build_for_many_seeds():
    plan = make_plan(_Toy, ["a.weight", "a.bias", "norm.weight", "b.weight"])
    for seed in range(30):
        torch.manual_seed(seed)
        full = _Toy()
        replayed = plan.tensors(seed)
        for name in ("a.weight", "a.bias", "norm.weight", "b.weight"):
            assert torch.equal(replayed[name], dict(full.named_parameters())[name]), (seed, name)


def test_replay_stops_after_the_last_needed_draw():
    assert len(make_plan(_Toy, ["a.weight"]).draws) == 1


def test_a_tensor_changed_after_its_draw_is_refused():
    with pytest.raises(ReplayError, match="c.weight"):
        make_plan(_Toy, ["c.weight"])
