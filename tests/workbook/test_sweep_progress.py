"""The sweep's terminal line: no time left from the first chunk alone, a time left from the chunks' own times
that neither rises nor counts warm-up, and every line in the form the run's terminal passes through."""

import io
import os
import re
import socket

import pandas as pd

from exactness.workbook import sweep
from exactness.workbook.run_progress import _PROGRESS_LINE


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _lines(stream):
    return stream.getvalue().splitlines()


def test_no_time_left_is_said_until_two_chunks_are_done_then_it_counts_every_item_done():
    clock, stream = _Clock(), io.StringIO()
    progress = sweep.Progress(20, "discrete ops", every=0.0, stream=stream, clock=clock)
    clock.now = 400.0  # the first chunk: start-up and the slowest export
    progress.advance(1)
    assert "estimating" in _lines(stream)[-1] and "s left:" in _lines(stream)[-1]
    clock.now = 420.0  # three quick chunks
    progress.advance(1)
    clock.now = 440.0
    progress.advance(2)
    done, elapsed = 4, 440.0
    left = float(re.search(r"(\d+) s left", _lines(stream)[-1]).group(1))
    assert left == round((20 - done) * elapsed / done)  # from every item done, not from the first chunk's 400 s
    assert "one every 110 s" in _lines(stream)[-1]  # under one a second: the time per item, not "0/s"


def test_every_line_passes_the_run_terminal_filter():
    clock, stream = _Clock(), io.StringIO()
    progress = sweep.Progress(6, "screen X", every=0.0, stream=stream, clock=clock)
    progress.skip(2)
    for _ in range(4):
        clock.now += 1.5
        progress.advance(1)
    assert len(_lines(stream)) == 4 and all(_PROGRESS_LINE.match(line) for line in _lines(stream))
    assert _lines(stream)[-1].startswith("screen X: 6/6") and "2 resumed" in _lines(stream)[-1]


def test_every_count_says_what_it_counts():
    stream = io.StringIO()
    ticks = iter([0.0, 10.0, 20.0])
    progress = sweep.Progress(3, "exports", every=0.0, stream=stream, clock=lambda: next(ticks), unit="classes")
    progress.advance(1)
    progress.advance(1)
    assert _lines(stream)[-1] == "exports: 2/3 classes (one every 10 s, 10 s left)"


def _finishing(workers: int, chunks_each: int, start: float, warm_up: float, seconds: float):
    """(wall time, worker, the chunk's own seconds) of every chunk, in the order they finish: every worker
    starts at `start` and spends `warm_up` more on its first chunk."""
    done = []
    for worker in range(workers):
        at = start
        for k in range(chunks_each):
            took = seconds + (warm_up if k == 0 else 0.0)
            at += took
            done.append((at, worker, took))
    return sorted(done)


def _time_left(start: float, warm_up: float, timed: bool) -> list[tuple[float, float, float]]:
    """(wall time, time left said, true time left) after every chunk of a 2-worker sweep of 20 chunks."""
    clock, stream = _Clock(), io.StringIO()
    progress = sweep.Progress(2000, "screen X", every=0.0, stream=stream, clock=clock, workers=2, chunks=20)
    finishing = _finishing(2, 10, start, warm_up, 1.0)
    end = finishing[-1][0]
    said = []
    for at, worker, took in finishing:
        clock.now = at
        progress.advance(100, took, worker) if timed else progress.advance(100)
        found = re.search(r"(\d+) s left", _lines(stream)[-1])
        if found and at < end:
            said.append((at, float(found.group(1)), end - at))
    return said


def test_the_time_left_never_rises_when_the_workers_finish_in_step():
    """Two workers finishing chunks together: items over wall time said 9 s, then 11 s one chunk later (three
    chunks over twice the time of two). From the chunks' own times it only falls."""
    said = [left for _, left, _ in _time_left(start=0.0, warm_up=0.0, timed=True)]
    assert said and all(later <= earlier for earlier, later in zip(said, said[1:], strict=False)), said
    old = [left for _, left, _ in _time_left(start=0.0, warm_up=0.0, timed=False)]
    assert any(later > earlier for earlier, later in zip(old, old[1:], strict=False))  # what the chunk times avoid


def test_the_pools_start_and_each_workers_warm_up_are_not_taken_for_the_rate():
    """6 s of pool start and 3 s of warm-up in each worker's first 1 s chunk: the first time left said is within
    a second of the truth (8 s), where items over wall time said 90 s."""
    said = _time_left(start=6.0, warm_up=3.0, timed=True)
    assert all(abs(left - true) <= 1.0 for _, left, true in said), said
    assert [left for _, left, _ in said] == sorted((left for _, left, _ in said), reverse=True)
    first_old = _time_left(start=6.0, warm_up=3.0, timed=False)[0]
    assert first_old[1] > 5 * first_old[2]  # the estimate the chunk times replace


def test_a_sweep_says_its_time_left_from_its_chunks_own_times(monkeypatch):
    """map_chunks passes each chunk's compute time and worker to the progress line, in this process too."""
    seen = []
    monkeypatch.setattr(sweep.Progress, "advance", lambda self, n, seconds=None, worker=None:
                        seen.append((n, seconds, worker)))
    sweep.map_chunks(lambda chunk: pd.DataFrame({"x": list(chunk)}), range(6), workers=1, chunk_size=2)
    assert [n for n, _, _ in seen] == [2, 2, 2]
    assert all(seconds is not None and seconds >= 0 and worker == (socket.gethostname(), os.getpid())
               for _, seconds, worker in seen)
