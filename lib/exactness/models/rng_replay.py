"""Rebuild a few of a model's tensors for a new seed without building the model.

Building a tiny test model is mostly Python module construction; the random draws themselves are cheap.
So the constructor's random draws are recorded once (at the aten level, where every init function ends),
and for each seed they are replayed in the same order on scratch tensors of the same shapes, which leaves
the generator in exactly the state the full build would. The tensors a computation needs are kept; the
rest are thrown away. Replay stops after the last draw that is needed.

A needed tensor must be either the output of one recorded draw, unchanged afterwards, or the same for
every seed (a norm's ones and zeros); anything else is refused when the plan is made, and
tests/models/test_rng_replay.py proves bit-identity against the plain build.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

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


@dataclass
class ReplayPlan:
    """Which draws to replay, and which of them (or which constants) give each needed tensor."""

    draws: list[_Draw]
    sources: dict[str, int | torch.Tensor]  # name -> index of its draw, or a seed-independent constant

    def tensors(self, seed: int) -> dict[str, torch.Tensor]:
        torch.manual_seed(seed)
        kept: dict[int, torch.Tensor] = {}
        wanted = {i for i in self.sources.values() if isinstance(i, int)}
        for index, draw in enumerate(self.draws):
            scratch = torch.empty_strided(draw.shape, draw.stride, dtype=draw.dtype)
            draw.op(scratch, *draw.args, **draw.kwargs)
            if index in wanted:
                kept[index] = scratch
        return {name: kept[s] if isinstance(s, int) else s for name, s in self.sources.items()}


def make_plan(build: Callable[[], torch.nn.Module], needed: list[str], check_seeds=(0, 1)) -> ReplayPlan:
    """Record `build()` (which must seed nothing itself) and plan the replay of the `needed` tensors
    (names from `named_parameters()` / `named_buffers()`)."""
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
        writes = [i for i, d in enumerate(recorder.draws) if d.target_ptr == tensor.data_ptr()
                  and d.shape == tuple(tensor.shape)]
        if writes and torch.equal(recorder.draws[writes[-1]].result, tensor.detach()):
            sources[name] = writes[-1]
        elif torch.equal(tensor.detach(), other[name].detach()):
            sources[name] = tensor.detach().clone()
        else:
            raise ReplayError(f"{name!r} is neither one recorded draw nor seed-independent; it cannot be replayed")
    last = max((i for i in sources.values() if isinstance(i, int)), default=-1)
    return ReplayPlan(recorder.draws[: last + 1], sources)
