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


class _Wide(torch.nn.Module):
    """Draws nobody needs (normals of 1,000 and 17 elements: sizes not multiples of 16 take 16 more words;
    a uniform of 5), then the one that is needed."""

    def __init__(self):
        super().__init__()
        self.skipped = torch.nn.Parameter(torch.empty(1000).normal_())
        self.odd = torch.nn.Parameter(torch.empty(17).normal_())
        self.small = torch.nn.Parameter(torch.empty(5).uniform_())
        self.tiny_normal = torch.nn.Parameter(torch.empty(3).normal_())  # under 16: no fixed consumption
        self.kept = torch.nn.Linear(4, 4)


def test_unneeded_draws_are_skipped_in_bulk_and_give_the_same_tensors_and_generator_state():
    plan = make_plan(_Wide, ["kept.weight", "kept.bias"])
    assert plan.steps[0] == ("skip", (1000 + 16) + (17 + 16) + 5) and plan.steps[1] == 3  # the small normal is drawn
    for seed in range(10):
        torch.manual_seed(seed)
        full = _Wide()
        after_build = torch.default_generator.get_state()
        replayed = plan.tensors(seed)
        assert torch.equal(torch.default_generator.get_state(), after_build)
        assert torch.equal(replayed["kept.weight"], full.kept.weight) and torch.equal(replayed["kept.bias"],
                                                                                     full.kept.bias)


def test_a_shortcut_that_would_change_the_generator_state_is_not_taken(monkeypatch):
    from exactness.models import rng_replay

    monkeypatch.setattr(rng_replay, "_words_consumed", lambda draw: 7)  # a wrong count
    plan = make_plan(_Wide, ["kept.weight"])
    assert plan.steps is None  # the full replay, which is always exact
    torch.manual_seed(4)
    full = _Wide()
    assert torch.equal(plan.tensors(4)["kept.weight"], full.kept.weight)


def test_the_quantizer_logits_plan_skips_the_encoder():
    from exactness.models.quantizer_logits import FastLogits

    plan = FastLogits("Wav2Vec2ForPreTraining").plan
    assert any(isinstance(step, tuple) and step[1] > 100_000 for step in plan.steps)
