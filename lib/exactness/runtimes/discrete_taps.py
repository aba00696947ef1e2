"""The few discrete calls a screen waits for, at the cost of a plain forward.

A dispatch mode (`discrete_recorder.Recorder`) sees every aten op of a forward, each through Python: that
doubles or triples a tiny detector's plain forward. A screen needs only the calls of the class's counted ops.
So the torch functions that make them (`torch.topk`, `Tensor.ne`, ...) are found once, on one seed, and for
later seeds only those functions are wrapped, for the length of a forward: a wrapper counts its function's
calls and, at a call the screen waits for, runs the function under a recorder of its own, so that every record
is made by the recorder's own code from the same call. The forward stops after the last one.

Fast path (`exactness.runtimes.speedup_paths`, switched off by `fast_paths: false`; a screen row's `recorder`):
- replaces: the dispatch recorder over the whole forward, in the discrete-ops screen;
- exact because: each record is the recorder's own, of the same call (the n-th call of the same torch
  function, which makes the same aten call while the forward's control flow does not depend on the seed);
- verified by: `learn` against a whole recording of its seed (every record equal, bit for bit), the screen
  against the dispatch recorder on the first seed of every chunk (else the chunk is recorded whole),
  tests/runtimes/test_discrete_taps.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

from exactness.compare.bits import bit_identical
from exactness.runtimes.discrete_recorder import ForwardStopped, Record, Recorder

_OWNERS = (torch, torch.Tensor, torch.nn.functional, torch.special, torch.linalg)
# An operator reaches torch's function hooks under the method's name (`x != 0` as `Tensor.ne`), so a wrapped
# method is wrapped under its operator's name too, counting the calls of both as one function's.
_OPERATORS = {name: f"__{name}__" for name in ("eq", "ne", "gt", "lt", "ge", "le", "round", "floor", "ceil")}


class TapError(RuntimeError):
    pass


@dataclass(frozen=True)
class Tap:
    """The record the `call`-th call of `owner.name` makes at position `index` among its own records."""

    owner: object
    name: str
    call: int
    index: int
    op: str
    op_call: int  # the record's call number in a whole recording
    scope: str
    # what the learnt call passed besides tensor values: another call of the same op (control flow that depends
    # on the seed) shows here as other arguments or other input shapes, and is refused
    signature: tuple = ()


def _signature(record: Record) -> tuple:
    return (repr(record.args), repr(sorted(record.kwargs.items())),
            tuple((tuple(v.shape), v.dtype) if isinstance(v, torch.Tensor) else repr(v) for v in record.inputs))


def owner_of(func) -> tuple[object, str] | None:
    """Where a function the forward called lives, so that it can be wrapped: (module or class, name)."""
    name = getattr(func, "__name__", None)
    if not name:
        return None
    for owner in _OWNERS:
        if getattr(owner, name, None) is func:
            return owner, name
    return None


class _Outermost(TorchFunctionMode):
    """Which torch function (the outermost the forward called) is running."""

    def __init__(self):
        super().__init__()
        self.running = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        before, self.running = self.running, func
        try:
            return func(*args, **(kwargs or {}))
        finally:
            self.running = before


class _Noting(Recorder):
    """A whole recording that notes, for each record, what `note()` returns when it is made."""

    def __init__(self, note):
        super().__init__()
        self.note, self.notes = note, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        before = len(self.records)
        output = super().__torch_dispatch__(func, types, args, kwargs)
        self.notes += [self.note()] * (len(self.records) - before)
        return output


class _Wrapped:
    """Wraps `functions` for one forward: counts their calls; at the calls in `taps`, records them."""

    def __init__(self, functions, taps: dict[tuple[tuple[object, str], int], list[Tap]]):
        self.functions, self.taps = functions, taps
        self.counts: dict[tuple[object, str], int] = {}
        self.running: list[tuple[tuple[object, str], int]] = []
        self.records: list[Record] = []
        self.left = sum(len(t) for t in taps.values())

    def _wrapper(self, key, original):
        def wrapper(*args, **kwargs):
            n = self.counts.get(key, 0)
            self.counts[key] = n + 1
            wanted = self.taps.get((key, n))
            self.running.append((key, n))
            try:
                if not wanted:
                    return original(*args, **kwargs)
                own = Recorder()
                with own:
                    output = original(*args, **kwargs)
            finally:
                self.running.pop()
            for tap in wanted:
                if tap.index >= len(own.records) or own.records[tap.index].op != tap.op \
                        or _signature(own.records[tap.index]) != tap.signature:
                    raise TapError(f"call {n} of {key[1]} did not make the {tap.op} call it made when learnt")
                self.records.append(dataclasses.replace(own.records[tap.index], call=tap.op_call, scope=tap.scope))
            self.left -= len(wanted)
            if self.taps and self.left <= 0:
                raise ForwardStopped
            return output

        return wrapper

    def _names(self) -> dict:
        names = {}
        for owner, name in self.functions:
            names.setdefault((owner, name), (owner, name))
            operator = _OPERATORS.get(name) if owner is torch.Tensor else None
            if operator and hasattr(owner, operator):
                names.setdefault((owner, operator), (owner, name))
        return names  # (owner, attribute) -> the function's key

    @contextlib.contextmanager
    def installed(self):
        with _PATCHING:  # the wrappers are process-wide: one forward at a time (a Dask worker may run threads)
            done = []
            try:
                for (owner, name), key in self._names().items():
                    saved = owner.__dict__.get(name, _MISSING) if isinstance(owner, type) else getattr(owner, name)
                    setattr(owner, name, self._wrapper(key, getattr(owner, name)))
                    done.append((owner, name, saved))
                yield self
            finally:
                for owner, name, saved in reversed(done):
                    try:
                        if saved is _MISSING:
                            delattr(owner, name)
                        else:
                            setattr(owner, name, saved)
                    except (AttributeError, TypeError):  # never leave the others wrapped for one that failed
                        pass


_MISSING = object()
_PATCHING = threading.RLock()


def _forward(model, inputs, seed) -> None:
    from transformers import set_seed

    with torch.no_grad():
        set_seed(seed)
        try:
            model(**inputs)
        except ForwardStopped:
            pass


@dataclass(frozen=True)
class TapPlan:
    taps: tuple[Tap, ...]

    @property
    def functions(self) -> list[tuple[object, str]]:
        return list(dict.fromkeys((t.owner, t.name) for t in self.taps))

    def record(self, model: torch.nn.Module, inputs: dict, seed: int) -> list[Record]:
        """The tapped calls' records, in the forward's order, from a forward that stops after the last."""
        by_call: dict = {}
        for tap in self.taps:
            by_call.setdefault(((tap.owner, tap.name), tap.call), []).append(tap)
        wrapped = _Wrapped(self.functions, by_call)
        with wrapped.installed():
            _forward(model, inputs, seed)
        if wrapped.left > 0:
            raise TapError(f"the forward made {len(self.taps) - wrapped.left} of the {len(self.taps)} tapped calls")
        return wrapped.records


def same_record(a: Record, b: Record) -> bool:
    """Every field equal, tensors bit for bit."""
    return bit_identical(a, b)


def learn(model: torch.nn.Module, inputs: dict, wanted: frozenset[tuple[str, int]], seed: int) -> TapPlan:
    """Which calls of which torch functions make the `wanted` (op, call) records, verified by tapping them on
    the same forward: every record equal to the whole recording's. TapError when a wanted record is made
    inside a nested torch function, by a function that cannot be wrapped, or differs when tapped."""
    from transformers import set_seed

    outermost = _Outermost()
    whole = _Noting(lambda: outermost.running)
    with torch.no_grad(), outermost, whole:
        set_seed(seed)
        model(**inputs)
    functions = []
    for record, func in zip(whole.records, whole.notes, strict=True):
        if (record.op, record.call) in wanted:
            where = owner_of(func) if func is not None else None
            if where is None:
                raise TapError(f"{record.op} call {record.call} is made by {func!r}, which cannot be wrapped")
            functions.append(where)
    functions = list(dict.fromkeys(functions))
    if not functions:
        raise TapError("no wanted call was made")
    counting = _Wrapped(functions, {})
    noted = _Noting(lambda: tuple(counting.running))
    handles = noted.hooks(model)
    try:
        with counting.installed(), torch.no_grad(), noted:
            set_seed(seed)
            model(**inputs)
    finally:
        for handle in handles:
            handle.remove()
    made: dict = {}
    taps, expected = [], []
    for record, running in zip(noted.records, noted.notes, strict=True):
        if running:  # its position among the records of the outermost wrapped call running
            made[running[0]] = made.get(running[0], -1) + 1
        if (record.op, record.call) not in wanted:
            continue
        if len(running) != 1:
            raise TapError(f"{record.op} call {record.call} is made inside {len(running)} wrapped calls, not one")
        (key, n), = running
        taps.append(Tap(key[0], key[1], n, made[running[0]], record.op, record.call, record.scope,
                        _signature(record)))
        expected.append(record)
    if {(t.op, t.op_call) for t in taps} != set(wanted):
        raise TapError("the wrapped functions did not make every wanted call")
    plan = TapPlan(tuple(taps))
    got = plan.record(model, inputs, seed)
    if len(got) != len(expected) or not all(same_record(a, b) for a, b in zip(got, expected, strict=True)):
        raise TapError("a tapped record differs from the whole recording's")
    return plan

