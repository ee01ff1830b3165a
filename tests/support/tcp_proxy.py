"""A TCP proxy to cut: PostgreSQL going away under a running forewarn, and coming back.

``forewarn serve --store postgresql://...@127.0.0.1:<proxy port>/...`` reaches the real server
through it. :meth:`TcpProxy.cut` resets every connection it carries and refuses new ones (as
a server that went down, or a network that dropped it), :meth:`TcpProxy.restore` lets them
through again. :meth:`TcpProxy.silence` keeps every connection open and accepts new ones, but
forwards nothing either way (a server that hangs, a network that drops packets without a
word) until :meth:`TcpProxy.resume`, which delivers what it held, in order. Threads, one per
direction of each connection: a front-end opens a handful.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from types import TracebackType


def _reset(sock: socket.socket) -> None:
    """Close ``sock`` with a reset, as a peer that vanished does (no orderly goodbye)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    # A pump thread blocked reading ``sock`` holds it open past close() (the kernel closes a
    # socket when its last reader returns): shutting it down first wakes that reader, so an
    # idle session's server end is really cut too, and PostgreSQL ends that session (and
    # gives back its locks) as it does a client that vanished.
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


class TcpProxy:
    """Forwards 127.0.0.1:``port`` to ``upstream`` until cut."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cut = False
        self._closed = False
        #: Set while bytes flow; cleared by :meth:`silence`.
        self._flowing = threading.Event()
        self._flowing.set()
        #: Bytes read from one side and not yet passed to the other (held while silent).
        self._held = 0
        #: Bytes whose passing silences the proxy, held with them (:meth:`silence_at`).
        self._trigger: bytes | None = None
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def cut(self) -> None:
        """Reset every connection and refuse new ones until :meth:`restore`."""
        with self._lock:
            self._cut = True
            carried, self._open = self._open, set()
        for sock in carried:
            _reset(sock)

    def restore(self) -> None:
        with self._lock:
            self._cut = False

    def silence(self) -> None:
        """Forward nothing more, either way, keeping every connection open, until
        :meth:`resume`; new connections are accepted, and silent too."""
        self._flowing.clear()

    def silence_at(self, trigger: bytes) -> None:
        """Go silent when ``trigger`` next passes (from either side), holding it too: a
        statement held up on its way, the server never hearing of it until :meth:`resume`."""
        with self._lock:
            self._trigger = trigger

    def resume(self) -> None:
        """Deliver what was held while silent, then forward again."""
        self._flowing.set()

    def held(self) -> int:
        """How many bytes wait to be forwarded (a request sent into the silence)."""
        with self._lock:
            return self._held

    def close(self) -> None:
        self._flowing.set()
        self.cut()
        with self._lock:
            self._closed = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._accepting.join(5)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closed:
                    _reset(client)
                    return
                refused = self._cut
            if refused:
                _reset(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _reset(client)
                continue
            server.settimeout(None)
            with self._lock:
                if self._cut:  # cut while connecting
                    _reset(client)
                    _reset(server)
                    continue
                self._open.update((client, server))
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                with self._lock:
                    self._held += len(data)
                    if self._trigger is not None and self._trigger in data:
                        self._trigger = None
                        self._flowing.clear()
                self._flowing.wait()
                with self._lock:
                    self._held -= len(data)
                sink.sendall(data)
        except OSError:
            pass
        with self._lock:
            pair = {source, sink} & self._open
            self._open -= pair
        for sock in pair:
            _reset(sock)

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
