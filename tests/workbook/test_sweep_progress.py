"""The sweep's terminal line: no time left from the first chunk alone, and every line in the form the run's
terminal passes through."""

import io
import re

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
