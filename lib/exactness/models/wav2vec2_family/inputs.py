"""The tester's inputs for a seed: `floats_tensor` then `random_attention_mask` from one `random.Random(seed)`,
drawn either by the tester's own loops (`tester_inputs_plain`) or, bit for bit the same, by numpy's Mersenne
Twister put in the same state (`tester_inputs`, the fast one every study uses)."""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass

import numpy as np
import torch

from exactness.models.wav2vec2_family.specs import TesterSpec, build_model, spec


def tester_inputs_plain(model: str, seed: int) -> dict[str, torch.Tensor]:
    """`floats_tensor([batch, seq], scale)` then `random_attention_mask([batch, seq])`, from one
    `random.Random(seed)`, in the tester's order: the tester's own loops."""
    s = spec(model)
    rng = random.Random(seed)
    n = s.batch_size * s.seq_length
    values = [rng.random() * s.input_scale for _ in range(n)]
    mask = [rng.randint(0, 1) for _ in range(n)]
    return _as_inputs(s, torch.tensor(values, dtype=torch.float), torch.tensor(mask, dtype=torch.long))


def tester_inputs(model: str, seed: int) -> dict[str, torch.Tensor]:
    """The same tensors as `tester_inputs_plain`, drawn with numpy from a copy of the generator's state.

    CPython's `random()` takes two 32-bit Mersenne Twister words (a >> 5, b >> 6) and returns
    (a * 2**26 + b) / 2**53, which is how numpy's legacy `random_sample` makes its doubles; `randint(0, 1)`
    takes one word per try, keeps its top two bits and retries when they are 2 or 3. numpy's MT19937
    produces the same words from the same state.
    """
    s = spec(model)
    n = s.batch_size * s.seq_length
    twister = _numpy_twister(random.Random(seed))
    values = _input_values(s, twister)
    # Rejection sampling keeps about half the words. Nothing is drawn after the mask, so words drawn past
    # the n-th kept one need not be given back.
    mask = np.empty(0, dtype=np.int64)
    while mask.size < n:
        tries = twister.bit_generator.random_raw(2 * (n - mask.size) + 64) >> np.uint64(30)
        mask = np.concatenate([mask, tries[tries < 2].astype(np.int64)[: n - mask.size]])
    return _as_inputs(s, values, torch.from_numpy(mask))


def tester_input_values(model: str, seed: int) -> torch.Tensor:
    """`tester_inputs(model, seed)["input_values"]` without drawing the attention mask (drawn after it)."""
    s = spec(model)
    return _input_values(s, _numpy_twister(random.Random(seed))).view(s.batch_size, s.seq_length)


def _input_values(s: TesterSpec, twister: _Twister) -> torch.Tensor:
    values = twister.doubles.random_sample(s.batch_size * s.seq_length)
    return torch.from_numpy((values * s.input_scale).astype(np.float32))


@dataclass(frozen=True)
class _Twister:
    bit_generator: np.random.MT19937
    doubles: np.random.RandomState  # legacy doubles from `bit_generator`: CPython's `random()` formula


@functools.cache
def _reusable_twister() -> _Twister:
    """One per process: building one (seeding) costs more than the draws it serves."""
    bit_generator = np.random.MT19937(0)
    return _Twister(bit_generator, np.random.RandomState(bit_generator))


def _numpy_twister(rng: random.Random) -> _Twister:
    """numpy's Mersenne Twister put in `rng`'s exact state (used at once: the instance is reused). Through
    numpy's public `state` setter: writing the C struct directly saved 2.6% of a screened seed, too little
    for a trick that depends on numpy's memory layout."""
    internal = rng.getstate()[1]
    twister = _reusable_twister()
    twister.bit_generator.state = {"bit_generator": "MT19937", "state": {
        "key": np.array(internal[:-1], dtype=np.uint32), "pos": internal[-1]}}
    return twister


def _as_inputs(s: TesterSpec, values: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    attention_mask = mask.view(s.batch_size, s.seq_length).clone()
    # random_attention_mask makes sure one position per row is attended: the first, in transformers 5.23.0's
    # tests/test_modeling_common.py (so that it stays attended under a causal mask)
    attention_mask[:, 0] = 1
    return {"input_values": values.view(s.batch_size, s.seq_length), "attention_mask": attention_mask}


def quantizer_is_called(model: str) -> bool:
    """Whether the class's forward runs its quantizer at all (UniSpeechSat's, in transformers 5.23.0, does
    not: it returns no quantized states and no perplexity, so it has no argmax to flip)."""
    built = build_model(model, 0)
    calls = []
    handle = built.quantizer.weight_proj.register_forward_hook(lambda *a: calls.append(1))
    with torch.no_grad():
        built(**tester_inputs(model, 0))
    handle.remove()
    return bool(calls)
