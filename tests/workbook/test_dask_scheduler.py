"""An address that is not a Dask scheduler is one line within the connect timeout: never a MemoryError from
reading an HTTP reply as a message length, never minutes of silence."""

import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from exactness.workbook import dask_scheduler, sweep
from exactness.workbook.dask_scheduler import SchedulerError


def _server(reply: bytes | None):
    """A local server that accepts and sends `reply` at once (None: says nothing), until the test ends."""
    listener = socket.create_server(("127.0.0.1", 0))
    held = []

    def serve():
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            held.append(connection)
            if reply is not None:
                connection.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    return listener, f"tcp://127.0.0.1:{listener.getsockname()[1]}"


@pytest.mark.parametrize("reply, said", [
    (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", "answered b'HTTP/1.1 400"),
    (None, "sent no Dask handshake within 1 s"),
    (b"SSH-2.0-OpenSSH_9.2\r\n", "answered b'SSH-2.0"),
])
def test_a_server_that_is_not_a_scheduler_is_one_line_within_the_timeout(reply, said):
    listener, address = _server(reply)
    with listener:
        began = time.monotonic()
        with pytest.raises(SchedulerError) as error:
            dask_scheduler.check(address, timeout=1)
        assert time.monotonic() - began < 5
    assert said in str(error.value) and address in str(error.value) and "\n" not in str(error.value)


def test_a_sweep_on_a_silent_server_stops_with_that_line(monkeypatch):
    monkeypatch.setattr(dask_scheduler, "CONNECT_TIMEOUT_S", 1.0)
    listener, address = _server(None)
    with listener, pytest.raises(SchedulerError, match="not a Dask scheduler"):
        sweep.map_chunks(len, list(range(4)), chunk_size=2, scheduler=address)


def test_a_closed_port_is_named():
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{unused.getsockname()[1]}"
    with pytest.raises(SchedulerError, match="cannot be reached"):
        dask_scheduler.check(address, timeout=1)


def test_a_real_scheduler_passes():
    dask = shutil.which("dask", path=str(Path(sys.executable).parent))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(120):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.25)
        dask_scheduler.check(f"tcp://127.0.0.1:{port}", timeout=10)
    finally:
        process.terminate()
        process.wait(timeout=30)
