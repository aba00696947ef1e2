"""Which path made a value: each speed-up's fast path, or the plain computation it replaces.

`fast_paths: false` (a study parameter) turns every speed-up off at once, and every check row records, one
column per speed-up, which path ran, as the `.value` of these enums (plain strings in a table). Each fast path
lives in its own module, whose docstring says what it replaces, why it is exact and how it is verified:

| speed-up | module | plain path |
|---|---|---|
| screen by replay | `models.quantizer_logits.FastLogits`, `models.rng_replay` | build the model, run its forward |
| tapped screen | `runtimes.discrete_taps` | the dispatch recorder over the whole forward |
| seed rebuild | `models.seed_rebuild.Rebuilder` | `build_model(model, seed)` |
| weight swap | `runtimes.weight_swap` | a fresh export per seed |
| fed session, head/tail split | `runtimes.fed_graph` | one ORT session per seed on the graph as exported |
| gathered codevector lookup | `runtimes.codevector_lookup` | the quantizer's own one-hot product, eager and ORT |

A test runs the near-tie screen and checks both ways and finds them equal value for value
(tests/studies/near_tie/test_near_tie_paths.py).
"""

from __future__ import annotations

from enum import StrEnum


class ScreenPath(StrEnum):
    REPLAY = "replay"  # FastLogits: the constructor's draws replayed, only the modules the argmax sees
    FORWARD = "forward"  # plain_logits: the whole model built and run


class ScreenRecorder(StrEnum):
    TAPPED = "tapped"  # discrete_taps: only the torch functions that make the counted calls wrapped
    DISPATCH = "dispatch"  # discrete_recorder: every aten op of the forward seen


class BuildPath(StrEnum):
    REBUILD = "rebuild"  # one template module given each seed's replayed weights
    BUILD = "build"  # build_model(model, seed)


class WeightsPath(StrEnum):
    SWAP = "swap"  # the seed's weights swapped into one template export
    FRESH_EXPORT = "fresh_export"  # the seed's own export


class SessionPath(StrEnum):
    FED = "fed"  # one session per process, weights fed as inputs (a per-seed tail where rounding differs)
    PER_SEED = "per_seed"  # an ORT session built for this seed's graph


class LookupPath(StrEnum):
    GATHERED = "gathered"  # the chosen codevector gathered
    PLAIN = "plain"  # the one-hot times the codebook, summed over the codes (the model's own code)
