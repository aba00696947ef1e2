import io
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from exactness.studies.near_tie import screen as near_tie_screen
from exactness.workbook import sweep
from exactness.workbook.shards import ShardStore


def _squares(chunk):
    return pd.DataFrame({"item": list(chunk), "square": [i * i for i in chunk]})


def test_chunks_come_back_in_order_whatever_the_workers():
    one = sweep.map_chunks(_squares, range(23), workers=1, chunk_size=4)
    two = sweep.map_chunks(_squares, range(23), workers=2, chunk_size=4)
    pd.testing.assert_frame_equal(one, two)
    assert one.item.tolist() == list(range(23))


def test_a_sweep_over_finished_shards_computes_only_what_is_missing(tmp_path):
    store = ShardStore(tmp_path)
    calls = []

    def counted(chunk):
        calls.append(chunk[0])
        return _squares(chunk)

    sweep.map_chunks(counted, range(6), chunk_size=2, shards=store)
    (tmp_path / f"{store.key('sweep', [2, 3])}.pkl").unlink()  # as if the run had died before that chunk
    calls.clear()
    again = sweep.map_chunks(counted, range(6), chunk_size=2, shards=store)
    assert calls == [2]
    pd.testing.assert_frame_equal(again, _squares(range(6)))


def test_progress_counts_resumed_items_apart_from_the_rate():
    stream = io.StringIO()
    progress = sweep.Progress(10, "screen X", every=0.0, stream=stream)
    progress.skip(6)
    progress.advance(4)
    assert "screen X: 10/10" in stream.getvalue() and "6 resumed" in stream.getvalue()


def test_progress_counts_what_size_says_a_chunk_holds(capsys):
    def lengths(chunk):
        return pd.DataFrame({"n": [len(unit) for unit in chunk]})

    units = [tuple(range(n)) for n in (3, 5, 2)]  # items that each hold several seeds
    done = sweep.map_chunks(lengths, units, chunk_size=1, label="units", progress_every=0.0,
                            size=lambda part: sum(len(unit) for unit in part))
    assert done.n.tolist() == [3, 5, 2]
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(": ")[1].split(" ")[0] for line in lines] == ["3/10", "8/10", "10/10"]


_SWEEP = """
import sys
from exactness.workbook.shards import ShardStore
from exactness.studies.near_tie.screen import screen
screen(["Wav2Vec2ForPreTraining"], 0, {n}, workers=1, chunk_size={size}, shards=ShardStore(sys.argv[1]))
"""


@pytest.mark.slow
def test_a_killed_sweep_resumes_without_losing_or_repeating_a_seed(tmp_path):
    n, size = 1200, 25
    shards = tmp_path / "shards"
    process = subprocess.Popen([sys.executable, "-c", _SWEEP.format(n=n, size=size), str(shards)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while len(list(shards.glob("*.pkl"))) < 3 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    before = {p.name: p.stat().st_mtime_ns for p in shards.glob("*.pkl")}
    assert 3 <= len(before) < n // size, "the sweep must be cut short part-way for this test to mean anything"
    resumed = near_tie_screen.screen(["Wav2Vec2ForPreTraining"], 0, n, workers=2, chunk_size=size,
                                     shards=ShardStore(shards))
    assert {p.name: p.stat().st_mtime_ns for p in shards.glob("*.pkl") if p.name in before} == before
    assert len(list(shards.glob("*.pkl"))) == n // size
    assert resumed.seed.tolist() == list(range(n))
    whole = near_tie_screen.screen(["Wav2Vec2ForPreTraining"], 0, n, workers=2, chunk_size=size)
    pd.testing.assert_frame_equal(resumed, whole)


def test_workers_restart_when_the_code_they_run_was_edited_between_sweeps(tmp_path, monkeypatch, capsys):
    package = tmp_path / "edited_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    source = "import pandas as pd\n\n\ndef work(chunk):\n    return pd.DataFrame({{'v': [{v}] * len(chunk)}})\n"
    (package / "work.py").write_text(source.format(v=1))
    monkeypatch.syspath_prepend(str(tmp_path))
    from edited_pkg.work import work

    first = sweep.map_chunks(work, range(4), workers=2, chunk_size=1)
    (package / "work.py").write_text(source.format(v=222))  # another size: no stale .pyc either
    second = sweep.map_chunks(work, range(4), workers=2, chunk_size=1)
    assert first.v.tolist() == [1] * 4 and second.v.tolist() == [222] * 4
    assert "restarting them" in capsys.readouterr().err


def test_the_code_fingerprint_covers_every_library_source_file_and_nothing_else(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "notes.txt").write_text("not code\n")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    _, entries = sweep._fingerprint((str(tmp_path),))
    assert sorted(path for path, *_ in entries) == [str(tmp_path / "a.py"), str(tmp_path / "sub" / "b.py")]
    before = sweep._fingerprint((str(tmp_path),))
    (tmp_path / "sub" / "b.py").write_text("y = 22\n")  # another size
    assert sweep._changed(before, sweep._fingerprint((str(tmp_path),))) == str(tmp_path / "sub" / "b.py")


def test_a_pool_worker_exits_when_the_process_owning_its_pool_is_gone():
    # an owner that is not our child (its exit must not wait for us to reap it): sh starts it and leaves
    owner = int(subprocess.run(["sh", "-c", "sleep 1 >/dev/null & echo $!"], capture_output=True, text=True).stdout)
    watcher = subprocess.run([sys.executable, "-c", f"from exactness.workbook.sweep import _exit_when_gone; "
                              f"_exit_when_gone({owner}, 0.05); print('still here')"],
                             capture_output=True, text=True, timeout=60)
    assert watcher.returncode == 1 and "still here" not in watcher.stdout
