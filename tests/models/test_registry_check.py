"""The registry against the real testers: equal where they agree, every difference named where they do not.

CI has no transformers checkout: the mechanism runs on this project's own small checkout in transformers' layout
(tests/fixtures/transformers_checkout). Given a real one in EXACTNESS_TRANSFORMERS_TESTS, every registry entry
whose tester it has is built both ways for seeds 0-2 and must be equal.
"""

import dataclasses
import os
from pathlib import Path

import pytest
import registry_check

from exactness.models import checkout_index, class_registry

FIXTURE = str(Path(__file__).resolve().parents[1] / "fixtures" / "transformers_checkout")
REAL = os.environ.get("EXACTNESS_TRANSFORMERS_TESTS", "")


def test_the_registrys_bert_equals_a_tester_that_draws_as_transformers_does():
    assert registry_check.compare("BertModel", FIXTURE, seeds=(0, 1)) == []


def test_a_registry_entry_that_departs_from_its_tester_is_named_part_by_part(monkeypatch):
    entry = class_registry.SUBJECTS["BertModel"]
    departed = dataclasses.replace(entry, config={**entry.config, "initializer_range": 0.01},
                                   draws=entry.draws[:1] + (class_registry.Draw("ids", "attention_mask", (13, 7)),)
                                   + entry.draws[2:])
    monkeypatch.setitem(class_registry.SUBJECTS, "BertModel", departed)
    found = registry_check.compare("BertModel", FIXTURE, seeds=(0,))
    parts = {(d.part, d.key) for d in found}
    assert (registry_check.Part.CONFIG, "initializer_range") in parts
    # ids below 2 without the first column set: the mask differs, and every draw after it is unchanged
    assert (registry_check.Part.INPUTS, "attention_mask") in parts
    assert (registry_check.Part.INPUTS, "token_type_ids") not in parts
    assert any(d.part is registry_check.Part.WEIGHTS for d in found)  # another init range draws other weights


@pytest.mark.skipif(not REAL, reason="EXACTNESS_TRANSFORMERS_TESTS names no transformers checkout")
@pytest.mark.parametrize("name", class_registry.NAMES)
def test_every_registry_entry_equals_its_tester_in_the_given_checkout(name):
    if not checkout_index.has_class(checkout_index.root_of(REAL), name):
        pytest.skip(f"the checkout at {REAL} has no tester listing {name}")
    differences = registry_check.compare(name, REAL)
    assert differences == [], "\n".join(map(str, differences[:20]))


def test_every_registry_entry_cites_the_tester_it_was_checked_against_and_what_that_check_found():
    assert registry_check.citation_problems() == []
    assert {c.model for c in registry_check.CHECKED} == set(class_registry.NAMES)
    corrected = {c.model for c in registry_check.CHECKED if c.corrected}
    assert corrected == {"UniSpeechForPreTraining", "FlavaForPreTraining"}


def test_the_registrys_unispeech_is_the_model_its_tester_builds():
    from exactness.models.wav2vec2_family import specs

    # UniSpeechRobustModelTest passes do_stable_layer_norm=True to its tester, whose get_config() drops it
    assert specs.tester_config("UniSpeechForPreTraining").do_stable_layer_norm is False


def test_an_entry_citing_no_checked_tester_or_no_result_is_named():
    subjects = {**class_registry.SUBJECTS, "MyModel": class_registry.Subject("MyModel", "BertConfig", source="notes")}
    mine = registry_check.Checked("MyModel", class_registry.TESTS.format("mine/test_modeling_mine.py", "a" * 40),
                                  registry_check.EQUAL)

    def problems(entry_source, *checks):
        entry = dataclasses.replace(subjects["MyModel"], source=entry_source)
        return registry_check.citation_problems({**subjects, "MyModel": entry}, registry_check.CHECKED + checks)

    assert problems("notes") == [problems("notes")[0]] and "MyModel: no check recorded" in problems("notes")[0]
    assert "not the tester it was checked against" in " ".join(problems("notes", mine))
    assert problems(mine.tester, mine) == []
    assert "says no result" in " ".join(problems(mine.tester, dataclasses.replace(mine, result="")))
    assert "says no result" in " ".join(problems(mine.tester, dataclasses.replace(mine, result="looked fine")))
    failed = dataclasses.replace(mine, result=registry_check.DOES_NOT_IMPORT.format("5.23.0") + "ImportError: ...")
    assert problems(mine.tester, failed) == []
    uncommitted = dataclasses.replace(mine, tester="huggingface/transformers tests/models/mine/test_modeling_mine.py")
    assert "40-digit commit" in " ".join(problems(uncommitted.tester, uncommitted))
    assert "keep one check" in " ".join(problems(mine.tester, mine, mine))
