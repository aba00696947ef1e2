"""Whether an address is a Dask scheduler, found before a Dask client is made: the client trusts whatever
answers. It reads the first eight bytes of an HTTP reply as the length of a message and asks for exabytes
(MemoryError), and waits minutes on a server that accepts and says nothing. A scheduler sends its handshake
(an 8-byte length, then a msgpack map naming `compression`, `python`, `pickle-protocol`) as soon as a
connection is accepted, so reading that alone, within the connect timeout, tells one apart."""

from __future__ import annotations

import contextlib
import socket
import time

CONNECT_TIMEOUT_S = 30.0
_HANDSHAKE_LIMIT = 1 << 16  # a scheduler's handshake is about 60 bytes


class SchedulerError(RuntimeError):
    """No Dask scheduler at the address; one line naming it and what answered."""


def _receive(connection: socket.socket, size: int, deadline: float) -> bytes:
    data = b""
    while len(data) < size:
        connection.settimeout(max(deadline - time.monotonic(), 0.001))
        chunk = connection.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def check(address: str, timeout: float | None = None) -> None:
    """Return when `address` (tcp://host:port) answers as a Dask scheduler within `timeout` seconds; else a
    SchedulerError saying what answered instead."""
    timeout = CONNECT_TIMEOUT_S if timeout is None else timeout
    scheme, _, location = address.partition("://")
    host, _, port = location.rpartition(":")
    if scheme != "tcp" or not host or not port.isdigit():
        raise SchedulerError(f"scheduler {address!r}: give a Dask scheduler's tcp://host:port")
    what = f"scheduler {address}"
    deadline = time.monotonic() + timeout
    try:
        connection = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
    except TimeoutError:
        raise SchedulerError(f"{what} did not accept a connection within {timeout:g} s (is the host up, the "
                             "port open?)") from None
    except OSError as error:
        raise SchedulerError(f"{what} cannot be reached: {error.strerror or error} (is `dask scheduler` "
                             "running there?)") from None
    with connection:
        try:
            header = _receive(connection, 8, deadline)
            size = int.from_bytes(header, "little") if len(header) == 8 else 0
            if 8 <= size <= _HANDSHAKE_LIMIT:
                body = _receive(connection, size, deadline)
            else:  # a little more of what answered, for the message
                body = b""
                with contextlib.suppress(OSError):
                    header += _receive(connection, 32, time.monotonic() + 0.2)
        except TimeoutError:
            raise SchedulerError(f"{what} accepted the connection but sent no Dask handshake within {timeout:g} "
                                 "s: it is not a Dask scheduler (start one with `dask scheduler`), or it is hung") \
                from None
        except OSError as error:
            raise SchedulerError(f"{what} closed the connection: {error.strerror or error}; it is not a Dask "
                                 "scheduler") from None
    if b"compression" not in body or b"python" not in body:
        said = repr(header[:40] if not body else body[:40]) if header else "nothing"
        raise SchedulerError(f"{what} is not a Dask scheduler: it answered {said}, not Dask's handshake (a web "
                             "server or another service on that port?)")
