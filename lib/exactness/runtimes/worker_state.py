"""What one process keeps between the chunks it runs, in one object it owns.

A worker checks many seeds of a few classes: rebuilding a class's template or learning which calls the screen
taps costs more than a seed, so a process keeps them. Everything of that kind lives here, in `WorkerState` (what
stays elsewhere, and why: ARCHITECTURE.md, "What a process keeps"): a test builds a fresh one (`fresh()`) instead
of clearing caches by hand, and what a process holds can be read in one place.
Every value kept is a pure function of its key (a model class, a seed's structure), so keeping it changes no
number, only the time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class WorkerState:
    # (factory, key) -> what factory(*key) made: templates, rebuilders, fast screens (one per model class)
    made: dict[tuple, Any] = field(default_factory=dict)
    # a study's learnt facts about a class (discrete_ops: the calls its screen taps), by the study's own key
    learnt: dict[Hashable, Any] = field(default_factory=dict)
    # model class -> whether the codevector lookup gave the model's own outputs: None where it did, else why not
    lookup_checked: dict[str, str | None] = field(default_factory=dict)

    def made_by(self, factory: Callable, *key: Hashable) -> Any:
        """`factory(*key)`, made once per process and key."""
        slot = (factory, *key)
        if slot not in self.made:
            self.made[slot] = factory(*key)
        return self.made[slot]


_current = WorkerState()


def current() -> WorkerState:
    """This process's state."""
    return _current


@contextlib.contextmanager
def fresh() -> Iterator[WorkerState]:
    """A new, empty state for the duration (a test's own); the process's previous one afterwards."""
    global _current
    before, _current = _current, WorkerState()
    try:
        yield _current
    finally:
        _current = before
