import torch

from exactness.compare.tie_aware import flipped_rows, needed_rtol, tie_aware_compare, top_two, usage_profile


def test_gaps_in_absolute_terms_and_ulps():
    logits = torch.tensor([[10.0, 10.0 - 2 * 9.5367431640625e-07, 0.0], [1.0, 3.0, 2.0]])
    gaps = top_two(logits)
    assert gaps.gap_ulps[0].item() == 2.0 and gaps.min_row == 0
    assert gaps.top1_index.tolist() == [0, 1] and gaps.top2_index.tolist() == [1, 2]


def test_usage_profile_ignores_which_code_only_how_often():
    a = torch.tensor([3, 0, 3, 1, 5, 0])  # two groups: (3, 3, 5) and (0, 1, 0)
    b = torch.tensor([3, 0, 3, 1, 7, 0])  # a code used once moved to an unused code
    assert usage_profile(a, 2) == usage_profile(b, 2)
    assert usage_profile(a, 2) != usage_profile(torch.tensor([3, 0, 3, 1, 3, 0]), 2)


def test_needed_rtol():
    assert abs(needed_rtol(torch.tensor([91.2174]), torch.tensor([92.1406]), 1e-3) - (0.9232 - 1e-3) / 92.1406) < 1e-6


def test_tie_flip_is_excused_and_confident_flip_is_not():
    logits = torch.tensor([[5.0, 5.0 - 1e-6, 0.0], [5.0, 4.0, 0.0]])
    same = {"y": torch.ones(3)}
    tie = tie_aware_compare(logits, torch.tensor([1, 0]), same, same, noise_bound=2e-5)
    assert tie and tie.flip_margins.keys() == {0}
    confident = tie_aware_compare(logits, torch.tensor([0, 1]), same, same, noise_bound=2e-5)
    assert not confident and confident.confident_flips == [1] and "rows [1]" in confident.message


def test_outputs_are_compared_against_eager_with_ort_choices():
    logits = torch.tensor([[5.0, 4.0]])
    result = tie_aware_compare(logits, torch.tensor([0]), {"y": torch.ones(2)}, {"y": torch.ones(2) * 1.01}, 2e-5)
    assert not result and result.failing_outputs == ["y"]


def test_on_an_exact_tie_the_top_code_is_the_one_argmax_picks():
    logits = torch.zeros(2, 320)
    logits[0, [10, 200]] = 1.0  # topk lists 200 first here; the model's argmax takes 10
    logits[1, [3, 7]] = torch.tensor([2.0, 1.0])
    gaps = top_two(logits)
    assert gaps.top1_index.tolist() == logits.argmax(dim=-1).tolist() == [10, 3]
    assert gaps.top2_index.tolist() == [200, 7] and gaps.gap.tolist() == [0.0, 1.0]
    assert flipped_rows(gaps.top1_index, torch.tensor([200, 3])) == [0]  # ORT taking the other tied code flips


def test_top_two_agrees_with_argmax_and_sorting_on_many_ties():
    logits = torch.randint(0, 6, (2000, 40), generator=torch.Generator().manual_seed(0)).float()  # ties, triple ties
    logits[::3] += torch.rand(667, 40, generator=torch.Generator().manual_seed(1))  # and rows without
    gaps = top_two(logits)
    ordered = logits.sort(dim=-1, descending=True).values
    assert torch.equal(gaps.top1_index, logits.argmax(dim=-1))
    assert torch.equal(gaps.gap, ordered[:, 0] - ordered[:, 1]) and bool((gaps.gap == 0).any())
    rows = torch.arange(len(logits))
    assert torch.equal(logits[rows, gaps.top2_index], ordered[:, 1])
    assert bool((gaps.top2_index != gaps.top1_index).all())
