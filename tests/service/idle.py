"""A client of a run's event stream on a raw socket, that reads only when it is told to.

A client that stops reading is what the followers tests are about: an HTTP library
reads ahead into its own buffers, a socket with a small receive buffer does not.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

from tests.service.server import ALICE, Server


class Idle:
    """``GET path`` on its own socket (``Connection: close``); nothing read until asked.

    Args:
        server: The server.
        path: The stream's path.
        last_event_id: Sent as ``Last-Event-ID``.
        token: The API token it sends (alice's by default).
        receive_buffer: The socket's receive buffer (bytes): small, so that the server's
            writes are stuck soon after the client stops reading.
    """

    def __init__(
        self,
        server: Server,
        path: str,
        *,
        last_event_id: int | None = None,
        receive_buffer: int = 4096,
        token: str = ALICE,
    ) -> None:
        host, port = server.url.removeprefix("http://").rsplit(":", 1)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.settimeout(60)
        self.sock.connect((host, int(port)))
        lines = [
            f"GET {path} HTTP/1.1",
            f"Host: {host}:{port}",
            f"Authorization: Bearer {token}",
            "Accept: text/event-stream",
            "Connection: close",
        ]
        if last_event_id is not None:
            lines.append(f"Last-Event-ID: {last_event_id}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self._data = b""
        self._body: Iterator[bytes] | None = None
        self._pending = b""

    def close(self) -> None:
        """Go away (the server sees the connection closed)."""
        self.sock.close()

    def _more(self) -> bool:
        data = self.sock.recv(65536)
        self._data += data
        return bool(data)

    def _line(self) -> bytes:
        while b"\r\n" not in self._data:
            if not self._more():
                raise EOFError("the server closed the connection")
        line, self._data = self._data.split(b"\r\n", 1)
        return line

    def _exactly(self, size: int) -> bytes:
        while len(self._data) < size:
            if not self._more():
                raise EOFError("the server closed the connection")
        data, self._data = self._data[:size], self._data[size:]
        return data

    def status(self) -> int:
        """Read the response's head (a few bytes); its status."""
        status = int(self._line().split()[1])
        while self._line():
            pass
        return status

    def _chunks(self) -> Iterator[bytes]:
        while True:
            size = int(self._line().split(b";")[0], 16)
            if not size:
                return
            yield self._exactly(size)
            self._exactly(2)

    def events(self) -> Iterator[dict[str, Any]]:
        """The stream's signals, read as they are asked for, until the stream ends."""
        if self._body is None:
            self._body = self._chunks()
        for data in self._body:
            self._pending += data
            while b"\n\n" in self._pending:
                event, self._pending = self._pending.split(b"\n\n", 1)
                for line in event.decode().split("\n"):
                    if line.startswith("data: "):
                        yield json.loads(line.removeprefix("data: "))
