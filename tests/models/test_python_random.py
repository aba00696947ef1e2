"""The fast draws are the tester's loops, value for value, and leave the generator where the loops leave it."""

import random

import numpy as np
import pytest
import torch

from exactness.models import class_registry, python_random


@pytest.mark.parametrize("bound", [1, 2, 3, 99, 100, 2**20 + 1, 2**32 - 1])
def test_randints_below_are_the_loops_values_and_state(bound):
    for seed in range(20):
        fast, loop = random.Random(seed), random.Random(seed)
        fast.random()  # a state mid-way through the twister's block
        loop.random()
        assert np.array_equal(python_random.randints_below(fast, 1000, bound),
                              [loop.randint(0, bound - 1) for _ in range(1000)])
        assert fast.getstate() == loop.getstate()


def test_randoms_are_the_loops_values_and_state_and_the_next_draw_follows():
    for seed in range(20):
        fast, loop = random.Random(seed), random.Random(seed)
        assert np.array_equal(python_random.randoms(fast, 777), [loop.random() for _ in range(777)])
        assert fast.getstate() == loop.getstate() and fast.randint(0, 9) == loop.randint(0, 9)


def test_a_wrong_fast_path_is_caught_on_first_use_and_the_loops_run(monkeypatch):
    monkeypatch.setattr(python_random, "_fast_randoms", lambda rng, n: np.zeros(n))
    python_random._fast_agrees.cache_clear()
    try:
        assert not python_random._fast_agrees()
        loop = random.Random(3)
        assert python_random.randoms(random.Random(3), 5).tolist() == [loop.random() for _ in range(5)]
    finally:
        python_random._fast_agrees.cache_clear()


def test_every_registered_input_equals_the_testers_loops(monkeypatch):
    names = [n for n in class_registry.NAMES if class_registry.subject(n).family != "wav2vec2"]
    fast = {(n, s): class_registry.inputs(n, s) for n in names for s in (0, 5)}
    monkeypatch.setattr(python_random, "_fast_agrees", lambda: False)
    for key, tensors in fast.items():
        plain = class_registry.inputs(*key)
        assert tensors.keys() == plain.keys()
        assert all(tensors[n].dtype == plain[n].dtype and torch.equal(tensors[n], plain[n]) for n in tensors), key
