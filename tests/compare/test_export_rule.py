import torch

from exactness.compare.export_rule import export_test_rule, names_match


def _outputs(perplexity=92.1406, states_changed=0, total=1000):
    states = torch.zeros(total)
    states[:states_changed] = 0.5
    return {"codevector_perplexity": torch.tensor(perplexity), "projected_quantized_states": states,
            "projected_states": torch.ones(10)}


def test_identical_outputs_pass():
    assert export_test_rule(_outputs(), _outputs())


def test_a_scalar_gets_no_allowance():
    result = export_test_rule(_outputs(perplexity=91.2174), _outputs())
    assert not result and result.first_mismatch == "codevector_perplexity"
    assert result.never_compared == ["projected_quantized_states", "projected_states"]


def test_the_first_mismatch_under_five_percent_is_forgiven_and_hides_the_rest():
    actual = _outputs(states_changed=40)  # 4% of elements
    actual["projected_states"] = torch.full((10,), 100.0)  # a real defect after it in sorted order
    result = export_test_rule(actual, _outputs())
    assert result.passed and result.forgiven
    assert result.first_mismatch == "projected_quantized_states"
    assert result.never_compared == ["projected_states"]


def test_five_percent_or_more_fails():
    assert not export_test_rule(_outputs(states_changed=50), _outputs())


def test_keys_are_checked_in_sorted_order():
    actual = _outputs(perplexity=1.0, states_changed=500)
    assert export_test_rule(actual, _outputs()).first_mismatch == "codevector_perplexity"


def test_skip_semantics_only_check_names():
    assert names_match(_outputs(perplexity=0.0), _outputs())
    assert not names_match({"a": torch.ones(1)}, _outputs())
