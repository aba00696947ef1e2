"""A registry class rebuilt in place per seed holds exactly what a plain build of that seed holds."""

import torch

from exactness.models import class_registry, rng_replay, seed_rebuild


def test_a_rebuilt_class_equals_its_plain_build_including_an_embeddings_padding_row():
    rebuilt, why = seed_rebuild.rebuilder("BertModel")  # word embeddings: drawn, then the padding row zeroed
    assert rebuilt is not None, why
    for seed in (3, 11):
        plain = class_registry.build("BertModel", seed)
        mine = rebuilt(seed)
        state, expected = mine.state_dict(), plain.state_dict()
        assert all(torch.equal(state[k], expected[k]) for k in expected)
        inputs = class_registry.inputs("BertModel", seed)
        with torch.no_grad():
            assert torch.equal(mine(**inputs).last_hidden_state, plain(**inputs).last_hidden_state)


def test_a_draw_overwritten_by_seed_independent_values_is_replayed_with_them():
    class Padded(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.table = torch.nn.Embedding(5, 3, padding_idx=1)

    plan = rng_replay.make_plan(Padded, ["table.weight"])
    torch.manual_seed(7)
    expected = Padded().table.weight.detach()
    assert torch.equal(plan.tensors(7)["table.weight"], expected)
    assert plan.tensors(7)["table.weight"][1].abs().sum() == 0
