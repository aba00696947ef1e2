"""Rebuild a few of a model's tensors for a new seed without building the model.

Building a tiny test model is mostly Python module construction; the random draws themselves are cheap.
So the constructor's random draws are recorded once (at the aten level, where every init function ends),
and for each seed they are replayed in the same order on scratch tensors of the same shapes, which leaves
the generator in exactly the state the full build would. The tensors a computation needs are kept; the
rest are thrown away. Replay stops after the last draw that is needed.

A needed tensor must be either the output of one recorded draw, unchanged afterwards or with some positions
then overwritten by seed-independent values (an embedding's padding row, zeroed after its draw), the same for
every seed (a norm's ones and zeros), or a function the caller names of another needed tensor (weight
norm's magnitude, computed from its direction when the parametrization is registered); anything else is
refused when the plan is made, and tests/models/test_rng_replay.py proves bit-identity against the plain
build.

Most draws are of tensors nobody needs (the encoder's weights, for the quantizer's logits); drawing them
as normal samples costs far more than the generator itself. Those runs are replaced by one bulk draw of
raw integers that consumes exactly as many 32-bit outputs of the Mersenne Twister (a float32 `uniform_`
takes one per element; a contiguous float32 `normal_` of 16 or more takes one per element plus 16 more
when its size is not a multiple of 16). The plan keeps the shortcut only if the generator's whole state
afterwards (Box-Muller caches included) equals that of the full replay on two seeds.

Fast path (`exactness.runtimes.speedup_paths`, switched off by `fast_paths: false`):
- replaces: running a model's constructor to get the tensors its random draws make;
- exact because: the same draws in the same order leave the generator where the constructor leaves it;
- verified by: the plan itself (the generator's whole state compared on two seeds before a shortcut is kept) and
  tests/models/test_rng_replay.py against plain builds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from exactness import compat

TorchDispatchMode = compat.torch_dispatch_mode()

_aten = torch.ops.aten
_RNG_OPS = {
    _aten.normal_, _aten.uniform_, _aten.bernoulli_, _aten.random_, _aten.exponential_, _aten.cauchy_,
    _aten.log_normal_, _aten.geometric_,
}
_RNG_FACTORIES = {_aten.randn, _aten.rand, _aten.randint, _aten.randperm, _aten.normal, _aten.bernoulli,
                  _aten.multinomial, _aten.rand_like, _aten.randn_like, _aten.randint_like}


class ReplayError(RuntimeError):
    pass


@dataclass
class _Draw:
    op: object
    shape: tuple
    stride: tuple
    dtype: torch.dtype
    args: tuple  # arguments after the target tensor
    kwargs: dict
    target_ptr: int
    result: torch.Tensor  # the values drawn while recording


class _Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.draws: list[_Draw] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func.overloadpacket
        if packet in _RNG_FACTORIES:
            raise ReplayError(f"the constructor draws with {func}, which replay does not support")
        if packet in _RNG_OPS:
            target = args[0]
            self.draws.append(_Draw(func, tuple(target.shape), tuple(target.stride()), target.dtype, args[1:],
                                    dict(kwargs), target.data_ptr(), target.detach().clone()))
        return out


def _words_consumed(draw: _Draw) -> int | None:
    """How many 32-bit generator outputs the draw takes, where ATen's CPU kernels make that fixed."""
    numel = 1
    for size in draw.shape:
        numel *= size
    contiguous = torch.empty(draw.shape).stride() == draw.stride
    if draw.dtype != torch.float32:
        return None
    if draw.op.overloadpacket is _aten.uniform_:
        return numel
    if draw.op.overloadpacket is _aten.normal_ and numel >= 16 and contiguous:
        return numel + (16 if numel % 16 else 0)
    return None


def _skip(words: int) -> None:
    """Advance the default generator by `words` 32-bit outputs (an int64 `random_` takes two each)."""
    if words // 2:
        torch.empty(words // 2, dtype=torch.int64).random_()
    if words % 2:
        torch.empty(1, dtype=torch.int32).random_()


@dataclass
class ReplayPlan:
    """Which draws to replay, and which of them (or which constants) give each needed tensor."""

    draws: list[_Draw]
    # name -> index of its draw, a seed-independent constant, or (index, positions, values): the draw with those
    # positions overwritten by seed-independent values
    sources: dict[str, int | torch.Tensor | tuple[int, torch.Tensor, torch.Tensor]]
    steps: list[int | tuple[str, int]] | None = None  # draw indices, and ("skip", words) for unneeded runs
    derived: dict[str, tuple[str, Callable]] = field(default_factory=dict)  # name -> (needed tensor, function)

    def tensors(self, seed: int) -> dict[str, torch.Tensor]:
        torch.default_generator.manual_seed(seed)  # the CPU generator is all a CPU build draws from
        kept: dict[int, torch.Tensor] = {}
        wanted = self._wanted()
        for step in self.steps if self.steps is not None else range(len(self.draws)):
            if isinstance(step, tuple):
                _skip(step[1])
                continue
            draw = self.draws[step]
            scratch = torch.empty_strided(draw.shape, draw.stride, dtype=draw.dtype)
            draw.op(scratch, *draw.args, **draw.kwargs)
            if step in wanted:
                kept[step] = scratch
        out = {name: _source_value(s, kept) for name, s in self.sources.items()}
        out.update({name: function(out[source]) for name, (source, function) in self.derived.items()})
        return out

    def _wanted(self) -> set[int]:
        return {_draw_index(s) for s in self.sources.values() if _draw_index(s) is not None}

    def with_shortcuts(self, check_seeds=(0, 1)) -> ReplayPlan:
        """The same plan with runs of unneeded draws skipped in bulk, if that provably leaves the generator
        in the same state; otherwise this plan unchanged."""
        wanted = self._wanted()
        steps: list[int | tuple[str, int]] = []
        for index, draw in enumerate(self.draws):
            words = None if index in wanted else _words_consumed(draw)
            if words is None:
                steps.append(index)
            elif steps and isinstance(steps[-1], tuple):
                steps[-1] = ("skip", steps[-1][1] + words)
            else:
                steps.append(("skip", words))
        faster = ReplayPlan(self.draws, self.sources, steps, self.derived)
        for seed in check_seeds:
            slow_tensors, slow_state = self.tensors(seed), torch.default_generator.get_state()
            fast_tensors, fast_state = faster.tensors(seed), torch.default_generator.get_state()
            if not torch.equal(slow_state, fast_state) or any(
                    not torch.equal(slow_tensors[n], fast_tensors[n]) for n in slow_tensors):
                return self
        return faster


def _draw_index(source) -> int | None:
    if isinstance(source, int):
        return source
    return source[0] if isinstance(source, tuple) else None


def _source_value(source, kept: dict[int, torch.Tensor]) -> torch.Tensor:
    if isinstance(source, int):
        return kept[source]
    if isinstance(source, tuple):
        index, positions, values = source
        value = kept[index].clone()
        value[positions] = values
        return value
    return source


def _overridden(drawn: torch.Tensor, final: torch.Tensor, other: torch.Tensor):
    """(positions, values) when `final` is `drawn` but at positions that hold the same values for another seed
    (`other`, the same tensor built from another seed): a seed-independent overwrite after the draw."""
    if drawn.shape != final.shape or drawn.dtype != final.dtype:
        return None
    positions = drawn != final
    if not positions.any() or not torch.equal(final[positions], other[positions]):
        return None
    if positions.float().mean() > 0.5:
        return None  # mostly overwritten: not a draw with a few fixed entries
    return positions.clone(), final[positions].clone()


def make_plan(build: Callable[[], torch.nn.Module], needed: list[str], check_seeds=(0, 1),
              derived: dict[str, tuple[str, Callable]] | None = None) -> ReplayPlan:
    """Record `build()` (which must seed nothing itself) and plan the replay of the `needed` tensors
    (names from `named_parameters()` / `named_buffers()`). `derived`: name -> (another needed tensor, a
    function of it) for tensors that are computed rather than drawn; checked bit for bit on both seeds."""
    derived = derived or {}
    recorder = _Recorder()
    torch.manual_seed(check_seeds[0])
    with recorder:
        model = build()
    state = dict(model.named_parameters()) | dict(model.named_buffers())
    torch.manual_seed(check_seeds[1])
    other_model = build()
    other = dict(other_model.named_parameters()) | dict(other_model.named_buffers())
    sources: dict[str, int | torch.Tensor] = {}
    for name in needed:
        if name not in state:
            raise ReplayError(f"{name!r} is not a parameter or buffer of the model")
        tensor = state[name]
        if name in derived:
            source, function = derived[name]
            if source not in needed or any(not torch.equal(function(s[source].detach()), s[name].detach())
                                           for s in (state, other)):
                raise ReplayError(f"{name!r} is not the given function of the needed tensor {source!r}")
            continue
        writes = [i for i, d in enumerate(recorder.draws) if d.target_ptr == tensor.data_ptr()
                  and d.shape == tuple(tensor.shape)]
        overridden = _overridden(recorder.draws[writes[-1]].result, tensor.detach(), other[name].detach()) \
            if writes else None
        if writes and torch.equal(recorder.draws[writes[-1]].result, tensor.detach()):
            sources[name] = writes[-1]
        elif overridden is not None:
            sources[name] = (writes[-1], *overridden)
        elif torch.equal(tensor.detach(), other[name].detach()):
            sources[name] = tensor.detach().clone()
        else:
            raise ReplayError(f"{name!r} is neither one recorded draw nor seed-independent; it cannot be replayed")
    last = max((_draw_index(i) for i in sources.values() if _draw_index(i) is not None), default=-1)
    kept = {name: derived[name] for name in needed if name in derived}
    return ReplayPlan(recorder.draws[: last + 1], sources, derived=kept).with_shortcuts(check_seeds)
