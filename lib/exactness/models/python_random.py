"""Many draws of a `random.Random` at once, value for value what the tester's loop draws, and its state after.

A tester draws its inputs one Python call at a time (`rng.random()` per pixel, `rng.randint` per token): 12,288
calls for a 64x64 image, a few milliseconds a seed, more than a tiny detector's screen forward. Python's
generator is the Mersenne Twister numpy's `MT19937` also runs, so its state is handed to numpy, the 32-bit
words drawn there in one call and turned into values as CPython does, and the state handed back.

- replaces: `[rng.random() for _ in range(n)]` and `[rng.randint(0, bound - 1) for _ in range(n)]`;
- exact because: the same words, combined as CPython's `random_random` (53 bits from two words) and
  `_randbelow_with_getrandbits` (the top bits of one word, drawn again while too large) combine them;
- verified by: a comparison with the loops on first use in each process (else the loops run),
  tests/models/test_python_random.py.
"""

from __future__ import annotations

import functools
import operator
import random
import threading

import numpy as np

_LOCK = threading.Lock()  # one generator per process serves every caller: one caller at a time
_TWO_26 = 67108864.0
_TWO_53 = 9007199254740992.0


@functools.cache
def _generator() -> np.random.MT19937:
    """One per process, put in each caller's state: seeding a new one costs more than a small draw."""
    return np.random.MT19937(0)


def _words(rng: random.Random) -> tuple[np.random.MT19937, object]:
    version, state, gauss = rng.getstate()
    generator = _generator()
    generator.state = {"bit_generator": "MT19937",
                       "state": {"key": np.array(state[:624], dtype=np.uint32), "pos": int(state[624])}}
    return generator, (version, gauss)


def _hand_back(rng: random.Random, generator: np.random.MT19937, kept) -> None:
    version, gauss = kept
    state = generator.state["state"]
    rng.setstate((version, tuple(int(w) for w in state["key"]) + (int(state["pos"]),), gauss))


def _fast_randoms(rng: random.Random, n: int) -> np.ndarray:
    generator, kept = _words(rng)
    words = generator.random_raw(2 * n)
    values = ((words[0::2] >> 5).astype(np.float64) * _TWO_26 + (words[1::2] >> 6).astype(np.float64)) / _TWO_53
    _hand_back(rng, generator, kept)
    return values


def _fast_below(rng: random.Random, n: int, bound: int) -> np.ndarray:
    shift = np.uint64(32 - bound.bit_length())
    generator, kept = _words(rng)
    start = generator.state
    values, positions, used, got = [], [], 0, 0
    while got < n:  # a word too large is drawn again: draw more than n, keep the first n accepted
        words = generator.random_raw(n - got + (n - got) // 2 + 64) >> shift
        accepted = np.flatnonzero(words < bound)
        values.append(words[accepted])
        positions.append(accepted + used)
        used, got = used + len(words), got + len(accepted)
    last = int(np.concatenate(positions)[n - 1])
    generator.state = start
    generator.random_raw(last + 1)  # exactly the words the loop consumes
    _hand_back(rng, generator, kept)
    return np.concatenate(values)[:n].astype(np.int64)


def _loop_randoms(rng: random.Random, n: int) -> np.ndarray:
    return np.array([rng.random() for _ in range(n)], dtype=np.float64)


def _loop_below(rng: random.Random, n: int, bound: int) -> np.ndarray:
    return np.array([rng.randint(0, bound - 1) for _ in range(n)], dtype=np.int64)


@functools.cache
def _fast_agrees() -> bool:
    """Whether the fast draws equal this interpreter's loops (values and the state after), on a few draws."""
    a, b = random.Random(20261202), random.Random(20261202)
    for bound in (1, 2, 5, 99, 1000, 2**31 + 7):
        if not (np.array_equal(_fast_randoms(a, 33), _loop_randoms(b, 33))
                and np.array_equal(_fast_below(a, 257, bound), _loop_below(b, 257, bound))):
            return False
    return a.getstate() == b.getstate()


def randoms(rng: random.Random, n: int) -> np.ndarray:
    """`[rng.random() for _ in range(n)]` as float64, `rng` left where the loop leaves it."""
    if n and _fast_agrees():
        with _LOCK:
            return _fast_randoms(rng, n)
    return _loop_randoms(rng, n)


def randints_below(rng: random.Random, n: int, bound: int) -> np.ndarray:
    """`[rng.randint(0, bound - 1) for _ in range(n)]` as int64, `rng` left where the loop leaves it."""
    bound = operator.index(bound)  # a numpy integer as the loop takes it
    if n and 0 < bound and bound.bit_length() <= 32 and _fast_agrees():
        with _LOCK:
            return _fast_below(rng, n, bound)
    return _loop_below(rng, n, bound)
