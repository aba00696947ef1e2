"""Record eager PyTorch's discrete choices as the forward makes them, and force other choices on a re-run.

A `TorchDispatchMode` sees every aten op of the forward (the level the exporter traces), so the recorder
keeps, for each call of a discrete op (argmax, topk, sort, comparisons, rounding, nonzero, random draws), the
torch module it ran in, its arguments, what it read and what it chose. The same mode, given replacements
keyed by (op, call number), returns other choices instead: eager re-run with ONNX Runtime's choices, so
that what remains between the two is what the choices do not explain.

Records are matched to the graph's discrete nodes (`match`): same module scope and kind, and where the
exporter's metadata names the traced node (`topk_1`: the second topk call), the same call number. The
match is verified afterwards on values: what eager's op read must equal what ORT's node read to float noise.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from exactness import compat
from exactness.runtimes.discrete_scan import DiscreteOp

TorchDispatchMode = compat.torch_dispatch_mode()

# aten op (overload packet, or packet.overload) -> category, as in discrete_scan.CATEGORIES
ATEN_CATEGORIES = {
    "aten.argmax": "argmax", "aten.argmin": "argmin", "aten.max.dim": "argmax", "aten.min.dim": "argmin",
    "aten.topk": "topk", "aten.sort": "topk",
    "aten.gt": "compare", "aten.lt": "compare", "aten.ge": "compare", "aten.le": "compare", "aten.eq": "compare",
    "aten.ne": "compare",
    "aten.round": "rounding", "aten.floor": "rounding", "aten.ceil": "rounding",
    "aten.nonzero": "nonzero",
    "aten.bernoulli": "random", "aten.rand": "random", "aten.randn": "random", "aten.rand_like": "random",
    "aten.randn_like": "random", "aten.uniform_": "random", "aten.normal_": "random", "aten.multinomial": "random",
    "aten.exponential_": "random", "aten.bernoulli_": "random", "aten.randint": "random", "aten.randperm": "random",
    "aten.random_": "random",
}


def aten_key(func) -> str | None:
    """The ATEN_CATEGORIES key of a dispatched op, or None when it is not a discrete op."""
    packet = str(func.overloadpacket) if hasattr(func, "overloadpacket") else str(func)
    packet = packet if packet.startswith("aten.") else f"aten.{packet}"
    overload = f"{packet}.{func._overloadname}" if hasattr(func, "_overloadname") else packet
    if overload in ATEN_CATEGORIES:
        return overload
    if packet in ("aten.max", "aten.min"):
        return None  # max/min over a whole tensor or of two tensors choose nothing
    return packet if packet in ATEN_CATEGORIES else None


@dataclass
class Record:
    op: str  # ATEN_CATEGORIES key
    call: int  # how many calls of this op came before it in the forward
    scope: str  # the innermost module running ("" for the root)
    args: list  # the non-tensor arguments, positionally (None where a tensor was)
    kwargs: dict
    inputs: list[torch.Tensor | float]  # what it read: tensors (copied) and scalars
    output: object  # what it chose: a tensor, or a tuple (values, indices)
    forced: bool = False

    @property
    def category(self) -> str:
        return ATEN_CATEGORIES[self.op]


def _copy(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return type(value)(_copy(v) for v in value)
    return value


class ForwardStopped(BaseException):  # not an Exception: model code catching `Exception` must not swallow it
    """Raised inside the forward once every call a screen waits for is recorded: the rest is not needed."""


class Recorder(TorchDispatchMode):
    """Records discrete ops; `force[(op, call)](args, kwargs, output) -> output` replaces a choice. `stop_after`:
    (op, call) keys; once all are recorded, the forward stops (`ForwardStopped`): what came before is exactly
    what a whole forward records, and a screen needs nothing after its last op."""

    def __init__(self, force: dict[tuple[str, int], Callable] | None = None,
                 stop_after: frozenset[tuple[str, int]] = frozenset()):
        super().__init__()
        self.records: list[Record] = []
        self.scopes: list[str] = [""]
        self.calls: dict[str, int] = {}
        self.force = force or {}
        self.waiting = set(stop_after)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        output = func(*args, **kwargs)
        op = aten_key(func)
        if op is None:
            return output
        call = self.calls.get(op, 0)
        self.calls[op] = call + 1
        if op in ("aten.uniform_", "aten.normal_", "aten.exponential_") and not isinstance(args[0], torch.Tensor):
            return output
        replace = self.force.get((op, call))
        if replace is not None:
            output = replace(args, kwargs, output)
        self.records.append(Record(
            op, call, self.scopes[-1], [None if isinstance(a, torch.Tensor) else a for a in args], dict(kwargs),
            [_copy(a) for a in args if isinstance(a, (torch.Tensor, int, float))], _copy(output), replace is not None))
        if self.waiting:
            self.waiting.discard((op, call))
            if not self.waiting:
                raise ForwardStopped
        return output

    def hooks(self, model: torch.nn.Module) -> list:
        """Track which module is running: a forward pre-hook pushes its path, a forward hook pops it."""
        def enter(path):
            def hook(*_):  # returns None: a pre-hook that returns a value replaces the module's inputs
                self.scopes.append(path)

            return hook

        def leave(*_):  # returns None: a hook that returns a value replaces the module's output
            self.scopes.pop()

        handles = []
        for path, module in model.named_modules():
            handles.append(module.register_forward_pre_hook(enter(path)))
            handles.append(module.register_forward_hook(leave, always_call=True))
        return handles


def record(model: torch.nn.Module, inputs: dict, force: dict | None = None, seed: int | None = None,
           stop_after: frozenset[tuple[str, int]] = frozenset()):
    """One eager forward under the recorder: (model outputs, records). `seed`: torch is seeded right before
    the forward, as the export test does (a forward that draws random numbers depends on it). `stop_after`:
    the forward stops once these (op, call) keys are recorded, and the outputs are None."""
    recorder = Recorder(force, stop_after)
    handles = recorder.hooks(model)
    output = None
    try:
        with torch.no_grad():
            if seed is not None:
                from transformers import set_seed

                set_seed(seed)
            with recorder:
                output = model(**inputs)
    except ForwardStopped:
        pass
    finally:
        for handle in handles:
            handle.remove()
    return output, recorder.records


_CALL_SUFFIX = re.compile(r"_(\d+)$")


def fx_call(fx_name: str) -> int | None:
    """`topk` -> 0, `topk_1` -> 1: the traced node's call number; None without a name."""
    if not fx_name:
        return None
    found = _CALL_SUFFIX.search(fx_name)
    return int(found.group(1)) if found else 0


@dataclass
class Match:
    record: int | None  # index into the records, None when nothing matched
    how: str  # "traced call number", "scope and order", or "no eager call"
    notes: list[str] = field(default_factory=list)


def match(ops: list[DiscreteOp], records: list[Record]) -> dict[str, Match]:
    """Each graph op's eager call. First the exporter's own names: the same aten op and call number (and the
    same scope). What is left is matched in order within (scope, category), by output size."""
    used: set[int] = set()
    found: dict[str, Match] = {}
    for op in ops:
        call = fx_call(op.fx_name)
        for i, rec in enumerate(records):
            if i not in used and rec.op.split(".")[:2] == op.aten.split(".")[:2] and rec.call == call \
                    and rec.scope == op.scope:
                used.add(i)
                found[op.node] = Match(i, "traced call number")
                break
    for op in ops:
        if op.node in found:
            continue
        after = max((m.record for m in found.values() if m.record is not None
                     and records[m.record].scope == op.scope and records[m.record].category == op.category
                     and m.record < len(records)), default=-1)
        candidates = [i for i, rec in enumerate(records) if i not in used and rec.scope == op.scope
                      and rec.category == op.category]
        later = [i for i in candidates if i > after] or candidates
        if later:
            used.add(later[0])
            found[op.node] = Match(later[0], "scope and order")
        else:
            found[op.node] = Match(None, "no eager call")
    return found
