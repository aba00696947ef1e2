"""Candidates on the comparable axis, and the computed explanation of why classes differ in candidates."""

import numpy as np
import pandas as pd
import pytest

from exactness.studies.near_tie import scale as near_tie_scale
from exactness.studies.near_tie import sentences as near_tie_sentences

A, B = "Wav2Vec2ForPreTraining", "UniSpeechForPreTraining"


def _screen(model, n, below, top, gap_below=1e-6):
    """`below` seeds with a smallest gap under 1.5e-5, the rest far above; every top logit `top`."""
    gaps = [gap_below] * below + [1e-2] * (n - below)
    ulps = [g / float(np.spacing(np.float32(top))) for g in gaps]
    return pd.DataFrame({"model": model, "seed": range(n), "min_gap": gaps, "top_logit": top,
                         "smallest_gap_ulps": ulps})


def test_candidates_follow_the_ulp_threshold_when_it_is_set():
    screen = pd.DataFrame({"min_gap": [1e-6, 1e-6, 1e-3], "smallest_gap_ulps": [4.0, 40.0, 2.0]})
    assert near_tie_scale.is_candidate(screen, 1.5e-5).tolist() == [True, True, False]
    assert near_tie_scale.is_candidate(screen, 1.5e-5, threshold_ulps=10).tolist() == [True, False, True]
    with pytest.raises(ValueError, match="smallest_gap_ulps"):
        near_tie_scale.is_candidate(screen.drop(columns="smallest_gap_ulps"), 1.5e-5, threshold_ulps=10)
    assert "ulps of its row's top logit" in near_tie_sentences.candidate_rule(1.5e-5, 10)


def test_per_row_rate_inverts_the_chance_of_any_row():
    p = 1e-4
    seed_rate = 1 - (1 - p) ** 364
    assert near_tie_scale.per_row_rate(seed_rate, 364) == pytest.approx(p, rel=1e-9)


def test_rows_and_scale_explain_the_difference_when_the_per_ulp_density_is_the_same():
    # B: 2.5x the rows and logits 4x larger (a 1.5e-5 gap is 4x fewer ulps): fewer candidates per seed, same
    # density per row and per ulp
    a = _screen(A, 4000, 160, 1.5)
    rate_b = 1 - (1 - near_tie_scale.per_row_rate(160 / 4000, 364) / 4) ** 910
    b = _screen(B, 4000, round(rate_b * 4000), 6.0)
    table = near_tie_scale.explanation(pd.concat([a, b]), 1.5e-5, {A: 364, B: 910})
    assert table.set_index("model").rows_per_seed.to_dict() == {A: 364, B: 910}
    in_ulps = table.set_index("model").threshold_ulps
    assert in_ulps[B] / in_ulps[A] == pytest.approx(0.25)
    sentence = near_tie_sentences.explanation_sentence(table, 1.5e-5)
    assert "rows per seed and logit scale explain the difference" in sentence and "910" in sentence


def test_a_class_whose_gaps_are_denser_is_not_explained_by_rows_and_scale():
    a = _screen(A, 4000, 40, 1.5)
    b = _screen(B, 4000, 800, 1.5)  # same rows and scale as A would need, 20x the candidates
    table = near_tie_scale.explanation(pd.concat([a, b]), 1.5e-5, {A: 364, B: 364})
    agree, ratio = near_tie_scale.densities_agree(table)
    assert not agree and ratio > 10
    assert "explain only part" in near_tie_sentences.explanation_sentence(table, 1.5e-5)
