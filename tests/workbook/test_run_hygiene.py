"""What a run leaves and opens: nothing of it listens on TCP, its kernel does not import from the run folder,
and its sockets and connection file go when it ends (or at the next run, after a kill)."""

import json
import os
import socket
import time

from conftest import write_notebook
from exactness.workbook import catalog, parameters, runs
from exactness.workbook.project import Project

_PROBE = r'''
import os, sys, zmq
from exactness.workbook.artifacts import RunArtifacts

def listening_tcp_inodes():
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        found |= {line.split()[9] for line in lines if line.split()[3] == "0A"}  # 0A: LISTEN
    return found

mine = set()
for fd in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        continue
    if target.startswith("socket:["):
        mine.add(target[len("socket:["):-1])
pipe = sys.stdout.pub_thread._pipe_in.socket.getsockopt(zmq.LAST_ENDPOINT).decode()
child = os.fork()
if child == 0:
    print("printed by a forked child", flush=True)
    os._exit(0)
os.waitpid(child, 0)
RunArtifacts.current("probe").summary(listening_tcp=len(mine & listening_tcp_inodes()), pipe=pipe,
                                      run_folder_importable=os.getcwd() in sys.path or "" in sys.path)
'''


def _probe_study(root):
    write_notebook(root / "notebooks" / "probe.ipynb", "x = 1", _PROBE)
    (root / "params" / "probe").mkdir()
    (root / "params" / "probe" / "smoke.yaml").write_text("{}\n")
    project = Project.at(root)
    study = catalog.get(project, "probe")
    return project, study


def test_nothing_of_a_run_listens_on_tcp_and_its_sockets_and_connection_file_go_with_it(tiny_project):
    import nbformat

    project, study = _probe_study(tiny_project)
    result = runs.execute(project, study, parameters.resolve(study.notebook, [], []), "smoke", batch="b")
    assert result, result.reason
    summary = json.loads((result.folder / "summary.json").read_text())
    assert summary["listening_tcp"] == 0
    assert summary["pipe"].startswith("ipc://" + str(tiny_project / ".state" / "k"))
    assert summary["run_folder_importable"] is False
    executed = nbformat.read(result.folder / "probe.ipynb", as_version=4)
    streams = [o.get("text", "") for c in executed.cells for o in c.get("outputs", [])]
    assert any("printed by a forked child" in text for text in streams)  # the pipe still carries it
    assert list((tiny_project / ".state" / "k").iterdir()) == []
    assert not list((tiny_project / ".state").rglob("kernel-*.json"))  # no connection file left anywhere


def test_a_kernel_command_of_another_shape_is_left_as_it_is():
    from exactness import compat

    assert compat.kernel_command_without_tcp(["julia", "-i", "{connection_file}"], "ipc:///x") == [
        "julia", "-i", "{connection_file}"]
    command = compat.kernel_command_without_tcp(["/py", "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f",
                                                 "c.json"], "ipc:///s/k-pipe")
    assert command[:3] == ["/py", "-P", "-Xfrozen_modules=off"] and command[-2:] == ["-f", "c.json"]
    assert command[3] == "-c" and "launch_kernel_without_tcp('ipc:///s/k-pipe')" in command[4]


def test_a_long_project_path_uses_a_private_tmp_folder_removed_when_the_run_ends(tmp_path):
    project = Project.at(tmp_path / ("x" * 120), tmp_path / "out")
    with runs.kernel_sockets(project) as prefix:
        folder = os.path.dirname(prefix)
        assert folder.startswith("/tmp/exactness-") and os.path.isdir(folder)
    assert not os.path.exists(folder)


def _stale(folder, age_s=3600):
    folder.mkdir()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(folder / "k-1"))  # bound, never listening: what a killed kernel's socket file is
    past = time.time() - age_s
    os.utime(folder, (past, past))
    return folder


def test_socket_folders_a_killed_run_left_are_removed_but_live_and_fresh_ones_kept(tmp_path):
    base = tmp_path / "k"
    base.mkdir()
    stale = _stale(base / "a1b2c3")
    empty = base / "d4e5f6"
    empty.mkdir()
    os.utime(empty, (time.time() - 3600,) * 2)
    fresh = _stale(base / "0f0f0f", age_s=0)
    live = base / "9a9a9a"
    live.mkdir()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(live / "k-1"))
    listener.listen()
    os.utime(live, (time.time() - 3600,) * 2)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:  # the layout of earlier versions
        dead.bind(str(base / "a0b0c0-1"))
    os.utime(base / "a0b0c0-1", (time.time() - 3600,) * 2, follow_symlinks=False)
    someone_elses = base / "abcdef"  # named like ours, but holding a file of another kind
    someone_elses.mkdir()
    (someone_elses / "notes.txt").write_text("keep me")
    os.utime(someone_elses, (time.time() - 3600,) * 2)
    try:
        removed = runs.remove_stale_socket_folders(base)
    finally:
        listener.close()
    assert sorted(removed) == sorted([stale, empty, base / "a0b0c0-1"])
    assert fresh.exists() and live.exists() and not stale.exists() and not empty.exists()
    assert (someone_elses / "notes.txt").read_text() == "keep me"


def test_only_tmp_folders_named_as_mkdtemp_names_ours_are_considered(tmp_path):
    clone = tmp_path / "exactness-review"  # a checkout someone keeps in /tmp, say
    clone.mkdir()
    stale = _stale(tmp_path / "exactness-a1b2c3d4")
    os.utime(clone, (time.time() - 3600,) * 2)
    assert runs.remove_stale_socket_folders(tmp_path, runs._TMP_FOLDER) == [stale]
    assert clone.exists()
